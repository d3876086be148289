#version 450
// Histogram, pass 3: one invocation per panel pixel. Column x shows bin
// x * bins / width; a bar of count c is ceil(c * height / max) pixels tall
// (integer math). Overlay layout: the older steps the max pass kept (stats
// word HS_KEPT; history, newest first, after its grid words) are drawn as their top edges, fainter with age: colour = bg + (old - bg) *
// alpha / 256, integers. Offset layout: step k (0 = current) stands on a
// baseline k * offset pixels up (offset = max(1, (height / 2) / K) for K kept
// steps, 0 when height <= 2K), its bars scaled to height - K * offset;
// nearer steps hide farther ones; older ones fainter, each filled at half its
// edge's strength so every step's outline stays visible.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "histogram_raster_bindings.glsl"  // its parameters and bindings: caliper_vk/views/histogram.py
#include "heatmap_params.glsl"

uint bar_height(uint c, uint h, uint maxc) {
    return maxc == 0u ? 0u : uint((uint64_t(c) * uint64_t(h) + uint64_t(maxc) - 1ul) / uint64_t(maxc));
}

uint mix_rgba(uint bg, uint fg, uint alpha) {  // alpha in 0..256
    uint r = ((bg & 255u) * (256u - alpha) + (fg & 255u) * alpha) >> 8;
    uint g = (((bg >> 8) & 255u) * (256u - alpha) + ((fg >> 8) & 255u) * alpha) >> 8;
    uint b = (((bg >> 16) & 255u) * (256u - alpha) + ((fg >> 16) & 255u) * alpha) >> 8;
    return r | (g << 8) | (b << 16) | 0xFF000000u;
}

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    uint w = P(HG_W);
    uint h = P(HG_H);
    if (x >= w || y >= h) return;
    uint bins = P(HG_BINS);
    uint b = uint((uint64_t(x) * uint64_t(bins)) / uint64_t(w));
    uint maxc = stats[HS_MAX];
    uint up = h - 1u - y;  // pixels above the bottom edge
    uint c = P(HG_BG);
    uint k_count = stats[HS_KEPT];
    uint rows = 2u * P(HG_HISTORY);  // the grid words before the counts
    uint d = P(HG_OFFSET) != 0u && k_count > 0u && h > 2u * k_count ? max(1u, (h / 2u) / k_count) : 0u;
    if (d > 0u) {
        uint hb = h - k_count * d;
        for (uint k = k_count; k > 0u; --k) {  // farthest first, so nearer steps win
            uint base = k * d;
            uint top = bar_height(history[rows + (k - 1u) * bins + b], hb, maxc);
            uint alpha = 256u - (k * 200u) / (k_count + 1u);
            if (up >= base && up - base < top)  // filled at half strength, its top edge in full
                c = mix_rgba(P(HG_BG), P(HG_OLD_COLOR), up - base + 1u == top ? alpha : alpha >> 1);
        }
        if (up < bar_height(counts[b], hb, maxc)) c = P(HG_COLOR);
        imageStore(target, ivec2(int(P(HG_RECT_X) + x), int(P(HG_RECT_Y) + y)), unpack_rgba(c));
        return;
    }
    if (up < bar_height(counts[b], h, maxc)) c = P(HG_COLOR);
    for (uint k = k_count; k > 0u; --k) {  // oldest first, so newer edges win
        uint bh = bar_height(history[rows + (k - 1u) * bins + b], h, maxc);
        if (bh > 0u && up == bh - 1u) {
            uint alpha = 256u - (k * 200u) / (k_count + 1u);
            c = mix_rgba(P(HG_BG), P(HG_OLD_COLOR), alpha);
        }
    }
    imageStore(target, ivec2(int(P(HG_RECT_X) + x), int(P(HG_RECT_Y) + y)), unpack_rgba(c));
}
