#version 450
// The benchmark floor (bench/floor.py): the least a Vulkan point-cloud frame can do.
// Compiled twice: -DSPLAT=1 gives the per-point pass, -DSPLAT=0 the per-pixel resolve.
//
// Splat: one invocation per point projects it (a fixed orthographic camera), drops it if it
// falls outside the frame (NaN fails the test too), and keeps per pixel the nearest point by
// one 32-bit atomicMax of (quantised depth << 8 | label): 24 bits of depth, 8 of label,
// 0 = no point. Resolve: one invocation per pixel maps the key to a palette colour darkened
// with depth, or the background, into a packed RGBA8 word.
layout(local_size_x = 256) in;

layout(std140, binding = 0) uniform Params {
    vec4 r0;      // the rotation's rows, each .w unused
    vec4 r1;
    vec4 r2;
    vec4 center;  // .w: the screen scale (pixels per unit)
    vec4 screen;  // (width / 2, height / 2, depth scale, depth offset)
    uvec4 size;   // (points, width, height, word offset of the first coordinate)
    uvec4 palette[3];  // 10 packed RGBA8 colours, then the background, then one unused
};

#if SPLAT
layout(std430, binding = 1) readonly buffer Positions { float pos[]; };
layout(std430, binding = 2) readonly buffer Labels { uint labels[]; };
layout(std430, binding = 3) buffer Keys { uint keys[]; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= size.x) return;
    uint b = size.w + 3u * i;
    vec3 p = vec3(pos[b], pos[b + 1u], pos[b + 2u]) - center.xyz;
    float sx = dot(r0.xyz, p) * center.w + screen.x;
    float sy = screen.y - dot(r1.xyz, p) * center.w;
    if (!(sx >= 0.0 && sx < float(size.y) && sy >= 0.0 && sy < float(size.z))) return;
    float d = clamp(dot(r2.xyz, p) * screen.z + screen.w, 1.0, 16777215.0);
    // float -> int conversions: x86 SIMD has a signed one only (an unsigned one costs more)
    uint key = uint(int(d)) << 8 | labels[i];
    atomicMax(keys[int(sy) * int(size.y) + int(sx)], key);
}
#else
layout(std430, binding = 1) readonly buffer Keys { uint keys[]; };
layout(std430, binding = 2) writeonly buffer Frame { uint frame[]; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= size.y * size.z) return;
    uint k = keys[i];
    uint c = palette[2].z;  // the background
    if (k != 0u) {
        uint label = k & 255u;  // 0..9: the host reduced the labels modulo 10
        uint rgba = palette[label >> 2][label & 3u];
        uint shade = 156u + ((k >> 8) * 100u >> 24);  // 156..255: nearer is brighter
        c = ((((rgba & 255u) * shade) >> 8) | (((((rgba >> 8) & 255u) * shade) >> 8) << 8)
             | (((((rgba >> 16) & 255u) * shade) >> 8) << 16) | (rgba & 0xFF000000u));
    }
    frame[i] = c;
}
#endif
