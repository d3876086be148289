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
#define PC_ZMIN 24
#define PC_ZSCALE 25
#define PC_VLO 26
#define PC_VSCALE 27
#define PC_RECT_X 28
#define PC_RECT_Y 29
#define PC_BG 30
#define PC_COLOR 31
#define PC_NAN_COLOR 32
#define PC_UNLABELLED 33
#define PC_BASE 34
#define PC_DTYPE 35
#define PC_VEC4S 9  // the block's size in uvec4s (N_PARAMS / 4)

#define MODE_UNIFORM 0u
#define MODE_LABELS 1u
#define MODE_VALUES 2u

#define ST_NONFINITE 0
#define ST_OFFSCREEN 1
#define ST_NONFINITE_VALUES 2

// Colour table layout: 256 colormap entries, then the categorical palette.
#define LUT_SIZE 256u

// The parameters are a uniform block (`uniform Params { uvec4 PV[PC_VEC4S]; }`), not a
// storage buffer: a uniform load is one scalar load on a CPU implementation (lavapipe runs
// a storage-buffer load once per lane). P(k) reads word k.
#define P(k) PV[(k) >> 2][(k) & 3]
#define f(k) uintBitsToFloat(P(k))
