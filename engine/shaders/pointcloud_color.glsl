// The point cloud's 32-bit depth keys.
//
// One 32-bit word per pixel, resolved by 32-bit atomicMin (no 64-bit atomics: MoltenVK
// cannot expose them). High KEY_DEPTH_BITS: the point's depth quantised to DEPTH_MAX + 1
// levels over the fitted depth range (0 = nearest); low KEY_COLOR_BITS: its colour's index
// in colors[] (COLOR_TABLE_SIZE entries: the colormap, the palette, three fixed colours).
// The winner's colour is a function of the key alone, so ties (equal level) resolve to the
// lower colour index and any point of a tie gives the same pixel. EMPTY_KEY is above every
// key. The constants are declared in params.py (POINTCLOUD).
//
// color_index(i): point i's colour as an index into colors[] — its label's palette
// entry, its value's colormap entry, or a fixed colour. Needs P(), labels[], values[].
// key_color(key): the pixel colour of a winning key: the table colour darkened with
// distance (integer shade from the depth level). Needs P() and colors[].
// The splat, the per-point paint and the per-pixel resolve all use these.

#ifdef POINT_INPUTS
uint color_index(uint i) {
    uint mode = P(PC_MODE);
    if (mode == MODE_LABELS) {
        uint label = labels[i];
        return label == 0xFFFFFFFFu ? COLOR_UNLABELLED : PALETTE_BASE + label % P(PC_NPAL);
    }
    if (mode == MODE_VALUES) {
        float v = values[i];
        return classify(v) == CLASS_FINITE ? lut_index(ftz(v), f(PC_VLO), f(PC_VSCALE), LUT_SIZE - 1u)
                                           : COLOR_NAN;
    }
    return COLOR_UNIFORM;
}
#endif

// 256 (nearest) down to 156 (farthest): (level * 101) >> 23 is 0..100 with no division.
uint key_shade(uint key) {
    return 256u - (((key >> KEY_COLOR_BITS) * 101u) >> KEY_DEPTH_BITS);
}

#ifdef POINT_COLORS
uint key_color(uint key) {
    return shade_rgba(colors[key & KEY_COLOR_MASK], key_shade(key));
}
#endif
