#version 450
// Textgrid: a grid of cells coloured by a value, each showing a short string
// (a logit-lens grid: rows = layers, columns = positions, the top token in
// each cell coloured by its probability), with row labels on the left and
// column labels above. One invocation per panel pixel:
//   - cells by integer nearest-neighbour indexing (row = y * rows / h, as the
//     heatmap), colour from the colormap table over the range the frame's resolve
//     pass wrote (stats words), NaN/+Inf/-Inf their own colours;
//   - a one-pixel background line at each cell's right and bottom edge when
//     the cells are large enough;
//   - the cell's string (glyph indices made on the host, or on the device by the confusion
//     view's cells pass, already clipped to what fits) centred in the cell, blended from the
//     baked glyph atlas with integers only; its colour (dark or light) chosen by an integer luminance
//     of the cell colour, for contrast.
// Mirrored by caliper_vk/views/textgrid.py (TextGrid.reference); keep in step.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"

#include "textgrid_bindings.glsl"  // its parameters and bindings: caliper_vk/views/textgrid.py
#include "heatmap_params.glsl"  // the stats words (ST_LO, ST_SCALE) of the heatmap's stats pass
#include "muldiv.glsl"

// strings[] holds the cells (rows * cols), then the row labels (rows), then the column labels
// (cols); each is TG_STRIDE words: a length n, then n glyph indices

#define INPUT data
#include "input.glsl"

uint blend(uint bg, uint fg, uint a) {
    uint w = a + (a >> 7);
    uint r = ((bg & 255u) * (256u - w) + (fg & 255u) * w) >> 8;
    uint g = (((bg >> 8) & 255u) * (256u - w) + ((fg >> 8) & 255u) * w) >> 8;
    uint b = (((bg >> 16) & 255u) * (256u - w) + ((fg >> 16) & 255u) * w) >> 8;
    return r | (g << 8) | (b << 16) | 0xFF000000u;
}

// The cell of pixel p along an axis of `size` pixels split into n cells, and a cell's first pixel.
uint span_index(uint p, uint n, uint size) {
    return muldiv(p, n, size);
}

uint span_start(uint i, uint n, uint size) {
    return muldiv_up(i, size, n);
}

uint string_length(uint s) {
    return strings[s * P(TG_STRIDE)];
}

// Glyph coverage (0..255) of string s at (tx, ty) from its first glyph's top-left corner.
uint coverage(uint s, int tx, int ty) {
    uint gw = P(TG_GLYPH_W);
    uint gh = P(TG_GLYPH_H);
    if (tx < 0 || ty < 0 || uint(ty) >= gh) return 0u;
    uint k = uint(tx) / gw;
    if (k >= string_length(s)) return 0u;
    uint g = strings[s * P(TG_STRIDE) + 1u + k];
    return atlas[(g * gh + uint(ty)) * gw + (uint(tx) - k * gw)];
}

uint luminance(uint c) {
    return 54u * (c & 255u) + 183u * ((c >> 8) & 255u) + 19u * ((c >> 16) & 255u);
}

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    if (x >= P(TG_W) || y >= P(TG_H)) return;
    ivec2 at = ivec2(int(P(TG_RECT_X) + x), int(P(TG_RECT_Y) + y));
    uint c = P(TG_BG);
    uint rows = P(TG_ROWS);
    uint cols = P(TG_COLS);
    uint gx = P(TG_GX);
    uint gy = P(TG_GY);
    uint gw = P(TG_GW);
    uint gh = P(TG_GH);
    if (rows == 0u || cols == 0u || gw == 0u || gh == 0u) {  // nothing to draw: background
        imageStore(target, at, unpack_rgba(c));
        return;
    }
    int dy = int(P(TG_TEXT_DY));
    uint line = P(TG_LINE);
    uint avail = P(TG_AVAIL_W);
    uint glyph_w = P(TG_GLYPH_W);
    if (x >= gx && y >= gy && x < gx + gw && y < gy + gh) {
        uint lx = x - gx;
        uint ly = y - gy;
        uint row = span_index(ly, rows, gh);
        uint col = span_index(lx, cols, gw);
        uint x0 = span_start(col, cols, gw);
        uint y0 = span_start(row, rows, gh);
        bool edge = line != 0u && (lx + 1u == span_start(col + 1u, cols, gw)
                                   || ly + 1u == span_start(row + 1u, rows, gh));
        if (!edge) {
            uint cell = row * cols + col;
            float v = load_input(P(TG_BASE), P(TG_DTYPE), cell);
            uint cls = classify(v);
            if (cls == CLASS_FINITE) c = colors[lut_index(ftz(v), uintBitsToFloat(stats[ST_LO]),
                                                          uintBitsToFloat(stats[ST_SCALE]), 255u)];
            else if (cls == CLASS_NAN) c = P(TG_NAN);
            else if (cls == CLASS_POSINF) c = P(TG_POSINF);
            else c = P(TG_NEGINF);
            uint n = string_length(cell);
            if (n != 0u) {
                int left = int(x0 + ((avail - n * glyph_w) >> 1));
                uint a = coverage(cell, int(x) - int(gx) - left, int(ly) - int(y0) - dy);
                if (a != 0u) {
                    uint fg = luminance(c) < P(TG_LUM_SPLIT) ? P(TG_LIGHT) : P(TG_DARK);
                    c = blend(c, fg, a);
                }
            }
        }
    } else if (P(TG_ROW_LABELS) != 0u && x < gx && y >= gy && y < gy + gh) {
        uint ly = y - gy;
        uint row = span_index(ly, rows, gh);
        uint s = rows * cols + row;
        int left = int(gx - P(TG_LABEL_PAD) - string_length(s) * glyph_w);
        uint a = coverage(s, int(x) - left, int(ly) - int(span_start(row, rows, gh)) - dy);
        if (a != 0u) c = blend(c, P(TG_LABEL), a);
    } else if (P(TG_COL_LABELS) != 0u && y >= P(TG_TOP) && y < gy && x >= gx && x < gx + gw) {
        uint lx = x - gx;
        uint col = span_index(lx, cols, gw);
        uint s = rows * cols + rows + col;
        int left = int(span_start(col, cols, gw) + ((avail - string_length(s) * glyph_w) >> 1));
        uint a = coverage(s, int(lx) - left, int(y - P(TG_TOP)) - 1);
        if (a != 0u) c = blend(c, P(TG_LABEL), a);
    }
    imageStore(target, at, unpack_rgba(c));
}
