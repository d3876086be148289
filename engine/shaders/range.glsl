// Value ranges resolved on the device (docs/determinism.md, "Ranges on the device").
//
// A stats pass keeps the finite minimum and maximum of a view's values as orderable
// keys (32-bit atomicMin/atomicMax: exact in any order); resolve_range() turns them, or a
// fixed (lo, hi), into the (lo, hi, scale) the drawing passes read, where scale maps
// [lo, hi] onto [0, last]. Every float operation is `precise` (no contraction) and
// assumes round-to-nearest-even (what every known Vulkan driver does for + - *, and
// what numpy does in float32); results are flushed by ftz() as everywhere in the exact
// path. The reciprocal has no division: 1 / (2 d) = (1 / m) * 2^-(e + 1) for
// d = m * 2^e with m in [1, 2); 1 / m is a linear estimate refined by four Newton steps
// of multiplies and adds, and the power of two goes on through the exponent bits.
// caliper_vk/views/_exact.py (device_range) is the numpy twin, bit for bit.
// Include after common.glsl and range_params.glsl (MODE_FIXED, MODE_AUTO, MODE_SYMMETRIC, MODE_GROW).

const uint NO_KEY = 0xFFFFFFFFu;  // the min key of a reduction that saw no finite value

// recip_mantissa() (1 / m for m in [1, 2)) is in common.glsl.

// last / (hi - lo) for hi > lo, computed as last * (1 / (2 d)) with d = hi/2 - lo/2 (no overflow).
float range_scale(float lo, float hi, float last) {
    precise float dh = ftz(ftz(hi * 0.5) - ftz(lo * 0.5));
    uint db = floatBitsToUint(dh);
    int e = int(db >> 23) - 127;
    float m = uintBitsToFloat((db & 0x007FFFFFu) | 0x3F800000u);
    precise float s = ftz(last * recip_mantissa(m));
    int biased = int(floatBitsToUint(s) >> 23) - (e + 1);
    if (biased <= 0) return 0.0;
    return uintBitsToFloat((floatBitsToUint(s) & 0x807FFFFFu) | (uint(biased) << 23));
}

// (lo, hi, scale) from the reduction's keys (AUTO, SYMMETRIC), a fixed pair (FIXED), or the
// fixed pair grown to hold the finite extremes (GROW: min(LO, least), max(HI, greatest)). No
// finite value: (0, 1) (GROW: the fixed pair). A range narrower than 2^-100 is widened by max(|lo| / 2, 1/2) on
// each side (clamped to the largest finite float), so a constant field maps to the middle.
vec3 resolve_range(uint mode, uint kmin, uint kmax, float fixed_lo, float fixed_hi, float last) {
    float lo = fixed_lo;
    float hi = fixed_hi;
    if (mode == MODE_GROW) {
        if (kmin != NO_KEY) {
            lo = min(lo, from_orderable(kmin));
            hi = max(hi, from_orderable(kmax));
        }
    } else if (mode != MODE_FIXED) {
        if (kmin == NO_KEY) { lo = 0.0; hi = 1.0; }
        else {
            lo = from_orderable(kmin);
            hi = from_orderable(kmax);
            if (mode == MODE_SYMMETRIC) { hi = max(abs(lo), abs(hi)); lo = -hi; }
        }
    }
    precise float dh = ftz(ftz(hi * 0.5) - ftz(lo * 0.5));
    if (!(dh >= uintBitsToFloat(0x0D800000u))) {  // 2^-100
        precise float pad = max(ftz(abs(lo) * 0.5), 0.5);
        precise float nlo = max(ftz(lo - pad), -uintBitsToFloat(0x7F7FFFFFu));
        precise float nhi = min(ftz(hi + pad), uintBitsToFloat(0x7F7FFFFFu));
        lo = nlo;
        hi = nhi;
    }
    return vec3(lo, hi, range_scale(lo, hi, last));
}
