// Exact integer scaling for pixel-to-cell mappings: floor(a * b / c) and ceil(a * b / c).
//
// SPEC_WIDE is a specialisation constant the host sets to 1 when a product can reach
// 2^32 (huge arrays on large panels), so the 64-bit path is compiled only then: a CPU
// device (lavapipe) divides 64-bit vectors lane by lane at several times the cost of
// 32-bit ones, and runs both sides of any branch that is not folded away. Include after
// the params header that declares SPEC_WIDE, and after GL_ARB_gpu_shader_int64.

uint muldiv(uint a, uint b, uint c) {
    if (SPEC_WIDE == 0u) return (a * b) / c;
    return uint((uint64_t(a) * uint64_t(b)) / uint64_t(c));
}

uint muldiv_up(uint a, uint b, uint c) {
    if (SPEC_WIDE == 0u) return (a * b + c - 1u) / c;
    return uint((uint64_t(a) * uint64_t(b) + uint64_t(c - 1u)) / uint64_t(c));
}
