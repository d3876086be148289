#version 450
// Overlay vertex stage: 2-D triangles in display units (Dear ImGui's ImDrawVert
// layout: vec2 position, vec2 uv, RGBA8 colour) mapped to clip space by a
// host-computed scale and translation (push constants), so the shader does no
// division. Vulkan's clip space has +y down, like the display: no flip.
layout(location = 0) in vec2 in_position;
layout(location = 1) in vec2 in_uv;
layout(location = 2) in vec4 in_color;  // R8G8B8A8_UNORM, straight (not premultiplied) alpha

layout(push_constant) uniform Transform {
    vec2 scale;
    vec2 translate;
} transform;

layout(location = 0) out vec4 color;
layout(location = 1) out vec2 uv;

void main() {
    color = in_color;
    uv = in_uv;
    gl_Position = vec4(in_position * transform.scale + transform.translate, 0.0, 1.0);
}
