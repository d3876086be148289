// Word offsets into the heatmap parameter block (uint words; floats by bits).
// Mirrored by caliper_vk/views/heatmap.py (HeatmapParams); keep in step.
#define HM_ROWS 0
#define HM_COLS 1
#define HM_W 2
#define HM_H 3
#define HM_RECT_X 4
#define HM_RECT_Y 5
#define HM_N 6
#define HM_LO 7
#define HM_SCALE 8
#define HM_HI 9
#define HM_NAN_COLOR 10
#define HM_POSINF_COLOR 11
#define HM_NEGINF_COLOR 12
#define HM_BG 13
#define HM_BASE 14
#define HM_DTYPE 15
#define HM_VEC4S 4  // the block's size in uvec4s (N_PARAMS / 4)

#define ST_NAN 0
#define ST_POSINF 1
#define ST_NEGINF 2
#define ST_BELOW 3
#define ST_ABOVE 4
#define ST_MIN 5
#define ST_MAX 6

// A uniform block, as in pointcloud_params.glsl: P(k) reads word k.
#define P(k) PV[(k) >> 2][(k) & 3]
#define f(k) uintBitsToFloat(P(k))
