#version 450
// Overlay fragment stage: vertex colour times the texture (an alpha-only
// texture reads as white with its alpha, through the image view's swizzle).
// Blending (straight alpha, "over") is fixed-function state of the pipeline.
layout(set = 0, binding = 0) uniform sampler2D tex;

layout(location = 0) in vec4 color;
layout(location = 1) in vec2 uv;

layout(location = 0) out vec4 out_color;

void main() {
    out_color = color * texture(tex, uv);
}
