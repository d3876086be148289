#version 450
// Curve, one invocation: the EMA of the raw trace (when the view smooths) and the last
// finite sample (for the title), from the values where they live. The EMA is debiased as
// Adam's moments are: m_0 = 0, m_k = alpha * m_(k-1) + beta * x_k (beta = 1 - alpha, made
// on the host from the parameter), p_k = alpha^k, y_k = m_k * (1 / (1 - p_k)) over the
// finite samples, so early samples are not over-weighted (y_1 = x_1) and the line does
// not sit above a falling loss; 1 / (1 - p) has no division (recip_unit in common.glsl).
// Float32 with `precise` multiplies and adds, each flushed (round-to-nearest-even assumed,
// as everywhere in the exact path); non-finite samples get NaN (a gap stays a gap) and are
// skipped. One invocation runs it in sample order: the same bits on every device, and the
// numpy twin (caliper_vk/views/curve.py, ema32) runs the same steps.
layout(local_size_x = 1) in;
#include "common.glsl"
#include "curve_smooth_bindings.glsl"  // its parameters and bindings: engine/shaders/passes.py

#define INPUT data
#include "input.glsl"

void main() {
    uint n = P(CV_N);
    if (P(CV_SERIES) == 2u) {
        float m = 0.0;
        float p = 1.0;
        for (uint i = 0u; i < n; ++i) {
            float v = load_input(P(CV_BASE), P(CV_DTYPE), i);
            if (classify(v) != CLASS_FINITE) {
                smoothed[i] = uintBitsToFloat(0x7FC00000u);
                continue;
            }
            float x = ftz(v);
            precise float a = ftz(f(CV_ALPHA) * m);
            precise float b = ftz(f(CV_BETA) * x);
            precise float s = ftz(a + b);
            precise float pn = ftz(f(CV_ALPHA) * p);
            precise float d = ftz(1.0 - pn);
            precise float y = ftz(s * recip_unit(d));
            m = s;
            p = pn;
            smoothed[i] = y;
        }
    }
    uint last = 0u;  // 1 + the index of the last finite sample; 0: none
    for (uint i = n; i > 0u; --i) {
        float v = load_input(P(CV_BASE), P(CV_DTYPE), i - 1u);
        if (classify(v) == CLASS_FINITE) {
            last = i;
            stats[CS_LAST] = floatBitsToUint(ftz(v));
            break;
        }
    }
    stats[CS_LAST_INDEX] = last;
}
