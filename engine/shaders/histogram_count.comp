#version 450
// Histogram, pass 1: count values into fixed bins. bin = floor((v - lo) * scale)
// in float32 with the exact-path rules, over the range the frame's resolve pass
// wrote (stats words ST_LO, ST_HI, ST_SCALE; scale = bins / (hi - lo)); v == hi
// goes to the last bin. NaN, +Inf, -Inf and finite values outside a fixed range
// are counted apart by the heatmap stats pass that ran before. Integer counts:
// the order of atomics cannot matter.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "histogram_count_bindings.glsl"  // its parameters and bindings: caliper_vk/views/histogram.py
#include "heatmap_params.glsl"  // the stats words of the heatmap stats pass and the range

#define INPUT data
#include "input.glsl"

#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(HG_N);
    uint bins = P(HG_BINS);
    float lo = uintBitsToFloat(stats[ST_LO]);
    float hi = uintBitsToFloat(stats[ST_HI]);
    float scale = uintBitsToFloat(stats[ST_SCALE]);
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float v = load_input(P(HG_BASE), P(HG_DTYPE), i);
        if (classify(v) != CLASS_FINITE) continue;
        float u = ftz(v);
        if (u < lo || u > hi) continue;
        precise float d = ftz(u - lo);
        precise float t = ftz(d * scale);
        uint b = t >= float(bins) ? bins - 1u : uint(t);
        atomicAdd(counts[b], 1u);
    }
}
