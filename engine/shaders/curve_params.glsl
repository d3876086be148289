// Word offsets into the curve parameter buffer (uint words; floats by bits).
// Mirrored by caliper_vk/views/curve.py; keep in step.
#define CV_N 0
#define CV_BASE 1
#define CV_DTYPE 2
#define CV_W 3
#define CV_H 4
#define CV_RECT_X 5
#define CV_RECT_Y 6
#define CV_LO 7
#define CV_SCALE 8
#define CV_STEP 9
#define CV_SERIES 10
#define CV_BG 11
#define CV_COLOR0 12
#define CV_COLOR1 13

#define CS_NAN 0
#define CS_INF 1

#define NO_ROWS 0xFFFFFFFFu

#define f(k) uintBitsToFloat(P[k])
