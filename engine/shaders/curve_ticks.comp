#version 450
// Curve axes, pass 1 (one invocation, after the resolve pass): the ticks and their labels,
// chosen from the range this frame resolved (stats words ST_LO, ST_HI, ST_SCALE), so the
// labels state what the trace was drawn with. Y: "nice" values k * m * 10^e (m in 1, 2, 5),
// at most YTICKS intervals over (lo, hi); on a log axis (SPEC_LOGY) m * 10^k at the log2 of the
// value, or, when that gives fewer than two ticks (a range within a decade), nice values over
// the range's values (exp2e: 2^x with + - * only) at their log2. X: whole sample indices j * m * 10^e. A label is spelled from the integers (N, E) of
// N * 10^E into glyph indices (plain digits for 10^-3 <= |value| < 10^5, else 2.5e-4 with a
// true minus); one longer than its gutter allows gets length 0 (not drawn). Writes the tick
// buffer (curve_params.glsl: AX_*) that curve_axes.comp draws, then a word per panel row and
// per panel column (from AX_SIZE) saying which label's band it lies in (the first label wins
// where two overlap), where in it, and whether a tick mark is there: each pixel of the gutter
// then reads one word instead of searching every label. Float math as everywhere in
// the exact path; caliper_vk/views/_curveaxes.py is the numpy twin, bit for bit.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 1) in;
#include "common.glsl"
#include "curve_ticks_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_curveaxes.py
#include "heatmap_params.glsl"  // ST_LO, ST_HI, ST_SCALE

#include "curve_log.glsl"  // log2e, on_axis (SPEC_LOGY)

void put(uint w, inout uint len, uint glyph) {
    if (len < AX_CHARS) ticks[w + 2u + len] = glyph;
    len += 1u;
}

// Spell (-1 if neg) * a * 10^e into the label at word w; returns its length, 0 if over room.
uint spell(uint w, bool neg, uint a, int e, uint room) {
    room = min(room, AX_CHARS);
    uint len = 0u;
    if (a == 0u) {
        put(w, len, P(CV_G_ZERO));
        return len <= room ? len : 0u;
    }
    while (a % 10u == 0u) {
        a /= 10u;
        e += 1;
    }
    uint dg[10];  // the digits, least significant first
    uint d = 0u;
    for (uint t = a; t != 0u; t /= 10u) {
        dg[d] = t % 10u;
        d += 1u;
    }
    int x = e + int(d) - 1;  // the decimal exponent of the leading digit
    uint zero = P(CV_G_ZERO);
    if (neg) put(w, len, P(CV_G_MINUS));
    if (x >= -3 && x < 5) {
        if (e >= 0) {
            for (uint i = d; i > 0u; --i) put(w, len, zero + dg[i - 1u]);
            for (int k = 0; k < e; ++k) put(w, len, zero);
        } else if (int(d) + e > 0) {
            int point = int(d) + e;  // digits before the point
            for (int i = 0; i < int(d); ++i) {
                if (i == point) put(w, len, P(CV_G_DOT));
                put(w, len, zero + dg[d - 1u - uint(i)]);
            }
        } else {
            put(w, len, zero);
            put(w, len, P(CV_G_DOT));
            for (int k = 0; k < -(int(d) + e); ++k) put(w, len, zero);
            for (uint i = d; i > 0u; --i) put(w, len, zero + dg[i - 1u]);
        }
    } else {
        put(w, len, zero + dg[d - 1u]);
        if (d > 1u) {
            put(w, len, P(CV_G_DOT));
            for (uint i = d - 1u; i > 0u; --i) put(w, len, zero + dg[i - 1u]);
        }
        put(w, len, P(CV_G_E));
        if (x < 0) put(w, len, P(CV_G_MINUS));
        uint ax = uint(abs(x));
        if (ax >= 10u) put(w, len, zero + ax / 10u);
        put(w, len, zero + ax % 10u);
    }
    return len <= room ? len : 0u;
}

void y_tick(inout uint count, float v, float lo, float scale, bool neg, uint a, int e) {
    uint w = AX_Y + count * AX_WORDS;
    ticks[w] = lut_index(v, lo, scale, P(CV_H) - 1u);
    ticks[w + 1u] = spell(w, neg, a, e, P(CV_YCHARS));
    count += 1u;
}

// 2^x for a finite x: 2^floor(x) (exponent bits) times a polynomial in the fraction; 0 below
// the normal floats, the largest float above them.
float exp2e(float x) {
    float fl = floor(x);
    if (fl < -126.0) return 0.0;
    if (fl > 127.0) return uintBitsToFloat(0x7F7FFFFFu);
    precise float u = ftz(x - fl);
    precise float acc = uintBitsToFloat(EXP2_E5);
    acc = ftz(ftz(acc * u) + uintBitsToFloat(EXP2_E4));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(EXP2_E3));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(EXP2_E2));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(EXP2_E1));
    acc = ftz(ftz(acc * u) + uintBitsToFloat(EXP2_E0));
    precise float m = ftz(1.0 + ftz(acc * u));
    int biased = int(floatBitsToUint(m) >> 23) + int(fl);
    if (biased <= 0) return 0.0;
    if (biased >= 255) return uintBitsToFloat(0x7F7FFFFFu);
    return uintBitsToFloat((floatBitsToUint(m) & 0x007FFFFFu) | (uint(biased) << 23));
}

// Nice values over (lo, hi), drawn at their row over (at, scale): at themselves, or with logv
// at their log2 (a value <= 0 is then left out).
uint linear_ticks(float lo, float hi, float at, float scale, bool logv) {
    uint count = 0u;
    precise float span = ftz(hi - lo);
    if (!(span > 0.0) || classify(span) != CLASS_FINITE) return 0u;
    float nt = float(P(CV_YTICKS));
    float TENTH = uintBitsToFloat(0x3DCCCCCDu);  // float32(0.1)
    float p = 1.0;
    float ip = 1.0;
    int ex = 0;
    for (int t = 0; t < 80; ++t) {
        precise float c = ftz(p * nt);
        if (c >= span) break;
        precise float pn = ftz(p * 10.0);
        precise float ipn = ftz(ip * TENTH);
        p = pn;
        ip = ipn;
        ex += 1;
    }
    for (int t = 0; t < 80; ++t) {
        precise float q = ftz(p * TENTH);
        precise float c = ftz(q * nt);
        if (!(c >= span)) break;
        precise float ipn = ftz(ip * 10.0);
        p = q;
        ip = ipn;
        ex -= 1;
    }
    precise float q = ftz(p * TENTH);
    precise float iq = ftz(ip * 10.0);
    precise float s2 = ftz(q * 2.0);
    precise float c2 = ftz(s2 * nt);
    precise float s5 = ftz(q * 5.0);
    precise float c5 = ftz(s5 * nt);
    precise float i2 = ftz(iq * 0.5);
    precise float i5 = ftz(iq * uintBitsToFloat(0x3E4CCCCDu));  // 0.2
    float s = p;
    float inv = ip;
    uint m = 1u;
    int e = ex;
    if (c2 >= span) { s = s2; inv = i2; m = 2u; e = ex - 1; }
    else if (c5 >= span) { s = s5; inv = i5; m = 5u; e = ex - 1; }
    if (!(s > 0.0) || classify(inv) != CLASS_FINITE) return 0u;
    precise float est = ftz(lo * inv);
    if (!(abs(est) <= 4194304.0)) return 0u;  // 2^22: ticks this far from 0 need too many digits
    int k = int(floor(est));
    for (int t = 0; t < 4; ++t) {
        precise float v = ftz(float(k) * s);
        if (v < lo) k += 1;
    }
    for (int t = 0; t < 4; ++t) {
        precise float v = ftz(float(k - 1) * s);
        if (v >= lo) k -= 1;
    }
    for (int j = 0; j < int(AX_TICKS); ++j) {
        precise float v = ftz(float(k + j) * s);
        if (v > hi) break;
        int nv = (k + j) * int(m);
        if (!logv) y_tick(count, v, at, scale, nv < 0, uint(abs(nv)), e);
        else if (v > 0.0) y_tick(count, log2e(v), at, scale, false, uint(nv), e);
    }
    return count;
}

uint log_ticks(float lo, float hi, float scale) {
    uint count = 0u;
    precise float span = ftz(hi - lo);
    if (!(span > 0.0) || classify(span) != CLASS_FINITE) return 0u;
    float l10 = uintBitsToFloat(LOG2_10_BITS);
    float il10 = uintBitsToFloat(INV_LOG2_10_BITS);
    precise float decades = ftz(span * il10);
    float nt = float(P(CV_YTICKS));
    precise float d9 = ftz(decades * 9.0);
    precise float d3 = ftz(decades * 3.0);
    uint step = 1u;
    uint mset = 0u;  // the mantissas: 0 {1}, 1 {1, 2, 5}, 2 {1 .. 9}
    const uint STEPS[7] = uint[7](1u, 2u, 5u, 10u, 20u, 50u, 100u);
    const uint M125[3] = uint[3](1u, 2u, 5u);
    if (d9 <= nt) mset = 2u;
    else if (d3 <= nt) mset = 1u;
    else {
        for (int i = 0; i < 7; ++i) {
            step = STEPS[i];
            precise float c = ftz(float(step) * nt);
            if (c >= decades) break;
        }
    }
    uint mcount = mset == 2u ? 9u : (mset == 1u ? 3u : 1u);
    precise float kl = ftz(lo * il10);
    int k = int(floor(kl)) - 1 + 200;  // offset by a multiple of every step: k % step >= 0
    k = k - k % int(step) - 200;
    for (int it = 0; it < int(AX_TICKS) + 2; ++it) {
        for (uint mi = 0u; mi < mcount; ++mi) {
            uint m = mset == 2u ? mi + 1u : (mset == 1u ? M125[mi] : 1u);
            precise float t = ftz(ftz(float(k) * l10) + log2e(float(m)));
            if (lo <= t && t <= hi && count < AX_TICKS) y_tick(count, t, lo, scale, false, m, k);
        }
        k += int(step);
    }
    if (count < 2u) count = linear_ticks(exp2e(lo), exp2e(hi), lo, scale, true);
    return count;
}

uint sample_column(uint64_t i, uint64_t n, uint64_t w) {
    if (n >= w) return uint(((i + 1ul) * w - 1ul) / n);
    return n > 1ul ? uint((2ul * i * (w - 1ul) + (n - 1ul)) / (2ul * (n - 1ul))) : 0u;
}

uint sample_ticks() {
    uint n = P(CV_N);
    if (n == 0u) return 0u;
    uint64_t span = uint64_t(n - 1u);
    uint64_t nt = uint64_t(P(CV_XTICKS));
    uint64_t p = 1ul;
    int e = 0;
    while (p * nt < span) {
        p *= 10ul;
        e += 1;
    }
    uint64_t s = p;
    uint m = 1u;
    if (p >= 10ul) {
        uint64_t q = p / 10ul;
        if (2ul * q * nt >= span) { s = 2ul * q; m = 2u; e -= 1; }
        else if (5ul * q * nt >= span) { s = 5ul * q; m = 5u; e -= 1; }
    }
    uint count = 0u;
    for (uint j = 0u; j < AX_TICKS; ++j) {
        uint64_t i = uint64_t(j) * s;
        if (i > span) break;
        uint w = AX_X + count * AX_WORDS;
        ticks[w] = sample_column(i, uint64_t(n), uint64_t(P(CV_W)));
        ticks[w + 1u] = spell(w, false, j * m, e, P(CV_XCHARS));
        count += 1u;
    }
    return count;
}

// The row and column words: label index + 1 (AX_OWNER bits), the offset into the label's band
// (from bit AX_OFFSET_SHIFT), AX_MARK where a tick mark is.
void owners(uint ny, uint nx) {
    uint rows = AX_SIZE;
    uint cols = AX_SIZE + P(CV_FULL_H);
    int cw = int(P(CV_CELL_W));
    int ch = int(P(CV_CELL_H));
    int ph = int(P(CV_H));
    uint gw = P(CV_GUTTER_W);
    for (uint y = 0u; y < P(CV_FULL_H); ++y) ticks[rows + y] = 0u;
    for (uint x = 0u; x < P(CV_FULL_W); ++x) ticks[cols + x] = 0u;
    for (uint i = ny; i > 0u; --i) {  // the first label written last: it wins
        uint w = AX_Y + (i - 1u) * AX_WORDS;
        int y0 = clamp(ph - 1 - int(ticks[w]) - ch / 2, 0, ph - ch);
        for (int y = y0; y < y0 + ch; ++y) ticks[rows + uint(y)] = i | (uint(y - y0) << AX_OFFSET_SHIFT);
    }
    for (uint j = nx; j > 0u; --j) {
        uint w = AX_X + (j - 1u) * AX_WORDS;
        int lw = int(ticks[w + 1u]) * cw;
        int x0 = clamp(int(gw + ticks[w]) - lw / 2, 0, int(P(CV_FULL_W)) - lw);
        for (int x = x0; x < x0 + lw; ++x) ticks[cols + uint(x)] = j | (uint(x - x0) << AX_OFFSET_SHIFT);
    }
    for (uint i = 0u; i < ny; ++i) {
        uint at = rows + uint(ph - 1 - int(ticks[AX_Y + i * AX_WORDS]));
        ticks[at] = ticks[at] | AX_MARK;
    }
    for (uint j = 0u; j < nx; ++j) {
        uint at = cols + gw + ticks[AX_X + j * AX_WORDS];
        ticks[at] = ticks[at] | AX_MARK;
    }
}

void main() {
    float lo = uintBitsToFloat(stats[ST_LO]);
    float hi = uintBitsToFloat(stats[ST_HI]);
    float scale = uintBitsToFloat(stats[ST_SCALE]);
    uint ny = SPEC_LOGY != 0u ? log_ticks(lo, hi, scale) : linear_ticks(lo, hi, lo, scale, false);
    uint nx = sample_ticks();
    ticks[0] = ny;
    ticks[1] = nx;
    owners(ny, nx);
}
