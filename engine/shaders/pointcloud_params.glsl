// Word offsets into the point-cloud parameter block (uint words; floats by bits).
// Mirrored by caliper_vk/views/pointcloud.py (PointCloudParams); keep in step.
#define PC_N 0
#define PC_DIM 1
#define PC_W 2
#define PC_H 3
#define PC_SIZE 4
#define PC_MODE 5
#define PC_NPAL 6
#define PC_MARGIN 7
#define PC_CX 8
#define PC_CY 9
#define PC_CZ 10
#define PC_R0 11
#define PC_R1 12
#define PC_R2 13
#define PC_R3 14
#define PC_R4 15
#define PC_R5 16
#define PC_R6 17
#define PC_R7 18
#define PC_R8 19
#define PC_SCALE 20
#define PC_NSCALE 21
#define PC_OX 22
#define PC_OY 23
#define PC_ZMIN 24    // the nearest depth of the fit, as -depth (quantisation origin)
#define PC_DSCALE 25  // depth levels per unit of depth: DEPTH_MAX / (2 radius)
#define PC_VLO 26
#define PC_VSCALE 27
#define PC_RECT_X 28
#define PC_RECT_Y 29
#define PC_BG 30
#define PC_BASE 31
#define PC_DTYPE 32
#define PC_VEC4S 9  // the block's size in uvec4s (N_PARAMS / 4; words 33-35 are padding)

// Specialisation constants, set per pipeline by caliper_vk/views/pointcloud.py (they
// mirror the words PC_DTYPE, PC_SIZE, PC_MODE and PC_DIM): the driver compiles each
// pipeline with them folded in, so the splat decodes only its input's dtype and dimension,
// runs an unrolled footprint and reads no colour data for a uniform cloud (a CPU
// implementation such as lavapipe otherwise runs every side of a branch, for every point).
layout(constant_id = 0) const uint SPEC_DTYPE = 0u;
layout(constant_id = 1) const uint SPEC_SIZE = 1u;
layout(constant_id = 2) const uint SPEC_MODE = 0u;
layout(constant_id = 3) const uint SPEC_DIM = 3u;

#define MODE_UNIFORM 0u
#define MODE_LABELS 1u
#define MODE_VALUES 2u

// The depth key: one 32-bit word per pixel, resolved by 32-bit atomicMin (no 64-bit
// atomics: MoltenVK cannot expose them). High KEY_DEPTH_BITS: the point's depth quantised
// to DEPTH_MAX + 1 levels over the fitted depth range (0 = nearest); low KEY_COLOR_BITS:
// its colour's index in colors[] (COLOR_TABLE_SIZE entries). The winner's colour is a
// function of the key alone, so ties (equal level) resolve to the lower colour index and
// any point of a tie gives the same pixel. EMPTY is above every key.
#define KEY_COLOR_BITS 9u
#define KEY_COLOR_MASK 511u
#define KEY_DEPTH_BITS 23u
#define DEPTH_MAX 8388607u  // (1 << KEY_DEPTH_BITS) - 1
#define EMPTY_KEY 0xFFFFFFFFu

// Colour table layout: 256 colormap entries, then the categorical palette (up to
// PALETTE_MAX), then the three fixed colours.
#define PALETTE_BASE 256u
#define PALETTE_MAX 252u
#define COLOR_NAN 508u
#define COLOR_UNLABELLED 509u
#define COLOR_UNIFORM 510u
#define COLOR_TABLE_SIZE 512u

#define ST_NONFINITE 0
#define ST_OFFSCREEN 1
#define ST_NONFINITE_VALUES 2

#define LUT_SIZE 256u

// The parameters are a uniform block (`uniform Params { uvec4 PV[PC_VEC4S]; }`), not a
// storage buffer: a uniform load is one scalar load on a CPU implementation (lavapipe runs
// a storage-buffer load once per lane). P(k) reads word k.
#define P(k) PV[(k) >> 2][(k) & 3]
#define f(k) uintBitsToFloat(P(k))
