#version 450
// Point cloud, values read in place: each point's colour-table index from its value, by the
// range of this frame (VLO, VSCALE: from the host, or written by pointcloud_fit.comp): the
// colormap entry lut_index(v) of a finite value, COLOR_NAN for NaN/Inf (PointCloud.color_index's
// rule), into point_colors[], which the splat reads after a barrier.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_values_color_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_pointfit.py

#define INPUT vals
#include "input.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P(PC_N)) return;
    float v = load_input(P(PC_VBASE), P(PC_VDTYPE), i);
    point_colors[i] = classify(v) == CLASS_FINITE ? lut_index(ftz(v), f(PC_VLO), f(PC_VSCALE), 255u)
                                                  : COLOR_NAN;
}
