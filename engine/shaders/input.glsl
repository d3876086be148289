// Reading element i of a tensor stored in a uint[] buffer, in its own dtype.
//
// Define INPUT as the buffer's array name before including this file. The
// tensor's first byte is `base` bytes into the buffer (an imported tensor's
// pages rarely start at its first element). Every decode here is exact
// (float16 subnormals included), so the numpy twin's astype(float32) agrees.

#define DT_F32 0u
#define DT_F16 1u
#define DT_BF16 2u
#define DT_I32 3u
#define DT_U8 4u

float half_bits_to_float(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0u) {  // zero or subnormal: m * 2^-24, exact in float32
        precise float v = float(m) * 5.9604644775390625e-8;
        return s != 0u ? -v : v;
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

float load_input(uint base, uint dtype, uint i) {
    // One load whatever the dtype, then decode with arithmetic: a CPU implementation
    // (lavapipe) runs every side of a branch, so a load per dtype would cost four loads.
    uint shift = dtype == DT_U8 ? 0u : (dtype == DT_F16 || dtype == DT_BF16) ? 1u : 2u;
    uint b = base + (i << shift);  // the byte address of a 2- or 1-byte element
    uint word = INPUT[shift == 2u ? (base >> 2) + i : b >> 2];
    uint bits = shift == 2u ? word : (word >> ((b & 3u) * 8u)) & (shift == 1u ? 0xFFFFu : 255u);
    if (dtype == DT_F32) return uintBitsToFloat(bits);
    if (dtype == DT_I32) return float(int(bits));
    if (dtype == DT_U8) return float(bits);
    return dtype == DT_BF16 ? uintBitsToFloat(bits << 16) : half_bits_to_float(bits);
}
