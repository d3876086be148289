#version 450
// Curve: the EMA of the raw trace (when the view smooths) and the last finite sample (for the
// title), from the values where they live, as a blocked scan in three stages (SPEC_STAGE):
//   0. one invocation per chunk of CHUNK samples runs the recurrence over its chunk from zero:
//      m = alpha * m + beta * x over its finite samples (beta = 1 - alpha, made on the host),
//      keeping its sum, its count t of finite samples and 1 + its last finite index;
//   1. one invocation combines the chunks in order: the carry into chunk j + 1 is
//      alpha^t_j * M_j + m_j and the debiasing power P_(j+1) = P_j * alpha^t_j (alpha^t by
//      squaring), and takes the last finite sample;
//   2. one invocation per chunk applies its carry: from m = M_j, p = P_j it runs the recurrence
//      again and writes y = m * (1 / (1 - p)) after each finite sample (p = alpha^t: debiased
//      as Adam's moments are, so the line starts at the first sample and does not sit above a
//      falling loss; 1 / (1 - p) has no division: recip_unit in common.glsl), NaN at the others
//      (a gap stays a gap); on a log axis it writes log2e(y), or NaN where y <= 0.
// Float32 with `precise` multiplies and adds, each flushed (round-to-nearest-even assumed, as
// everywhere in the exact path): the same bits on every device, and the numpy twin
// (caliper_vk/views/curve.py, ema32) runs the same blocks.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "curve_params.glsl"

layout(std140, binding = 0) uniform Params { uvec4 PV[CV_VEC4S]; };
#include "curve_log.glsl"  // log2e, on_axis (SPEC_LOGY)
layout(std430, binding = 1) readonly buffer Data { uint data[]; };
layout(std430, binding = 2) writeonly buffer Smooth { float smoothed[]; };
layout(std430, binding = 3) buffer Stats { uint stats[]; };
layout(std430, binding = 4) buffer Scan { uint scan[]; };  // SC_WORDS per chunk

#define INPUT data
#include "input.glsl"

float power(float a, uint t) {  // a^t by squaring, each product flushed
    float r = 1.0;
    float b = a;
    for (uint k = t; k != 0u; k >>= 1) {
        if ((k & 1u) != 0u) {
            precise float rn = ftz(r * b);
            r = rn;
        }
        precise float bn = ftz(b * b);
        b = bn;
    }
    return r;
}

void local_scan(uint j) {
    uint n = P(CV_N);
    uint end = min((j + 1u) * P(CV_CHUNK), n);
    bool smoothing = P(CV_SERIES) == 2u;
    float m = 0.0;
    uint t = 0u;
    uint last = 0u;
    for (uint i = j * P(CV_CHUNK); i < end; ++i) {
        float v = load_input(P(CV_BASE), P(CV_DTYPE), i);
        if (classify(v) != CLASS_FINITE) continue;
        last = i + 1u;
        t += 1u;
        if (smoothing) {
            precise float a = ftz(f(CV_ALPHA) * m);
            precise float b = ftz(f(CV_BETA) * ftz(v));
            precise float s = ftz(a + b);
            m = s;
        }
    }
    scan[j * SC_WORDS] = floatBitsToUint(m);
    scan[j * SC_WORDS + 1u] = t;
    scan[j * SC_WORDS + 2u] = last;
}

void combine() {
    float m = 0.0;
    float p = 1.0;
    uint last = 0u;
    for (uint j = 0u; j < P(CV_CHUNKS); ++j) {
        scan[j * SC_WORDS + 3u] = floatBitsToUint(m);
        scan[j * SC_WORDS + 4u] = floatBitsToUint(p);
        float decay = power(f(CV_ALPHA), scan[j * SC_WORDS + 1u]);
        precise float carried = ftz(decay * m);
        precise float mn = ftz(carried + uintBitsToFloat(scan[j * SC_WORDS]));
        precise float pn = ftz(p * decay);
        m = mn;
        p = pn;
        last = max(last, scan[j * SC_WORDS + 2u]);
    }
    stats[CS_LAST_INDEX] = last;  // 1 + the index of the last finite sample; 0: none
    if (last != 0u) stats[CS_LAST] = floatBitsToUint(ftz(load_input(P(CV_BASE), P(CV_DTYPE), last - 1u)));
}

void apply_carry(uint j) {
    uint n = P(CV_N);
    uint end = min((j + 1u) * P(CV_CHUNK), n);
    float m = uintBitsToFloat(scan[j * SC_WORDS + 3u]);
    float p = uintBitsToFloat(scan[j * SC_WORDS + 4u]);
    for (uint i = j * P(CV_CHUNK); i < end; ++i) {
        float v = load_input(P(CV_BASE), P(CV_DTYPE), i);
        if (classify(v) != CLASS_FINITE) {
            smoothed[i] = uintBitsToFloat(0x7FC00000u);
            continue;
        }
        precise float a = ftz(f(CV_ALPHA) * m);
        precise float b = ftz(f(CV_BETA) * ftz(v));
        precise float s = ftz(a + b);
        precise float pn = ftz(f(CV_ALPHA) * p);
        precise float d = ftz(1.0 - pn);
        precise float y = ftz(s * recip_unit(d));
        m = s;
        p = pn;
        smoothed[i] = on_axis(y);
    }
}

void main() {
    uint j = gl_GlobalInvocationID.x;
    if (SPEC_STAGE == 1u) {
        if (j == 0u) combine();
    } else if (j < P(CV_CHUNKS)) {
        if (SPEC_STAGE == 0u) local_scan(j);
        else apply_carry(j);
    }
}
