// A diverging colour map for a CustomPanel(color=...): blue below the middle of
// the panel's value range, white at the middle, red above; `gain` (a panel
// parameter) sharpens it. Only + - * and comparisons of finite values, so the
// numpy twin in custom_panel.py produces the same bytes (docs/custom-panels.md).
vec4 color(float v, uint i) {
    if (classify(v) != CLASS_FINITE) return vec4(1.0, 0.0, 1.0, 1.0);  // NaN/Inf: magenta
    float t = to_unit(v) * 2.0 - 1.0;             // -1 .. 1 across the value range
    float a = min(max(t * gain, -1.0), 1.0);
    if (a < 0.0) return vec4(1.0 + a, 1.0 + a, 1.0, 1.0);
    return vec4(1.0, 1.0 - a, 1.0 - a, 1.0);
}
