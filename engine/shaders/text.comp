#version 450
// Text: one invocation per panel pixel finds its character cell in a grid of
// glyph indices and blends the glyph's 8-bit coverage from the baked atlas
// between the background and the row's colour, with integers only:
// a' = a + (a >> 7) (0..256), channel = (bg * (256 - a') + fg * a') >> 8.
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"

#include "text_bindings.glsl"  // its parameters and bindings: caliper_vk/views/text.py

uint blend(uint bg, uint fg, uint a) {
    uint w = a + (a >> 7);
    uint r = ((bg & 255u) * (256u - w) + (fg & 255u) * w) >> 8;
    uint g = (((bg >> 8) & 255u) * (256u - w) + ((fg >> 8) & 255u) * w) >> 8;
    uint b = (((bg >> 16) & 255u) * (256u - w) + ((fg >> 16) & 255u) * w) >> 8;
    return r | (g << 8) | (b << 16) | 0xFF000000u;
}

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    if (x >= P(TX_W) || y >= P(TX_H)) return;
    uint c = P(TX_BG);
    uint cw = P(TX_CELL_W);
    uint ch = P(TX_CELL_H);
    if (x >= P(TX_PAD_X) && y >= P(TX_PAD_Y)) {
        uint lx = x - P(TX_PAD_X);
        uint ly = y - P(TX_PAD_Y);
        uint col = lx / cw;
        uint row = ly / ch;
        if (col < P(TX_COLS) && row < P(TX_ROWS)) {
            uint g = grid[row * P(TX_COLS) + col];
            if (g != EMPTY) {
                uint a = atlas[(g * ch + (ly - row * ch)) * cw + (lx - col * cw)];
                c = blend(P(TX_BG), rowcolor[row], a);
            }
        }
    }
    imageStore(target, ivec2(int(P(TX_RECT_X) + x), int(P(TX_RECT_Y) + y)), unpack_rgba(c));
}
