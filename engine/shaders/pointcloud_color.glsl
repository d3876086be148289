// The colour of a pixel whose winning depth key is d (not EMPTY): the winner's
// uniform, label or value colour, darkened with its distance. Shared by the
// per-pixel resolve and the per-point paint passes. Needs P(), labels[],
// values[] and colors[].

uint point_color(uint64_t d) {
    uint i = uint(d & 0xFFFFFFFFul);
    uint mode = P(PC_MODE);
    uint c;
    if (mode == MODE_LABELS) {
        uint label = labels[i];
        c = label == 0xFFFFFFFFu ? P(PC_UNLABELLED) : colors[LUT_SIZE + label % P(PC_NPAL)];
    } else if (mode == MODE_VALUES) {
        float v = values[i];
        c = classify(v) == CLASS_FINITE
            ? colors[lut_index(ftz(v), f(PC_VLO), f(PC_VSCALE), LUT_SIZE - 1u)]
            : P(PC_NAN_COLOR);
    } else {
        c = P(PC_COLOR);
    }
    float near = from_orderable(uint(d >> 32));  // -depth of the winner
    uint shade = 156u + lut_index(ftz(-near), f(PC_ZMIN), f(PC_ZSCALE), 100u);
    return shade_rgba(c, shade);
}
