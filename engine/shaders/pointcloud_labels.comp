#version 450
// Point cloud, labels read in place: each invocation turns PER_INVOCATION points' labels (int32
// or uint8, in the tensor's own memory) into their colour-table indices in point_colors[] (a
// negative label: COLOR_UNLABELLED; else PALETTE_BASE + label % NPAL: PointCloud.color_index's
// rule), and notes which labels occur for the legend (bits of the labels 0..63, a count of the
// larger ones), one atomic per word. Runs in the frame, before the splat reads point_colors[].
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_labels_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_pointfit.py

#define PER_INVOCATION 16u
#define DT_I32 3u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(PC_N);
    uint base = P(PC_LBASE);
    bool wide = P(PC_LDTYPE) == DT_I32;
    uint npal = P(PC_NPAL);
    uint lo = 0u;
    uint hi = 0u;
    uint more = 0u;
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        int label;
        if (wide) {
            label = int(labels[(base >> 2) + i]);
        } else {
            uint b = base + i;
            label = int((labels[b >> 2] >> ((b & 3u) * 8u)) & 255u);
        }
        if (label < 0) {
            point_colors[i] = COLOR_UNLABELLED;
            continue;
        }
        uint l = uint(label);
        point_colors[i] = PALETTE_BASE + l % npal;
        if (l < 32u) lo |= 1u << l;
        else if (l < CLASS_BITS) hi |= 1u << (l - 32u);
        else more += 1u;
    }
    if (lo != 0u) atomicOr(stats[ST_CLASSES_LO], lo);
    if (hi != 0u) atomicOr(stats[ST_CLASSES_HI], hi);
    if (more != 0u) atomicAdd(stats[ST_CLASSES_MORE], more);
}
