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
    if (dtype == DT_F32) return uintBitsToFloat(INPUT[(base >> 2) + i]);
    if (dtype == DT_I32) return float(int(INPUT[(base >> 2) + i]));
    if (dtype == DT_U8) {
        uint b = base + i;
        return float((INPUT[b >> 2] >> ((b & 3u) * 8u)) & 255u);
    }
    uint b = base + 2u * i;
    uint h = (INPUT[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu;
    return dtype == DT_BF16 ? uintBitsToFloat(h << 16) : half_bits_to_float(h);
}
