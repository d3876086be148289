// Building blocks of custom panels (composed by caliper_vk/shader_module.py).
//
// Included after common.glsl and after the generated parameter block, which
// declares cv_width, cv_height, cv_rect_x, cv_rect_y, cv_background,
// range_lo and range_scale. Every float operation here follows the exact
// rules of docs/determinism.md; caliper_vk/views/custom.py mirrors them in numpy.

// A colour channel in [0, 1] as a byte: round(x * 255); NaN and x <= 0 give 0, x >= 1 gives 255.
uint cv_unorm8_channel(float x) {
    if (classify(x) == CLASS_NAN || !(x > 0.0)) return 0u;
    if (x >= 1.0) return 255u;
    precise float t = ftz(x * 255.0);
    precise float r = ftz(t + 0.5);
    return uint(r);
}

uvec4 cv_unorm8(vec4 c) {
    return uvec4(cv_unorm8_channel(c.r), cv_unorm8_channel(c.g), cv_unorm8_channel(c.b),
                 cv_unorm8_channel(c.a));
}

// v mapped onto the panel's value range: (v - lo) * (1 / (hi - lo)), the reciprocal made on the host.
// Not clamped: values outside the range give results outside [0, 1].
float to_unit(float v) {
    precise float d = ftz(v - range_lo);
    precise float t = ftz(d * range_scale);
    return t;
}

// The cell under pixel px of a rows x cols grid stretched over size: integer
// nearest-neighbour indexing (row = y * rows / height), as the heatmap view does.
uvec2 cv_cell(uvec2 px, uvec2 size, uint rows, uint cols) {
    uint row = uint((uint64_t(px.y) * uint64_t(rows)) / uint64_t(size.y));
    uint col = uint((uint64_t(px.x) * uint64_t(cols)) / uint64_t(size.x));
    return uvec2(row, col);
}
