#version 450
// Point cloud, pass 2 (small clouds): one invocation per point projects it again
// (pointcloud_project.glsl: the splat's own arithmetic, so the same key) and stores its
// colour into each pixel of its footprint whose key equals its own. The colour is a
// function of the key alone, so every point that matches a pixel stores the same colour
// there: the colour the per-pixel resolve would give it; the panel's background was
// copied in beforehand. The work follows the points, not the panel's area.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_paint_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_pointfit.py

#define INPUT pos
#include "input.glsl"
#define POINT_INPUTS
#define POINT_COLORS
#include "pointcloud_color.glsl"
#include "pointcloud_project.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P(PC_N)) return;
    uint key;
    int ix, iy;
    if (project(i, key, ix, iy) != PROJ_NEAR) return;
    int w = int(P(PC_W));
    int h = int(P(PC_H));
    int rx = int(P(PC_RECT_X));
    int ry = int(P(PC_RECT_Y));
    uvec4 rgba = unpack_rgba(key_color(key));
    for (int dy = foot_lo(); dy <= foot_hi(); ++dy) for (int dx = foot_lo(); dx <= foot_hi(); ++dx) {
        if (!in_footprint(dx, dy)) continue;
        int px = ix + dx;
        int py = iy + dy;
        if (px >= 0 && px < w && py >= 0 && py < h && depth[uint(py) * uint(w) + uint(px)] == key) {
            imageStore(target, ivec2(rx + px, ry + py), rgba);
        }
    }
}
