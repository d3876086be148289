#version 450
// Images, pass 1: one invocation per PER_INVOCATION consecutive elements counts NaN,
// +Inf and -Inf and keeps the finite min/max of each range group it touches (a
// tile with normalize="tile", else the one group of all tiles) as orderable keys,
// with one atomic per group run: exact in any order. The resolve pass
// (range_resolve.comp) makes each group's (lo, hi, scale) from them.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "images_stats_bindings.glsl"  // its parameters and bindings: caliper_vk/views/images.py

#define INPUT data
#include "input.glsl"

#define PER_INVOCATION 16u

void flush_keys(uint group, uint kmin, uint kmax) {
    if (kmin == 0xFFFFFFFFu) return;
    atomicMin(stats[IS_KEYS + group], kmin);
    atomicMax(stats[IS_KEYS + P(IM_GROUPS) + group], kmax);
}

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(IM_N_TILES) * P(IM_TILE_H) * P(IM_TILE_W);
    uint per_tile = P(IM_TILE_H) * P(IM_TILE_W);
    uint counts[3] = uint[3](0u, 0u, 0u);
    uint group = 0xFFFFFFFFu;
    uint kmin = 0xFFFFFFFFu;
    uint kmax = 0u;
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        uint g = P(IM_SHARED) != 0u ? 0u : i / per_tile;
        if (g != group) {
            if (group != 0xFFFFFFFFu) flush_keys(group, kmin, kmax);
            group = g;
            kmin = 0xFFFFFFFFu;
            kmax = 0u;
        }
        float v = load_input(P(IM_BASE), P(IM_DTYPE), i);
        uint cls = classify(v);
        if (cls == CLASS_FINITE) {
            uint key = orderable(ftz(v));
            kmin = min(kmin, key);
            kmax = max(kmax, key);
        } else {
            counts[cls - 1u] += 1u;  // NaN, +Inf, -Inf
        }
    }
    if (group != 0xFFFFFFFFu) flush_keys(group, kmin, kmax);
    for (int k = 0; k < 3; ++k) {
        if (counts[k] != 0u) atomicAdd(stats[IS_NAN + uint(k)], counts[k]);
    }
}
