#version 450
// Images view: a grid of small 2-D arrays (conv kernels, feature maps). One
// invocation per panel pixel finds its tile and cell with integer arithmetic
// (a gap of background pixels before every tile), reads the value in its stored
// dtype, and colours it with its range group's (lo, scale) — per tile or shared —
// that the frame's stats and resolve passes made on the device (stats words from
// IM_NORMS, three per group). NaN, +Inf, -Inf get their own colours.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"

#include "images_bindings.glsl"  // its parameters and bindings: caliper_vk/views/images.py
#include "muldiv.glsl"

#define INPUT data
#include "input.glsl"

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    if (x >= P(IM_W) || y >= P(IM_H)) return;
    uint c = P(IM_BG);
    uint pw = P(IM_PX_W);
    uint ph = P(IM_PX_H);
    uint gap = P(IM_GAP);
    if (pw > 0u && ph > 0u) {
        uint col = x / (pw + gap);
        uint row = y / (ph + gap);
        uint xin = x - col * (pw + gap);
        uint yin = y - row * (ph + gap);
        uint t = row * P(IM_COLS) + col;
        if (col < P(IM_COLS) && xin >= gap && yin >= gap && t < P(IM_N_TILES)) {
            uint th = P(IM_TILE_H);
            uint tw = P(IM_TILE_W);
            uint cy = muldiv(yin - gap, th, ph);
            uint cx = muldiv(xin - gap, tw, pw);
            float v = load_input(P(IM_BASE), P(IM_DTYPE), (t * th + cy) * tw + cx);
            uint cls = classify(v);
            uint at = P(IM_NORMS) + 3u * (P(IM_SHARED) != 0u ? 0u : t);
            if (cls == CLASS_FINITE)
                c = colors[lut_index(ftz(v), uintBitsToFloat(stats[at]), uintBitsToFloat(stats[at + 2u]), 255u)];
            else if (cls == CLASS_NAN) c = P(IM_NAN);
            else if (cls == CLASS_POSINF) c = P(IM_POSINF);
            else c = P(IM_NEGINF);
        }
    }
    imageStore(target, ivec2(int(P(IM_RECT_X) + x), int(P(IM_RECT_Y) + y)), unpack_rgba(c));
}
