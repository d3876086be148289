// Determinism helpers shared by the built-in views.
//
// The exact-path rules (docs/determinism.md): float math is only + - * and
// conversions, each result flushed by ftz() so that drivers which keep
// subnormals and drivers which flush them agree; classification by bit tests;
// no division or transcendental functions; colours are packed RGBA8 words
// (r | g << 8 | b << 16 | a << 24) looked up from host-made tables.

// Round float results to nearest, ties to even, as numpy does (SPIR-V RoundingModeRTE for
// 32-bit floats). Without it Vulkan lets a driver round toward zero; on a device that cannot
// take the mode (shaderRoundingModeRTEFloat32 false) the engine removes the declaration
// before it creates the pipeline (engine/limits.py: fit_rounding_mode).
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(capabilities = [4467], 4462, 32);

const uint CLASS_FINITE = 0u;
const uint CLASS_NAN = 1u;
const uint CLASS_POSINF = 2u;
const uint CLASS_NEGINF = 3u;

uint classify(float v) {
    uint b = floatBitsToUint(v);
    if ((b & 0x7F800000u) != 0x7F800000u) return CLASS_FINITE;
    if ((b & 0x007FFFFFu) != 0u) return CLASS_NAN;
    return (b & 0x80000000u) != 0u ? CLASS_NEGINF : CLASS_POSINF;
}

// Subnormals and -0 become +0; everything else is returned unchanged.
float ftz(float v) {
    return (floatBitsToUint(v) & 0x7F800000u) == 0u ? 0.0 : v;
}

// A uint whose unsigned order is the float order (for atomicMin depth keys).
uint orderable(float v) {
    uint b = floatBitsToUint(v);
    return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

float from_orderable(uint k) {
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7FFFFFFFu) : ~k);
}

// Index into a table of last+1 entries for a finite v: round((v - lo) * scale), clamped.
uint lut_index(float v, float lo, float scale, uint last) {
    precise float d = ftz(v - lo);
    precise float t = ftz(d * scale);
    if (!(t > 0.0)) return 0u;
    if (t >= float(last)) return last;
    precise float r = ftz(t + 0.5);
    return uint(r);
}

uvec4 unpack_rgba(uint c) {
    return uvec4(c & 255u, (c >> 8) & 255u, (c >> 16) & 255u, c >> 24);
}

// Scale the RGB channels of a packed colour by shade/256 (integer math).
uint shade_rgba(uint c, uint shade) {
    uint r = ((c & 255u) * shade) >> 8;
    uint g = (((c >> 8) & 255u) * shade) >> 8;
    uint b = (((c >> 16) & 255u) * shade) >> 8;
    return r | (g << 8) | (b << 16) | (c & 0xFF000000u);
}

// The flat index of this invocation in a 1-D job dispatched as a 2-D grid
// (workgroup counts are capped at 65535 per dimension). Include this file
// after the "layout(local_size_x = ...) in;" line: before it,
// gl_WorkGroupSize still reads as (1, 1, 1).
uint linear_invocation() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
        + gl_LocalInvocationID.x;
}

// 1 / m for m in [1, 2): 24/17 - 8/17 m (relative error <= 1/17), then Newton.
float recip_mantissa(float m) {
    precise float r = uintBitsToFloat(0x3FB4B4B5u) - uintBitsToFloat(0x3EF0F0F1u) * m;
    for (int k = 0; k < 4; ++k) {
        precise float e = 1.0 - m * r;
        precise float rn = r + r * e;
        r = rn;
    }
    return r;
}

// 1 / d for 0 < d <= 1 with d normal (a debiasing factor 1 - alpha^t): d = m * 2^e with m
// in [1, 2), 1 / m from recip_mantissa(), then 2^-e through the exponent bits (e <= 0: no
// overflow). No division; caliper_vk/views/_exact.py (recip_unit) is the twin.
float recip_unit(float d) {
    uint db = floatBitsToUint(d);
    int e = int(db >> 23) - 127;
    float m = uintBitsToFloat((db & 0x007FFFFFu) | 0x3F800000u);
    uint rb = floatBitsToUint(recip_mantissa(m));
    int biased = int(rb >> 23) - e;
    return uintBitsToFloat((rb & 0x807FFFFFu) | (uint(biased) << 23));
}
