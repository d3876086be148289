#version 450
// Point cloud, pass 2 (large clouds): one invocation per panel pixel turns the winning key
// (if any) into its colour (the table colour in its low bits, darkened by the depth level in
// its high bits: pointcloud_color.glsl), in place: the key buffer becomes the panel's packed
// RGBA8 rows, which a transfer then copies into the target image. Empty pixels get the
// background. It reads no per-point data: one load per pixel, one table load per covered
// pixel. Writing a buffer and copying it measured about 40% less lavapipe time than an
// imageStore per pixel (800 x 600, 1M points).
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_resolve_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_pointfit.py

#define POINT_COLORS
#include "pointcloud_color.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P(PC_W) * P(PC_H)) return;
    uint key = depth[i];
    depth[i] = key != EMPTY_KEY ? key_color(key) : P(PC_BG);
}
