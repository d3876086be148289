#version 450
// Curve axes, pass 2: one invocation per pixel of the panel outside the plot area (which
// curve_raster.comp draws): the axis lines along the plot's left and bottom edges, a tick mark
// of TICK_LEN pixels at each tick, and each tick's label from the tick buffer (curve_ticks.comp)
// in glyphs of the baked atlas, blended as text.comp blends: y labels right-aligned against
// their tick marks and centred on the tick's row (kept inside the plot's height), x labels
// centred under their tick (kept inside the panel). caliper_vk/views/curve.py is the twin.
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "curve_params.glsl"

layout(std140, binding = 0) uniform Params { uvec4 PV[CV_VEC4S]; };
layout(std430, binding = 1) readonly buffer Ticks { uint ticks[]; };
layout(std430, binding = 2) readonly buffer Atlas { uint atlas[]; };  // coverage per texel
layout(rgba8ui, binding = 3) uniform writeonly uimage2D target;

uint blend(uint bg, uint fg, uint a) {
    uint w = a + (a >> 7);
    uint r = ((bg & 255u) * (256u - w) + (fg & 255u) * w) >> 8;
    uint g = (((bg >> 8) & 255u) * (256u - w) + ((fg >> 8) & 255u) * w) >> 8;
    uint b = (((bg >> 16) & 255u) * (256u - w) + ((fg >> 16) & 255u) * w) >> 8;
    return r | (g << 8) | (b << 16) | 0xFF000000u;
}

// The label at word w drawn from (x0, y0): the pixel's colour, or false when it is outside.
bool glyph_at(uint w, int x0, int y0, int x, int y, inout uint c) {
    int cw = int(P(CV_CELL_W));
    int ch = int(P(CV_CELL_H));
    int len = int(ticks[w + 1u]);
    if (len == 0 || x < x0 || x >= x0 + len * cw || y < y0 || y >= y0 + ch) return false;
    int col = (x - x0) / cw;
    uint g = ticks[w + 2u + uint(col)];
    uint a = atlas[(g * uint(ch) + uint(y - y0)) * uint(cw) + uint(x - x0 - col * cw)];
    c = blend(P(CV_BG), P(CV_TEXT), a);
    return true;
}

void main() {
    uint ux = gl_GlobalInvocationID.x;
    uint uy = gl_GlobalInvocationID.y;
    uint gw = P(CV_GUTTER_W);
    uint ph = P(CV_H);
    if (ux >= P(CV_FULL_W) || uy >= P(CV_FULL_H) || (ux >= gw && uy < ph)) return;
    int x = int(ux);
    int y = int(uy);
    uint c = P(CV_BG);
    bool done = false;
    if ((ux == gw - 1u && uy <= ph) || (uy == ph && ux >= gw - 1u)) {
        c = P(CV_AXIS);
        done = true;
    }
    int cw = int(P(CV_CELL_W));
    int ch = int(P(CV_CELL_H));
    for (uint i = 0u; i < ticks[0] && !done; ++i) {
        uint w = AX_Y + i * AX_WORDS;
        int yy = int(ph) - 1 - int(ticks[w]);
        if (y == yy && ux + 1u + TICK_LEN >= gw && ux < gw - 1u) {
            c = P(CV_AXIS);
            done = true;
        } else {
            int x0 = int(gw) - 2 - int(TICK_LEN) - int(ticks[w + 1u]) * cw;
            int y0 = clamp(yy - ch / 2, 0, int(ph) - ch);
            done = glyph_at(w, x0, y0, x, y, c);
        }
    }
    for (uint j = 0u; j < ticks[1] && !done; ++j) {
        uint w = AX_X + j * AX_WORDS;
        int xx = int(gw + ticks[w]);
        if (x == xx && uy > ph && uy <= ph + TICK_LEN) {
            c = P(CV_AXIS);
            done = true;
        } else {
            int lw = int(ticks[w + 1u]) * cw;
            int x0 = clamp(xx - lw / 2, 0, int(P(CV_FULL_W)) - lw);
            done = glyph_at(w, x0, int(ph + 1u + TICK_LEN), x, y, c);
        }
    }
    int rx = int(P(CV_RECT_X)) - int(gw);
    imageStore(target, ivec2(rx + x, int(P(CV_RECT_Y)) + y), unpack_rgba(c));
}
