#version 450
// Histogram, pass 1: count values into fixed bins. bin = floor((v - lo) * scale)
// in float32 with the exact-path rules (scale = bins / (hi - lo), made on the
// host); v == hi goes to the last bin; values outside [lo, hi], NaN, +Inf and
// -Inf are counted apart. Integer counts: the order of atomics cannot matter.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "histogram_params.glsl"

layout(std140, binding = 0) uniform Params { uvec4 PV[HG_VEC4S]; };
layout(std430, binding = 1) readonly buffer Data { uint data[]; };
layout(std430, binding = 2) buffer Counts { uint counts[]; };
layout(std430, binding = 3) buffer Stats { uint stats[]; };

#define INPUT data
#include "input.glsl"

#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(HG_N);
    uint bins = P(HG_BINS);
    uint special[5] = uint[5](0u, 0u, 0u, 0u, 0u);
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float v = load_input(P(HG_BASE), P(HG_DTYPE), i);
        uint cls = classify(v);
        if (cls == CLASS_NAN) special[HS_NAN] += 1u;
        else if (cls == CLASS_POSINF) special[HS_POSINF] += 1u;
        else if (cls == CLASS_NEGINF) special[HS_NEGINF] += 1u;
        else {
            float u = ftz(v);
            if (u < f(HG_LO)) special[HS_BELOW] += 1u;
            else if (u > f(HG_HI)) special[HS_ABOVE] += 1u;
            else {
                precise float d = ftz(u - f(HG_LO));
                precise float t = ftz(d * f(HG_SCALE));
                uint b = t >= float(bins) ? bins - 1u : uint(t);
                atomicAdd(counts[b], 1u);
            }
        }
    }
    for (int k = 0; k < 5; ++k) {
        if (special[k] != 0u) atomicAdd(stats[k], special[k]);
    }
}
