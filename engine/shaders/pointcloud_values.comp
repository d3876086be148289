#version 450
// Point cloud, values read in place, the range's first pass: the least and greatest flushed
// finite value (orderable keys; the greatest as the complement of its key), per invocation
// over PER_INVOCATION points, then one 32-bit atomicMin per word into the box buffer
// (BOX_VMIN, BOX_VNOT_MAX). Exact in any order. pointcloud_fit.comp turns them into VLO and
// VSCALE. Mirrored by caliper_vk/views/_pointfit.py: device_value_keys.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_values_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_pointfit.py

#define INPUT vals
#include "input.glsl"

#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(PC_N);
    uint kmin = 0xFFFFFFFFu;
    uint kmax = 0u;
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float v = load_input(P(PC_VBASE), P(PC_VDTYPE), i);
        if (classify(v) != CLASS_FINITE) continue;
        uint k = orderable(ftz(v));
        kmin = min(kmin, k);
        kmax = max(kmax, k);
    }
    if (kmin != 0xFFFFFFFFu) {
        atomicMin(box[BOX_VMIN], kmin);
        atomicMin(box[BOX_VNOT_MAX], ~kmax);
    }
}
