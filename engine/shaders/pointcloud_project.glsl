// The projection of point i, shared by the splat and paint passes: the same float
// operations in the same order, so both passes compute the same key and pixel.
// Include after common.glsl, pointcloud_params.glsl, the Params block, input.glsl and
// pointcloud_color.glsl (with POINT_INPUTS: the key holds the point's colour index).

#define PROJ_NEAR 0u       // on or near the panel: key, ix and iy are set
#define PROJ_NONFINITE 1u  // a NaN or Inf coordinate
#define PROJ_FAR 2u        // beyond the margin around the panel (or too far to convert to int)

uint project(uint i, out uint key, out int ix, out int iy) {
    key = 0u;
    ix = 0;
    iy = 0;
    uint dim = SPEC_DIM;
    uint base = P(PC_BASE);
    uint dtype = SPEC_DTYPE;
    float x = load_input(base, dtype, i * dim);
    float y = load_input(base, dtype, i * dim + 1u);
    float z = dim == 3u ? load_input(base, dtype, i * dim + 2u) : 0.0;
    if (classify(x) != CLASS_FINITE || classify(y) != CLASS_FINITE || classify(z) != CLASS_FINITE) {
        return PROJ_NONFINITE;
    }
    precise float dx = ftz(ftz(x) - f(PC_CX));
    precise float dy = ftz(ftz(y) - f(PC_CY));
    precise float dz = ftz(ftz(z) - f(PC_CZ));
    precise float qx = ftz(ftz(ftz(f(PC_R0) * dx) + ftz(f(PC_R1) * dy)) + ftz(f(PC_R2) * dz));
    precise float qy = ftz(ftz(ftz(f(PC_R3) * dx) + ftz(f(PC_R4) * dy)) + ftz(f(PC_R5) * dz));
    precise float qz = ftz(ftz(ftz(f(PC_R6) * dx) + ftz(f(PC_R7) * dy)) + ftz(f(PC_R8) * dz));
    precise float sx = ftz(ftz(qx * f(PC_SCALE)) + f(PC_OX));
    precise float sy = ftz(ftz(qy * f(PC_NSCALE)) + f(PC_OY));
    precise float margin = float(P(PC_MARGIN));
    precise float lo = -margin;
    precise float x_end = float(P(PC_W)) + margin;
    precise float y_end = float(P(PC_H)) + margin;
    if (!(sx >= lo && sx < x_end && sy >= lo && sy < y_end)) return PROJ_FAR;
    ix = int(floor(sx));
    iy = int(floor(sy));
    // depth level: 0 at the nearest depth of the fit (qz = radius), DEPTH_MAX at the
    // farthest, clamped beyond (fixed bounds); nearer points get smaller keys
    precise float nz = ftz(-qz);
    uint level = lut_index(nz, f(PC_ZMIN), f(PC_DSCALE), DEPTH_MAX);
    key = (level << KEY_COLOR_BITS) | color_index(i);
    return PROJ_NEAR;
}

// The footprint of a point SPEC_SIZE = k pixels across, as footprint() in
// caliper_vk/views/pointcloud.py makes it: the offsets (dx, dy), each in
// foot_lo() .. foot_hi(), with (2dx - e)^2 + (2dy - e)^2 <= k^2, e = 1 for even k.
// Integer math on a specialisation constant: the compiler unrolls the loops over it.
int foot_lo() { return -((int(SPEC_SIZE) - 1) / 2); }
int foot_hi() { return int(SPEC_SIZE) / 2; }
bool in_footprint(int dx, int dy) {
    int k = int(SPEC_SIZE);
    int e = 1 - (k & 1);
    return (2 * dx - e) * (2 * dx - e) + (2 * dy - e) * (2 * dy - e) <= k * k;
}
