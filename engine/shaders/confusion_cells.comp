#version 450
// Confusion view, cells pass: invocation r takes row r of the N x N counts where they live and
//   - with NORMALIZE, sums the row in a fixed order (an exact integer sum for int32/uint8 counts,
//     a left-to-right float32 sum with subnormals flushed for float counts) and takes the
//     reciprocal of the total without division (recip_positive: a power of two through the
//     exponent bits times recip_mantissa's Newton steps), so a cell's share is count x 1/total;
//     a row whose total is not positive (no examples) or NaN gets NaN shares, an infinite one 0;
//   - writes the values the text grid's passes draw (words r*N .. r*N + N - 1 of `shown`:
//     the counts as float32, or the shares);
//   - with TEXT, writes each cell's count as a string (count_text's rule, then encode()'s clip).
// Mirrored by caliper_vk/views/confusion.py (count_text, row_shares); keep in step.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 64) in;
#include "common.glsl"
#include "confusion_cells_bindings.glsl"  // its parameters and bindings: caliper_vk/views/confusion.py

#define INPUT data
#include "input.glsl"

#define MAX_CHARS 24u  // the longest count_text string ("-18446744073709551615" is 21)

// 1 / t for a positive normal t: t = m * 2^e with m in [1, 2); 2^-e * recip_mantissa(m), flushed
// to 0 where it would be subnormal. No division; confusion.py's recip_positive is the twin.
float recip_positive(float t) {
    uint tb = floatBitsToUint(t);
    int e = int(tb >> 23) - 127;
    float m = uintBitsToFloat((tb & 0x007FFFFFu) | 0x3F800000u);
    uint rb = floatBitsToUint(recip_mantissa(m));
    int biased = int(rb >> 23) - e;
    if (biased <= 0) return 0.0;
    return uintBitsToFloat((rb & 0x807FFFFFu) | (uint(biased) << 23));
}

// The reciprocal of a row's total: NaN for a total that is NaN or not positive, 0 for +Inf.
float total_reciprocal(float total) {
    uint cls = classify(total);
    if (cls == CLASS_POSINF) return 0.0;
    if (cls != CLASS_FINITE || total <= 0.0 || ftz(total) == 0.0) return uintBitsToFloat(0x7FC00000u);
    return recip_positive(total);
}

// The integer value of element i of an int32 or uint8 tensor.
int load_int(uint base, uint dtype, uint i) {
    if (dtype == DT_I32) return int(data[(base >> 2) + i]);
    uint b = base + i;
    return int((data[b >> 2] >> ((b & 3u) * 8u)) & 255u);
}

uint chars[MAX_CHARS];
uint n_chars;

void put(uint c) {
    if (n_chars < MAX_CHARS) chars[n_chars] = c;
    n_chars++;
}

void put_string_ascii(uint a, uint b, uint c, uint d, uint e, uint f) {  // up to 6 characters, 0 ends
    uint s[6] = uint[6](a, b, c, d, e, f);
    for (uint k = 0u; k < 6u && s[k] != 0u; k++) put(s[k]);
}

void put_decimal(uint64_t x) {  // the decimal digits of x, most significant first
    uint digits[20];
    uint k = 0u;
    do {
        digits[k++] = uint(x % 10ul);
        x /= 10ul;
    } while (x != 0ul);
    while (k > 0u) put(48u + digits[--k]);
}

uint64_t pow10(uint k) {
    uint64_t p = 1ul;
    for (uint i = 0u; i < k; i++) p *= 10ul;
    return p;
}

// count_text's rule for a finite value: whole numbers below 2^64 in magnitude as integers; others
// as Python's f"{v:.3g}" (3 significant digits, rounded half to even from the exact value,
// trailing zeros dropped, scientific below 1e-4 and from 1e3); below 1e-10 "~0"; whole ones from
// 2^64 up ">2^64" / "<-2^64".
void format_count(float v) {
    uint b = floatBitsToUint(v);
    bool neg = (b >> 31) != 0u;
    uint ex = (b >> 23) & 255u;
    uint man = b & 0x007FFFFFu;
    if (ex == 0u && man == 0u) {
        put(48u);
        return;
    }
    uint m = ex == 0u ? man : (man | 0x00800000u);
    int e = (ex == 0u ? 1 : int(ex)) - 150;  // |v| = m * 2^e exactly
    bool whole = e >= 0 || (-e < 24 && (m & ((1u << uint(-e)) - 1u)) == 0u);
    if (whole) {
        if (e > 40) {  // 2^64 or more
            if (neg) put_string_ascii(60u, 45u, 50u, 94u, 54u, 52u);  // "<-2^64"
            else put_string_ascii(62u, 50u, 94u, 54u, 52u, 0u);        // ">2^64"
            return;
        }
        if (neg) put(45u);
        put_decimal(e >= 0 ? uint64_t(m) << uint(e) : uint64_t(m >> uint(-e)));
        return;
    }
    uint s = uint(-e);  // |v| = m / 2^s, s >= 1, not whole
    if (s >= 64u) {  // below 2^-40
        put_string_ascii(126u, 48u, 0u, 0u, 0u, 0u);  // "~0"
        return;
    }
    // x: the decimal exponent, 10^x <= |v| < 10^(x + 1)
    int x;
    uint ip = s < 32u ? (m >> s) : 0u;
    if (ip != 0u) {
        x = 0;
        for (uint p = 10u; p <= ip && x < 9; p *= 10u) x++;
    } else {
        x = -1;
        while (x >= -10 && uint64_t(m) * pow10(uint(-x)) < (1ul << s)) x--;
        if (x < -10) {
            put_string_ascii(126u, 48u, 0u, 0u, 0u, 0u);  // "~0"
            return;
        }
    }
    // d: |v| x 10^(2 - x) rounded half to even, 100 <= d <= 1000
    uint64_t d;
    int k = 2 - x;
    if (k >= 0) {
        uint64_t num = uint64_t(m) * pow10(uint(k));
        d = num >> s;
        uint64_t rem = num & ((1ul << s) - 1ul);
        uint64_t halfway = 1ul << (s - 1u);
        if (rem > halfway || (rem == halfway && (d & 1ul) != 0ul)) d++;
    } else {
        uint64_t den = pow10(uint(-k)) << s;
        d = uint64_t(m) / den;
        uint64_t rem2 = (uint64_t(m) % den) * 2ul;
        if (rem2 > den || (rem2 == den && (d & 1ul) != 0ul)) d++;
    }
    if (d == 1000ul) {
        d = 100ul;
        x++;
    }
    uint dg[3] = uint[3](uint(d / 100ul), uint((d / 10ul) % 10ul), uint(d % 10ul));
    if (neg) put(45u);
    if (x >= -4 && x < 3) {
        if (x >= 0) {
            uint last = 2u;  // the last significant digit kept (trailing zeros after the point dropped)
            while (last > uint(x) && dg[last] == 0u) last--;
            for (uint i = 0u; i <= last; i++) {
                if (i == uint(x) + 1u) put(46u);
                put(48u + dg[i]);
            }
        } else {
            put(48u);
            put(46u);
            for (int i = -1; i > x; i--) put(48u);
            uint last = 2u;
            while (last > 0u && dg[last] == 0u) last--;
            for (uint i = 0u; i <= last; i++) put(48u + dg[i]);
        }
    } else {
        put(48u + dg[0]);
        uint last = 2u;
        while (last > 0u && dg[last] == 0u) last--;
        if (last > 0u) {
            put(46u);
            for (uint i = 1u; i <= last; i++) put(48u + dg[i]);
        }
        put(101u);
        put(x < 0 ? 45u : 43u);
        uint ax = uint(abs(x));
        put(48u + ax / 10u);
        put(48u + ax % 10u);
    }
}

// Cell i's string: the count's text clipped to FIT glyphs (encode()'s rule: an ellipsis ends a
// clipped string of two glyphs or more).
void write_text(uint cell, float v) {
    uint at = cell * P(CF_STRIDE);
    n_chars = 0u;
    if (P(CF_TEXT) != 0u && classify(v) == CLASS_FINITE) format_count(v);
    uint fit = P(CF_FIT);
    uint n = min(n_chars, fit);
    uint base = P(CF_ASCII_BASE);
    for (uint k = 0u; k < n; k++) strings[at + 1u + k] = chars[k] - base;
    if (n_chars > fit && fit >= 2u) strings[at + fit] = P(CF_ELLIPSIS);
    strings[at] = n;
}

void main() {
    uint r = gl_GlobalInvocationID.x;
    uint n = P(CF_N);
    if (r >= n) return;
    uint base = P(CF_BASE);
    uint dtype = P(CF_DTYPE);
    uint first = r * n;
    float recip = 1.0;
    bool normalize = P(CF_NORMALIZE) != 0u;
    if (normalize) {
        float total;
        if (dtype == DT_I32 || dtype == DT_U8) {
            int sum = 0;
            for (uint j = 0u; j < n; j++) sum += load_int(base, dtype, first + j);
            total = float(sum);
        } else {
            precise float sum = 0.0;
            for (uint j = 0u; j < n; j++) sum = ftz(sum + load_input(base, dtype, first + j));
            total = sum;
        }
        recip = total_reciprocal(total);
    }
    for (uint j = 0u; j < n; j++) {
        float v = load_input(base, dtype, first + j);
        precise float share = v * recip;
        shown[first + j] = normalize ? ftz(share) : v;
        write_text(first + j, v);
    }
}
