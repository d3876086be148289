#version 450
// Curve, pass 1: for every panel column and series, the span of rows the trace
// covers there. More samples than columns: the min..max band of the column's
// samples (and the next column's first, so the trace stays connected). Fewer:
// the line between the values interpolated at this column and the next
// (x = column * step, step = (n - 1) / (width - 1) made on the host). Rows come
// from round((v - lo) * scale) with the exact-path rules, over the range the
// frame's resolve pass wrote (stats words ST_LO, ST_SCALE). A column whose samples
// are all NaN/Inf covers no rows: a missing measurement stays visibly missing. On a log axis
// (SPEC_LOGY) a sample draws at its log2 (on_axis, curve_log.glsl) and one <= 0 is not drawn (the
// stats pass counts it); the NaN/Inf counts always come from the raw samples.
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 64) in;
#include "common.glsl"
#include "curve_columns_bindings.glsl"  // its parameters and bindings: caliper_vk/views/_curveaxes.py
#include "heatmap_params.glsl"  // the stats words of the heatmap stats pass (ST_LO, ST_SCALE)

#include "curve_log.glsl"  // log2e, on_axis (SPEC_LOGY)

#define INPUT data
#include "input.glsl"

float sample_at(uint series, uint i) {
    return series == 0u ? on_axis(load_input(P(CV_BASE), P(CV_DTYPE), i)) : smoothed[i];
}

uint raw_class(uint i) {
    return classify(load_input(P(CV_BASE), P(CV_DTYPE), i));
}

uint row_of(float v) {
    return lut_index(ftz(v), uintBitsToFloat(stats[ST_LO]), uintBitsToFloat(stats[ST_SCALE]), P(CV_H) - 1u);
}

// The value interpolated at column c (fewer samples than columns); NaN-free or flagged.
bool value_at(uint series, uint c, out float v) {
    precise float x = ftz(float(c) * f(CV_STEP));
    uint n = P(CV_N);
    uint i = min(uint(x), n - 1u);
    float a = sample_at(series, i);
    float b = sample_at(series, min(i + 1u, n - 1u));
    if (classify(a) != CLASS_FINITE || classify(b) != CLASS_FINITE) return false;
    precise float frac = ftz(x - float(i));
    precise float d = ftz(ftz(b) - ftz(a));
    precise float r = ftz(ftz(a) + ftz(d * frac));
    v = r;
    return true;
}

// The band of column c from its samples lane, lane + stride, ...: the rows' min and max (0xFFFF,
// 0 when none is finite), and the raw trace's NaN and Inf counts among the column's own samples.
void band(uint c, uint series, uint w, uint n, uint lane, uint stride,
          out uint lo_row, out uint hi_row, out uint bad, out uint infs) {
    uint a = uint((uint64_t(c) * uint64_t(n)) / uint64_t(w));
    uint b = uint((uint64_t(c + 1u) * uint64_t(n)) / uint64_t(w));
    lo_row = 0xFFFFu;
    hi_row = 0u;
    bad = 0u;
    infs = 0u;
    uint last = min(b, n - 1u);
    for (uint i = a + lane; i <= last; i += stride) {
        float v = sample_at(series, i);
        if (classify(v) != CLASS_FINITE) {
            uint cls = series == 0u && i < b ? raw_class(i) : CLASS_FINITE;
            if (cls == CLASS_NAN) bad += 1u;
            else if (cls != CLASS_FINITE) infs += 1u;
            continue;
        }
        uint r = row_of(v);
        lo_row = min(lo_row, r);
        hi_row = max(hi_row, r);
    }
}

void put(uint c, uint series, uint w, uint lo_row, uint hi_row, uint bad, uint infs) {
    if (series == 0u && bad != 0u) atomicAdd(stats[CS_NAN], bad);
    if (series == 0u && infs != 0u) atomicAdd(stats[CS_INF], infs);
    columns[series * w + c] = lo_row == 0xFFFFu ? NO_ROWS : (lo_row | (hi_row << 16));
}

// At least COLUMN_GROUP_MIN samples a column (on average): one workgroup per column, its lanes
// striding by the workgroup size (adjacent lanes read adjacent samples), then one shared-memory
// reduction. Min/max rows and the NaN/Inf counts are the same in any order.
shared uint g_lo;
shared uint g_hi;
shared uint g_bad;
shared uint g_infs;

void column_group(uint c, uint series, uint w, uint n) {
    uint lane = gl_LocalInvocationID.x;
    if (lane == 0u) {
        g_lo = 0xFFFFu;
        g_hi = 0u;
        g_bad = 0u;
        g_infs = 0u;
    }
    barrier();
    uint lo_row;
    uint hi_row;
    uint bad;
    uint infs;
    band(c, series, w, n, lane, gl_WorkGroupSize.x, lo_row, hi_row, bad, infs);
    if (lo_row != 0xFFFFu) {
        atomicMin(g_lo, lo_row);
        atomicMax(g_hi, hi_row);
    }
    if (bad != 0u) atomicAdd(g_bad, bad);
    if (infs != 0u) atomicAdd(g_infs, infs);
    barrier();
    if (lane == 0u) put(c, series, w, g_lo, g_hi, g_bad, g_infs);
}

void main() {
    uint w = P(CV_W);
    uint n = P(CV_N);
    if (uint64_t(n) >= uint64_t(COLUMN_GROUP_MIN) * uint64_t(w)) {
        // dispatched as (w, series) workgroups: a uniform branch, so the barriers are safe
        uint c = gl_WorkGroupID.x;
        uint series = gl_WorkGroupID.y;
        if (c < w && series < P(CV_SERIES)) column_group(c, series, w, n);
        return;
    }
    uint c = gl_GlobalInvocationID.x;  // fewer samples: one invocation per column
    uint series = gl_GlobalInvocationID.y;
    if (c >= w || series >= P(CV_SERIES)) return;
    uint lo_row = 0xFFFFu;
    uint hi_row = 0u;
    uint bad = 0u;
    uint infs = 0u;
    if (n >= w) {
        band(c, series, w, n, 0u, 1u, lo_row, hi_row, bad, infs);
    } else {
        if (c < n) {  // fewer samples than columns: column c counts sample c
            uint cls = raw_class(c);
            if (cls == CLASS_NAN) bad = 1u;
            else if (cls != CLASS_FINITE) infs = 1u;
        }
        float v0;
        float v1;
        bool ok0 = value_at(series, c, v0);
        bool ok1 = c + 1u < w ? value_at(series, c + 1u, v1) : false;
        if (ok0) { lo_row = row_of(v0); hi_row = lo_row; }
        if (ok0 && ok1) { uint r1 = row_of(v1); lo_row = min(lo_row, r1); hi_row = max(hi_row, r1); }
    }
    put(c, series, w, lo_row, hi_row, bad, infs);
}
