#version 450
// Histogram, pass 2: the tallest bin (and the tallest overlaid older step, passed
// in), which sets the shared vertical scale.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "histogram_params.glsl"

layout(std140, binding = 0) uniform Params { uvec4 PV[HG_VEC4S]; };
layout(std430, binding = 1) readonly buffer Counts { uint counts[]; };
layout(std430, binding = 2) buffer Stats { uint stats[]; };

void main() {
    uint m = gl_LocalInvocationID.x == 0u ? P(HG_HISTORY_MAX) : 0u;
    for (uint b = gl_LocalInvocationID.x; b < P(HG_BINS); b += 256u) m = max(m, counts[b]);
    if (m != 0u) atomicMax(stats[HS_MAX], m);
}
