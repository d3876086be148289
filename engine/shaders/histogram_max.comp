#version 450
// Histogram, pass 2 (one workgroup): which older steps share this frame's bin grid
// (the newest ones counted over the same (lo, hi) as the resolve pass wrote, up to
// the first that was not: counts on another grid are not comparable bin for bin),
// and the tallest bin over the current counts and those steps, which sets the
// shared vertical scale. history: HISTORY (lo, hi) pairs, then HISTORY rows of bins.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "histogram_max_bindings.glsl"  // its parameters and bindings: caliper_vk/views/histogram.py
#include "heatmap_params.glsl"

void main() {
    uint k_all = P(HG_HISTORY);
    uint bins = P(HG_BINS);
    uint kept = 0u;
    while (kept < k_all && history[2u * kept] == stats[ST_LO] && history[2u * kept + 1u] == stats[ST_HI])
        kept += 1u;
    uint m = 0u;
    for (uint b = gl_LocalInvocationID.x; b < bins; b += 256u) {
        m = max(m, counts[b]);
        for (uint k = 0u; k < kept; ++k) m = max(m, history[2u * k_all + k * bins + b]);
    }
    if (m != 0u) atomicMax(stats[HS_MAX], m);
    if (gl_LocalInvocationID.x == 0u) stats[HS_KEPT] = kept;
}
