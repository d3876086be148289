#version 450
// Point cloud, the fit's second pass: one invocation turns the box (pointcloud_bounds.comp, or
// the fixed box FLO..FHI) into the camera words the splat and paint passes of the same frame
// read from the parameter block: the centre (CX..CZ), the scale (SCALE, NSCALE) and the depth
// range (ZMIN, DSCALE). The radius is half the box diagonal, r = 2^q sqrt(s), s the sum of the
// squared half extents scaled by 2^-q (q the largest one's exponent: exact, and s in [1, 48));
// its reciprocal comes without division or sqrt: 1/sqrt(s) starts from a bit-level estimate
// and takes NEWTON_STEPS steps y = y * (1.5 - (s/2) y y) of precise, flushed multiplies and
// adds; 1/r = y 2^-q. A box with no extent (one point, no finite point) takes radius 1.
// Every float operation is precise and flushed, in this order, in the twin
// (caliper_vk/views/_pointfit.py: device_fit).
layout(local_size_x = 1) in;
#include "common.glsl"
#include "pointcloud_fit_bindings.glsl"  // its parameters and bindings: engine/shaders/passes.py
#include "range_params.glsl"
#include "range.glsl"

// The parameter block itself, as a storage buffer: the same words (std430 uvec4s are laid out
// as std140's), read through P()/f() and written here. The barrier after this pass makes the
// words visible to the uniform reads of the splat.

void set_f(uint k, float v) { PV[k >> 2][k & 3u] = floatBitsToUint(v); }

// Values read in place: the colour range of this frame, by the rule every view's device range
// follows (range.glsl: resolve_range, twinned by _exact.device_range), from the value keys
// pointcloud_values.comp reduced; VLO and VSCALE go to the parameter block, (lo, hi) to the
// counters (the legend shows what the frame used).
void value_range() {
    vec3 r = resolve_range(P(PC_VRANGE), box[BOX_VMIN], ~box[BOX_VNOT_MAX], 0.0, 1.0, 255.0);
    set_f(PC_VLO, r.x);
    set_f(PC_VSCALE, r.z);
    stats[ST_VLO] = floatBitsToUint(r.x);
    stats[ST_VHI] = floatBitsToUint(r.y);
}

void main() {
    float lo[3];
    float hi[3];
    bool fixed_box = P(PC_FIXED) != 0u;
    bool empty = !fixed_box && box[BOX_MIN] == 0xFFFFFFFFu;
    for (uint k = 0u; k < 3u; ++k) {
        if (fixed_box) {
            lo[k] = ftz(f(PC_FLO0 + k));
            hi[k] = ftz(f(PC_FHI0 + k));
        } else if (empty) {
            lo[k] = 0.0;
            hi[k] = 0.0;
        } else {
            lo[k] = from_orderable(box[BOX_MIN + k]);
            hi[k] = from_orderable(~box[BOX_NOT_MAX + k]);
        }
    }
    float e[3];
    for (uint k = 0u; k < 3u; ++k) {
        precise float a = ftz(lo[k] * 0.5);
        precise float b = ftz(hi[k] * 0.5);
        precise float c = ftz(a + b);
        precise float d = ftz(b - a);
        set_f(PC_CX + k, c);
        e[k] = d;
    }
    // the half extents scaled by g = 2^-q, q the exponent of the largest (exact): their squares
    // neither overflow nor underflow, and s lies in [1, 48)
    float emax = max(max(e[0], e[1]), e[2]);
    int q = 0;
    precise float s = 1.0;  // no extent: radius 1
    if (emax > 0.0) {
        q = clamp(int((floatBitsToUint(emax) >> 23) & 0xFFu) - 127, -126, 126);
        float g = uintBitsToFloat(uint(127 - q) << 23);
        s = 0.0;
        for (uint k = 0u; k < 3u; ++k) {
            precise float u = ftz(e[k] * g);
            precise float u2 = ftz(u * u);
            s = ftz(s + u2);
        }
    }
    // y = 1 / sqrt(s): a bit-level estimate (within 3.5%), then Newton steps
    precise float h = ftz(s * 0.5);
    float y = uintBitsToFloat(0x5F3759DFu - (floatBitsToUint(s) >> 1));
    for (uint i = 0u; i < NEWTON_STEPS; ++i) {
        precise float t = ftz(y * y);
        precise float u = ftz(h * t);
        precise float v = ftz(1.5 - u);
        precise float w = ftz(y * v);
        y = w;
    }
    // radius = sqrt(s) * 2^q and its reciprocal y * 2^-q (powers of two: exact)
    precise float inv = ftz(y * uintBitsToFloat(uint(127 - q) << 23));
    precise float rs = ftz(s * y);
    precise float r = ftz(rs * uintBitsToFloat(uint(127 + q) << 23));
    precise float scale = ftz(f(PC_FITK) * inv);
    precise float dscale = ftz(float(DEPTH_MAX) * 0.5 * inv);
    set_f(PC_SCALE, scale);
    set_f(PC_NSCALE, -scale);
    set_f(PC_ZMIN, -r);
    set_f(PC_DSCALE, dscale);
    if (P(PC_VRANGE) != VRANGE_HOST) value_range();
}
