#version 450
// Point cloud, the fit's first pass: the box of the finite points, on the device, in the frame.
// Each invocation keeps the least and greatest coordinate per axis of PER_INVOCATION points
// (as orderable keys; a point with any NaN/Inf coordinate is left out, as the splat leaves it
// out; coordinates flushed by ftz as the projection flushes them), then issues one 32-bit
// atomicMin per word: the least key and the complement of the greatest (BOX_MIN, BOX_NOT_MAX).
// Min and max are exact in any order. Mirrored by caliper_vk/views/_pointfit.py: device_box.
layout(local_size_x = 256) in;
#include "common.glsl"
#include "pointcloud_bounds_bindings.glsl"  // its parameters and bindings: engine/shaders/passes.py

#define INPUT pos
#include "input.glsl"

#define PER_INVOCATION 16u

void main() {
    uint first = linear_invocation() * PER_INVOCATION;
    uint n = P(PC_N);
    uint dim = SPEC_DIM;
    uint lo[3] = uint[3](0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu);
    uint hi[3] = uint[3](0u, 0u, 0u);
    for (uint i = first; i < min(first + PER_INVOCATION, n); ++i) {
        float x = load_input(P(PC_BASE), SPEC_DTYPE, i * dim);
        float y = load_input(P(PC_BASE), SPEC_DTYPE, i * dim + 1u);
        float z = dim == 3u ? load_input(P(PC_BASE), SPEC_DTYPE, i * dim + 2u) : 0.0;
        if (classify(x) != CLASS_FINITE || classify(y) != CLASS_FINITE || classify(z) != CLASS_FINITE) {
            continue;
        }
        uint kx = orderable(ftz(x));
        uint ky = orderable(ftz(y));
        uint kz = orderable(ftz(z));
        lo[0] = min(lo[0], kx);
        lo[1] = min(lo[1], ky);
        lo[2] = min(lo[2], kz);
        hi[0] = max(hi[0], kx);
        hi[1] = max(hi[1], ky);
        hi[2] = max(hi[2], kz);
    }
    if (lo[0] != 0xFFFFFFFFu) {  // some point here was finite
        for (uint k = 0u; k < 3u; ++k) {
            atomicMin(box[BOX_MIN + k], lo[k]);
            atomicMin(box[BOX_NOT_MAX + k], ~hi[k]);
        }
    }
}
