#version 450
// Value ranges, resolve pass: invocation i turns range i's finite min/max keys (words
// KEYS + i and KEYS + COUNT + i of the view's stats buffer, written by its stats pass) or the
// fixed (LO, HI) into lo, hi, scale (words OUT + 3i .. OUT + 3i + 2), which the drawing
// passes of the same frame read and the host reads back with the frame's counters.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "range_resolve_bindings.glsl"  // its parameters and bindings: engine/shaders/passes.py
#include "range.glsl"

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= P(RG_COUNT)) return;
    uint keys = P(RG_KEYS) + i;
    vec3 r = resolve_range(P(RG_MODE), stats[keys], stats[keys + P(RG_COUNT)], f(RG_LO), f(RG_HI), f(RG_LAST));
    uint out_at = P(RG_OUT) + 3u * i;
    stats[out_at] = floatBitsToUint(r.x);
    stats[out_at + 1u] = floatBitsToUint(r.y);
    stats[out_at + 2u] = floatBitsToUint(r.z);
}
