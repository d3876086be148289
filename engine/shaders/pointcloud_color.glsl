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
// color_index(i): point i's colour as an index into colors[]: its label's palette entry,
// its value's colormap entry (or the NaN colour), or a fixed colour. The host makes the
// per-point indices once per labels or values (PointCloud.color_index, the twin's own
// rule) into point_colors[], or, for labels read in place, pointcloud_labels.comp does on the
// device each frame; a uniform cloud reads nothing. Needs point_colors[].
// key_color(key): the pixel colour of a winning key: the table colour darkened with
// distance (integer shade from the depth level). Needs P() and colors[].
// The splat, the per-point paint and the per-pixel resolve all use these.

#ifdef POINT_INPUTS
uint color_index(uint i) {
    return SPEC_MODE == MODE_UNIFORM ? COLOR_UNIFORM : point_colors[i];
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
