#version 450
// Heatmap, pass 1: one invocation per element counts NaN, +Inf, -Inf and the
// finite values outside [lo, hi] (shown clamped to the end colours), and
// keeps the finite min and max it read (as orderable keys) — what this frame
// actually saw: the resolve pass (range_resolve.comp) makes the frame's value range
// from them, and the torn-frame test reads them. A range made from the values has
// LO = -Inf, HI = +Inf here: nothing is outside it.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "heatmap_stats_bindings.glsl"  // its parameters and bindings: caliper_vk/views/heatmap.py

#define INPUT data
#include "input.glsl"

// Each invocation covers PER_INVOCATION consecutive elements and keeps its own
// counts and extremes, then issues one atomic per counter: a million atomics on
// one address serialise badly on every GPU (and workgroup barriers are slow on
// CPU implementations). Mirrored by caliper_vk/views/heatmap.py.
#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(HM_N);
    uint kmin = 0xFFFFFFFFu;
    uint kmax = 0u;
    uint counts[5] = uint[5](0u, 0u, 0u, 0u, 0u);
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float v = load_input(P(HM_BASE), P(HM_DTYPE), i);
        uint cls = classify(v);
        if (cls == CLASS_NAN) counts[ST_NAN] += 1u;
        else if (cls == CLASS_POSINF) counts[ST_POSINF] += 1u;
        else if (cls == CLASS_NEGINF) counts[ST_NEGINF] += 1u;
        else {
            float u = ftz(v);
            uint key = orderable(u);
            kmin = min(kmin, key);
            kmax = max(kmax, key);
            if (u < f(HM_LO)) counts[ST_BELOW] += 1u;
            else if (u > f(HM_HI)) counts[ST_ABOVE] += 1u;
        }
    }
    for (int k = 0; k < 5; ++k) {
        if (counts[k] != 0u) atomicAdd(stats[k], counts[k]);
    }
    if (kmin != 0xFFFFFFFFu) {
        atomicMin(stats[ST_MIN], kmin);
        atomicMax(stats[ST_MAX], kmax);
    }
}
