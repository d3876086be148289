#version 450
// Curve axes, pass 2: one invocation per pixel of the panel outside the plot area (which
// curve_raster.comp draws), numbered along the y gutter (GUTTER_W x FULL_H) then along the x
// gutter right of it ((FULL_W - GUTTER_W) x GUTTER_H): the axis lines along the plot's left and bottom edges, a tick mark
// of TICK_LEN pixels at each tick, and each tick's label from the tick buffer (curve_ticks.comp)
// in glyphs of the baked atlas, blended as text.comp blends: y labels right-aligned against
// their tick marks and centred on the tick's row (kept inside the plot's height), x labels
// centred under their tick (kept inside the panel); where two labels overlap, the first one's
// band wins (the row and column words curve_ticks.comp wrote). caliper_vk/views/curve.py is the
// twin.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "curve_axes_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_curveaxes.py

uint blend(uint bg, uint fg, uint a) {
    uint w = a + (a >> 7);
    uint r = ((bg & 255u) * (256u - w) + (fg & 255u) * w) >> 8;
    uint g = (((bg >> 8) & 255u) * (256u - w) + ((fg >> 8) & 255u) * w) >> 8;
    uint b = (((bg >> 16) & 255u) * (256u - w) + ((fg >> 16) & 255u) * w) >> 8;
    return r | (g << 8) | (b << 16) | 0xFF000000u;
}

// The glyph texel (gx, gy) of character `col` of the label at word w, blended over the background.
uint glyph(uint w, uint col, uint gx, uint gy) {
    uint g = ticks[w + 2u + col];
    uint a = atlas[(g * P(CV_CELL_H) + gy) * P(CV_CELL_W) + gx];
    return blend(P(CV_BG), P(CV_TEXT), a);
}

void main() {
    uint i = linear_invocation();
    uint gw = P(CV_GUTTER_W);
    uint ph = P(CV_H);
    uint left = gw * P(CV_FULL_H);
    uint x;
    uint y;
    if (i < left) {
        x = i % gw;
        y = i / gw;
    } else {
        uint k = i - left;
        uint pw = P(CV_FULL_W) - gw;
        if (k >= pw * P(CV_GUTTER_H)) return;
        x = gw + k % pw;
        y = ph + k / pw;
    }
    uint cw = P(CV_CELL_W);
    uint c = P(CV_BG);
    if ((x == gw - 1u && y <= ph) || (y == ph && x >= gw - 1u)) {
        c = P(CV_AXIS);
    } else if (y < ph) {  // left of the plot: y tick marks and labels
        uint e = ticks[AX_SIZE + y];
        uint owner = e & AX_OWNER;
        if ((e & AX_MARK) != 0u && x + 1u + TICK_LEN >= gw) {
            c = P(CV_AXIS);
        } else if (owner != 0u) {
            uint w = AX_Y + (owner - 1u) * AX_WORDS;
            uint lw = ticks[w + 1u] * cw;
            uint x0 = gw - 2u - TICK_LEN - lw;
            if (x >= x0 && x < x0 + lw) {
                c = glyph(w, (x - x0) / cw, (x - x0) % cw, (e >> AX_OFFSET_SHIFT) & 0xFFFFu);
            }
        }
    } else {  // below the plot: x tick marks and labels
        uint e = ticks[AX_SIZE + P(CV_FULL_H) + x];
        uint owner = e & AX_OWNER;
        if ((e & AX_MARK) != 0u && y <= ph + TICK_LEN) {
            c = P(CV_AXIS);
        } else if (owner != 0u && y >= ph + 1u + TICK_LEN) {
            uint dx = (e >> AX_OFFSET_SHIFT) & 0xFFFFu;
            c = glyph(AX_X + (owner - 1u) * AX_WORDS, dx / cw, dx % cw, y - ph - 1u - TICK_LEN);
        }
    }
    imageStore(target, ivec2(int(P(CV_RECT_X) - gw + x), int(P(CV_RECT_Y) + y)), unpack_rgba(c));
}
