#version 450
// Point cloud, pass 1: project every point and keep, per pixel, the nearest
// point by a 64-bit atomicMin of (orderable(-depth) << 32 | index). The result
// does not depend on the order invocations run in: ties go to the lower index.
#extension GL_EXT_shader_atomic_int64 : require
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_params.glsl"

layout(std430, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, binding = 1) readonly buffer Positions { uint pos[]; };
layout(std430, binding = 2) buffer Depth { uint64_t depth[]; };
layout(std430, binding = 3) readonly buffer Footprint { ivec2 foot[]; };
layout(std430, binding = 4) buffer Stats { uint stats[]; };
layout(std430, binding = 5) readonly buffer Values { float values[]; };

#define INPUT pos
#include "input.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P[PC_N]) return;
    uint dim = P[PC_DIM];
    uint base = P[PC_BASE];
    uint dtype = P[PC_DTYPE];
    float x = load_input(base, dtype, i * dim);
    float y = load_input(base, dtype, i * dim + 1u);
    float z = dim == 3u ? load_input(base, dtype, i * dim + 2u) : 0.0;
    if (classify(x) != CLASS_FINITE || classify(y) != CLASS_FINITE || classify(z) != CLASS_FINITE) {
        atomicAdd(stats[ST_NONFINITE], 1u);
        return;
    }
    if (P[PC_MODE] == MODE_VALUES && classify(values[i]) != CLASS_FINITE) {
        atomicAdd(stats[ST_NONFINITE_VALUES], 1u);
    }
    precise float dx = ftz(ftz(x) - f(PC_CX));
    precise float dy = ftz(ftz(y) - f(PC_CY));
    precise float dz = ftz(ftz(z) - f(PC_CZ));
    precise float qx = ftz(ftz(ftz(f(PC_R0) * dx) + ftz(f(PC_R1) * dy)) + ftz(f(PC_R2) * dz));
    precise float qy = ftz(ftz(ftz(f(PC_R3) * dx) + ftz(f(PC_R4) * dy)) + ftz(f(PC_R5) * dz));
    precise float qz = ftz(ftz(ftz(f(PC_R6) * dx) + ftz(f(PC_R7) * dy)) + ftz(f(PC_R8) * dz));
    precise float sx = ftz(ftz(qx * f(PC_SCALE)) + f(PC_OX));
    precise float sy = ftz(ftz(qy * f(PC_NSCALE)) + f(PC_OY));
    int w = int(P[PC_W]);
    int h = int(P[PC_H]);
    float margin = float(P[PC_MARGIN]);
    // Far outside the panel (or too far to convert to int): not drawn, counted.
    if (!(sx >= -margin && sx < float(w) + margin && sy >= -margin && sy < float(h) + margin)) {
        atomicAdd(stats[ST_OFFSCREEN], 1u);
        return;
    }
    int ix = int(floor(sx));
    int iy = int(floor(sy));
    if (ix < 0 || ix >= w || iy < 0 || iy >= h) atomicAdd(stats[ST_OFFSCREEN], 1u);
    uint64_t key = (uint64_t(orderable(ftz(-qz))) << 32) | uint64_t(i);
    uint nfoot = P[PC_NFOOT];
    for (uint k = 0u; k < nfoot; ++k) {
        int px = ix + foot[k].x;
        int py = iy + foot[k].y;
        if (px >= 0 && px < w && py >= 0 && py < h) {
            atomicMin(depth[uint(py) * uint(w) + uint(px)], key);
        }
    }
}
