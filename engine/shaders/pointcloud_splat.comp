#version 450
// Point cloud, pass 1: project every point and keep, per pixel, the smallest 32-bit key
// (quantised depth << 9 | colour index; pointcloud_color.glsl) by atomicMin. The result
// does not depend on the order invocations run in, and needs no 64-bit atomics.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_params.glsl"

layout(std140, binding = 0) uniform Params { uvec4 PV[PC_VEC4S]; };
layout(std430, binding = 1) readonly buffer Positions { uint pos[]; };
layout(std430, binding = 2) buffer Depth { uint depth[]; };
layout(std430, binding = 3) buffer Stats { uint stats[]; };
layout(std430, binding = 4) readonly buffer PointColors { uint point_colors[]; };

#define INPUT pos
#include "input.glsl"
#define POINT_INPUTS
#include "pointcloud_color.glsl"
#include "pointcloud_project.glsl"

void main() {
    uint i = linear_invocation();
    if (i >= P(PC_N)) return;
    uint key;
    int ix, iy;
    uint where = project(i, key, ix, iy);
    int w = int(P(PC_W));
    int h = int(P(PC_H));
    if (SPEC_MODE == MODE_VALUES && where != PROJ_NONFINITE && point_colors[i] == COLOR_NAN) {
        atomicAdd(stats[ST_NONFINITE_VALUES], 1u);  // a NaN or Inf value
    }
    // A point with a NaN/Inf coordinate, or one whose centre is off the panel (beyond the
    // margin, or near it), is counted, one atomic site for both: on a CPU implementation
    // every atomic site costs a loop over the lanes, taken or not.
    bool offscreen = where == PROJ_FAR || ix < 0 || ix >= w || iy < 0 || iy >= h;
    if (where == PROJ_NONFINITE || offscreen) {
        atomicAdd(stats[where == PROJ_NONFINITE ? ST_NONFINITE : ST_OFFSCREEN], 1u);
    }
    if (where != PROJ_NEAR) return;
    for (int dy = foot_lo(); dy <= foot_hi(); ++dy) for (int dx = foot_lo(); dx <= foot_hi(); ++dx) {
        if (!in_footprint(dx, dy)) continue;
        int px = ix + dx;
        int py = iy + dy;
        if (px >= 0 && px < w && py >= 0 && py < h) {
            // A plain read first: a pixel's key only ever falls, so a key not below what is
            // read can never win there (a stale read is higher, never lower, and only costs
            // the atomic). Most points of a dense cloud lose; on lavapipe the skipped atomics
            // made the 2-px splat of 1M points about a quarter cheaper, with the same bytes.
            uint at = uint(py) * uint(w) + uint(px);
            if (key < depth[at]) atomicMin(depth[at], key);
        }
    }
}
