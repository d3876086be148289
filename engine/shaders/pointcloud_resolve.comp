#version 450
// Point cloud, pass 2: one invocation per panel pixel maps the winning point
// (if any) to its colour (uniform, categorical label, or colormapped value),
// darkens it with distance (integer shade from its depth), and stores it.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "pointcloud_params.glsl"

layout(std430, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, binding = 1) readonly buffer Depth { uint64_t depth[]; };
layout(std430, binding = 2) readonly buffer Labels { uint labels[]; };
layout(std430, binding = 3) readonly buffer Values { float values[]; };
layout(std430, binding = 4) readonly buffer Colors { uint colors[]; };
layout(rgba8ui, binding = 5) uniform writeonly uimage2D target;

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    uint w = P[PC_W];
    if (x >= w || y >= P[PC_H]) return;
    uint64_t d = depth[y * w + x];
    uint c = P[PC_BG];
    if (d != 0xFFFFFFFFFFFFFFFFul) {
        uint i = uint(d & 0xFFFFFFFFul);
        uint mode = P[PC_MODE];
        if (mode == MODE_LABELS) {
            uint label = labels[i];
            c = label == 0xFFFFFFFFu ? P[PC_UNLABELLED] : colors[LUT_SIZE + label % P[PC_NPAL]];
        } else if (mode == MODE_VALUES) {
            float v = values[i];
            c = classify(v) == CLASS_FINITE
                ? colors[lut_index(ftz(v), f(PC_VLO), f(PC_VSCALE), LUT_SIZE - 1u)]
                : P[PC_NAN_COLOR];
        } else {
            c = P[PC_COLOR];
        }
        float near = from_orderable(uint(d >> 32));  // -depth of the winner
        uint shade = 156u + lut_index(ftz(-near), f(PC_ZMIN), f(PC_ZSCALE), 100u);
        c = shade_rgba(c, shade);
    }
    imageStore(target, ivec2(int(P[PC_RECT_X] + x), int(P[PC_RECT_Y] + y)), unpack_rgba(c));
}
