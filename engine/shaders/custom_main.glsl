// The entry point of a custom panel: one invocation per panel pixel.
//
// CV_COLOR_MODE: the panel's single input is drawn as a grid of cells (like
// the heatmap view) and the user's `vec4 color(float v, uint i)` colours each
// cell; CV_DATA_AT / CV_DATA_ROWS / CV_DATA_COLS name that input's accessors.
// Otherwise the user's `uvec4 shade(uvec2 px, uvec2 size)` returns the
// pixel's RGBA bytes (each channel clamped to 255).

void main() {
    uvec2 px = gl_GlobalInvocationID.xy;
    uvec2 size = uvec2(cv_width, cv_height);
    if (px.x >= size.x || px.y >= size.y) return;
    ivec2 at = ivec2(int(cv_rect_x + px.x), int(cv_rect_y + px.y));
#ifdef CV_COLOR_MODE
    uint rows = CV_DATA_ROWS();
    uint cols = CV_DATA_COLS();
    uvec4 rgba;
    if (rows == 0u || cols == 0u) {
        rgba = unpack_rgba(cv_background);  // an empty input: the panel shows no cells
    } else {
        uvec2 rc = cv_cell(px, size, rows, cols);
        uint i = rc.x * cols + rc.y;
        rgba = cv_unorm8(color(CV_DATA_AT(i), i));
    }
#else
    uvec4 rgba = min(shade(px, size), uvec4(255u));
#endif
    imageStore(cv_target, at, rgba);
}
