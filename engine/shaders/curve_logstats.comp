#version 450
// Curve on a log axis, pass 1 (instead of the heatmap stats pass): the min and max keys of
// log2e(v) over the finite values v > 0 (stats words ST_MIN, ST_MAX, for the resolve pass:
// the frame's range in log2 units), and the count of finite values <= 0 (CS_NONPOS), which the
// axis cannot draw. PER_INVOCATION consecutive values per invocation, as heatmap_stats.comp.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "curve_logstats_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_curveaxes.py
#include "heatmap_params.glsl"  // ST_MIN, ST_MAX

#include "curve_log.glsl"  // log2e, on_axis (SPEC_LOGY)

#define INPUT data
#include "input.glsl"

#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(CV_N);
    uint kmin = 0xFFFFFFFFu;
    uint kmax = 0u;
    uint nonpos = 0u;
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float v = load_input(P(CV_BASE), P(CV_DTYPE), i);
        if (classify(v) != CLASS_FINITE) continue;
        float u = ftz(v);
        if (!(u > 0.0)) {
            nonpos += 1u;
            continue;
        }
        uint key = orderable(log2e(u));
        kmin = min(kmin, key);
        kmax = max(kmax, key);
    }
    if (nonpos != 0u) atomicAdd(stats[CS_NONPOS], nonpos);
    if (kmin != 0xFFFFFFFFu) {
        atomicMin(stats[ST_MIN], kmin);
        atomicMax(stats[ST_MAX], kmax);
    }
}
