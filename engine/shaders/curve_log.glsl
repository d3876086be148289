// log2 of a positive normal float32 with + - * only (the curve's log axis; docs/determinism.md):
// v = m * 2^e; a mantissa m >= 1.5 is halved (exact) so that u = m - 1 lies in [-1/4, 1/2), and
// log2(v) = e + u * (C0 + C1 u + ... + C8 u^8) by Horner steps, each flushed and `precise`.
// log2(1) = 0 and log2(2^k) = k exactly. caliper_vk/views/_curveaxes.py (log2_exact) is the
// numpy twin, bit for bit. Include after common.glsl and curve_params.glsl (SPEC_LOGY).

float log2e(float v) {
    uint b = floatBitsToUint(v);
    int e = int(b >> 23) - 127;
    uint mb = (b & 0x007FFFFFu) | 0x3F800000u;
    if (mb >= 0x3FC00000u) {
        mb -= 0x00800000u;
        e += 1;
    }
    precise float u = ftz(uintBitsToFloat(mb) - 1.0);
    precise float acc = uintBitsToFloat(LOG2_C8);
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C7));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C6));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C5));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C4));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C3));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C2));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C1));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(LOG2_C0));
    precise float r = ftz(float(e) + ftz(acc * u));
    return r;
}

// What a sample draws as on the axis: the value, or on a log axis its log2 (NaN for a finite
// value <= 0, which is not drawn and is counted by the stats pass).
float on_axis(float v) {
    if (SPEC_LOGY == 0u || classify(v) != CLASS_FINITE) return v;
    float u = ftz(v);
    return u > 0.0 ? log2e(u) : uintBitsToFloat(0x7FC00000u);
}
