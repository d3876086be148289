#version 450
// Curve, pass 2: one invocation per panel pixel; a series colours the pixel when
// its row span in this column holds it. The smoothed series (drawn second) sits
// on top of the raw trace, which always stays visible around it. With axes, a faint grid line
// runs across the plot at each tick (the row and column words of curve_ticks.comp), under the
// trace, as the dashboard's plots have.
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "curve_raster_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_curveaxes.py

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    uint w = P(CV_W);
    uint h = P(CV_H);
    if (x >= w || y >= h) return;
    uint up = h - 1u - y;
    uint c = P(CV_BG);
    if (P(CV_AXES) != 0u && ((ticks[AX_SIZE + y] & AX_MARK) != 0u
                             || (ticks[AX_SIZE + P(CV_FULL_H) + P(CV_GUTTER_W) + x] & AX_MARK) != 0u)) {
        c = P(CV_GRID);
    }
    for (uint k = 0u; k < P(CV_SERIES); ++k) {
        uint span = columns[k * w + x];
        if (span != NO_ROWS && up >= (span & 0xFFFFu) && up <= (span >> 16)) {
            c = k == 0u ? P(CV_COLOR0) : P(CV_COLOR1);
        }
    }
    imageStore(target, ivec2(int(P(CV_RECT_X) + x), int(P(CV_RECT_Y) + y)), unpack_rgba(c));
}
