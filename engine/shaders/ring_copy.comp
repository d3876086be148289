#version 450
// Rewind history (caliper_vk/live/history.py): copy one kept input's words into a ring chunk
// at the frame's place. The dispatches are recorded once per layout of the panels and chunk,
// and re-submitted frame after frame: only the frame's first word in the chunk changes, and
// the host writes it into `Base` before the submission (no command buffer is recorded per frame).
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Base { uint base_word; };  // the frame's first word
layout(std430, binding = 1) readonly buffer Args { uint src_word; uint dst_word; uint words; };
layout(std430, binding = 2) readonly buffer Src { uint src[]; };
layout(std430, binding = 3) writeonly buffer Dst { uint dst[]; };

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= words) return;
    dst[base_word + dst_word + i] = src[src_word + i];
}
