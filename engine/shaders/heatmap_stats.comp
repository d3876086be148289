#version 450
// Heatmap, pass 1: one invocation per element counts NaN, +Inf, -Inf and the
// finite values outside [lo, hi] (shown clamped to the end colours), and
// keeps the finite min and max it read (as orderable keys) — what this frame
// actually saw, used by the live path and by the torn-frame test.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "heatmap_params.glsl"

layout(std430, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, binding = 1) readonly buffer Data { uint data[]; };
layout(std430, binding = 2) buffer Stats { uint stats[]; };

#define INPUT data
#include "input.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P[HM_N]) return;
    float v = load_input(P[HM_BASE], P[HM_DTYPE], i);
    uint cls = classify(v);
    if (cls == CLASS_NAN) atomicAdd(stats[ST_NAN], 1u);
    else if (cls == CLASS_POSINF) atomicAdd(stats[ST_POSINF], 1u);
    else if (cls == CLASS_NEGINF) atomicAdd(stats[ST_NEGINF], 1u);
    else {
        float u = ftz(v);
        atomicMin(stats[ST_MIN], orderable(u));
        atomicMax(stats[ST_MAX], orderable(u));
        if (u < f(HM_LO)) atomicAdd(stats[ST_BELOW], 1u);
        else if (u > f(HM_HI)) atomicAdd(stats[ST_ABOVE], 1u);
    }
}
