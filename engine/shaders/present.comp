#version 450
// Window presentation: copy the canvas into an image whose byte order matches
// the swapchain's format (BGRA swaps red and blue), so a plain vkCmdCopyImage
// puts the canvas's exact bytes on screen.
layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) readonly buffer Params { uint P[]; };  // width, height, swap_rb
layout(rgba8ui, binding = 1) uniform readonly uimage2D canvas;
layout(rgba8ui, binding = 2) uniform writeonly uimage2D target;

void main() {
    ivec2 at = ivec2(gl_GlobalInvocationID.xy);
    if (uint(at.x) >= P[0] || uint(at.y) >= P[1]) return;
    uvec4 c = imageLoad(canvas, at);
    imageStore(target, at, P[2] != 0u ? c.bgra : c);
}
