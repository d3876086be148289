// Word offsets into the histogram parameter buffer (uint words; floats by bits).
// Mirrored by caliper_vk/views/histogram.py; keep in step.
#define HG_N 0
#define HG_BASE 1
#define HG_DTYPE 2
#define HG_BINS 3
#define HG_LO 4
#define HG_SCALE 5
#define HG_HI 6
#define HG_W 7
#define HG_H 8
#define HG_RECT_X 9
#define HG_RECT_Y 10
#define HG_HISTORY 11
#define HG_HISTORY_MAX 12
#define HG_BG 13
#define HG_COLOR 14
#define HG_OLD_COLOR 15
#define HG_OFFSET 16  // 0: overlay; else the pixels each older step is raised by (offset layout)

// stats words after the bins
#define HS_NAN 0
#define HS_POSINF 1
#define HS_NEGINF 2
#define HS_BELOW 3
#define HS_ABOVE 4
#define HS_MAX 5

#define f(k) uintBitsToFloat(P[k])
