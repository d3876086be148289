#version 450
// Heatmap, pass 2: one invocation per panel pixel picks its cell by integer
// nearest-neighbour indexing (row = y * rows / h, exact integer division) and
// colours it from the colormap table over the range the frame's resolve pass wrote
// (stats words ST_LO, ST_SCALE); NaN, +Inf and -Inf get their own colours.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "heatmap_bindings.glsl"  // its parameters and bindings: caliper_vk/views/heatmap.py

#define INPUT data
#include "input.glsl"

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    uint w = P(HM_W);
    uint h = P(HM_H);
    if (x >= w || y >= h) return;
    uint rows = P(HM_ROWS);
    uint cols = P(HM_COLS);
    ivec2 at = ivec2(int(P(HM_RECT_X) + x), int(P(HM_RECT_Y) + y));
    if (rows == 0u || cols == 0u) {  // an empty tensor: the panel shows no cells
        imageStore(target, at, unpack_rgba(P(HM_BG)));
        return;
    }
    uint row = uint((uint64_t(y) * uint64_t(rows)) / uint64_t(h));
    uint col = uint((uint64_t(x) * uint64_t(cols)) / uint64_t(w));
    float v = load_input(P(HM_BASE), P(HM_DTYPE), row * cols + col);
    uint cls = classify(v);
    uint c;
    if (cls == CLASS_FINITE)
        c = colors[lut_index(ftz(v), uintBitsToFloat(stats[ST_LO]), uintBitsToFloat(stats[ST_SCALE]), 255u)];
    else if (cls == CLASS_NAN) c = P(HM_NAN_COLOR);
    else if (cls == CLASS_POSINF) c = P(HM_POSINF_COLOR);
    else c = P(HM_NEGINF_COLOR);
    imageStore(target, at, unpack_rgba(c));
}
