#version 450
// Curve: the EMA of the raw trace (when the view smooths) and the last finite sample (for the
// title), from the values where they live, as a scan of the recurrence's affine maps.
// A finite sample x is the map y -> alpha * y + beta * x, written (alpha, beta * x) (beta = 1 - alpha,
// made on the host); a NaN/Inf sample is the identity (1, 0). Two maps in order compose as
// (a1, b1) then (a2, b2) = (a2 * a1, a2 * b1 + b2) (compose below): the first word of a prefix is
// alpha^t (t finite samples: the debiasing power), the second the EMA from zero.
// The samples are cut in tiles of SC_TILE = SC_LANES x SC_PER_LANE. A workgroup of SC_LANES lanes
// loads a tile into shared memory with adjacent lanes reading adjacent samples; then lane l
// composes, in order, the SC_PER_LANE samples l * SC_PER_LANE .. of the tile, and a Hillis-Steele
// scan (lane_scan) over the lanes' maps gives each lane the map of the tile's samples before it.
// Three stages (SPEC_STAGE):
//   0. one workgroup per tile: its map and 1 + its last finite index (scan words 0, 1, 2);
//   1. one workgroup: the same scan over the tiles' maps, SC_TILE at a time with a carry from
//      one segment to the next, writes each tile's carry (the map of every sample before it, words
//      3 and 4), and the last finite sample;
//   2. one workgroup per tile: from its carry then its lane's prefix it runs its samples in order,
//      m = alpha * m + beta * x and p = alpha * p, and writes y = m * (1 / (1 - p)) after each finite
//      sample (debiased as Adam's moments are, so the line starts at the first sample and does not
//      sit above a falling loss; 1 / (1 - p) has no division: recip_unit in common.glsl), NaN at
//      the others (a gap stays a gap); on a log axis it writes log2e(y), or NaN where y <= 0.
// Float32 with `precise` multiplies and adds, each flushed (round-to-nearest-even assumed, as
// everywhere in the exact path): the same combination tree, so the same bits, on every device,
// and the numpy twin (caliper_vk/views/curve.py, ema32) builds the same tree.
layout(local_size_x = 64) in;  // SC_LANES
#include "common.glsl"
#include "curve_smooth_bindings.glsl"  // its parameters and bindings: engine/shaders/passes.py

#include "curve_log.glsl"  // log2e, on_axis (SPEC_LOGY)

#define INPUT data
#include "input.glsl"

shared float s_a[SC_TILE];  // stages 0 and 2: the tile's samples; stage 1: the tiles' first words
shared float s_b[SC_TILE];  // stage 1: the tiles' second words
shared float h_a[SC_LANES];  // the lanes' maps, scanned in place
shared float h_b[SC_LANES];
shared uint s_last;

// (a, b) then (a2, b2), each product and sum flushed
void compose(inout float a, inout float b, float a2, float b2) {
    precise float an = ftz(a2 * a);
    precise float t = ftz(a2 * b);
    precise float bn = ftz(t + b2);
    a = an;
    b = bn;
}

// The map of sample v: (alpha, beta * v) when finite, else the identity.
void sample_map(float v, out float a, out float b) {
    a = 1.0;
    b = 0.0;
    if (classify(v) == CLASS_FINITE) {
        precise float bx = ftz(f(CV_BETA) * ftz(v));
        a = f(CV_ALPHA);
        b = bx;
    }
}

// Inclusive Hillis-Steele scan of h over the lanes: after step d lane l holds the maps of lanes
// max(0, l - 2d + 1) .. l composed.
void lane_scan(uint lane) {
    for (uint d = 1u; d < SC_LANES; d <<= 1) {
        bool has = lane >= d;
        float pa = 1.0;
        float pb = 0.0;
        if (has) {
            pa = h_a[lane - d];
            pb = h_b[lane - d];
        }
        barrier();
        if (has) {
            compose(pa, pb, h_a[lane], h_b[lane]);
            h_a[lane] = pa;
            h_b[lane] = pb;
        }
        barrier();
    }
}

// Stages 0 and 2: the tile's samples into s_a (NaN past the end: identities); then each lane's
// map of its own samples into h, scanned (when the view smooths: else only the last finite index
// is wanted, and h holds identities). Returns 1 + the lane's last finite index (0: none).
uint tile_prefix(uint tile, uint lane) {
    uint n = P(CV_N);
    uint base = tile * SC_TILE;
    for (uint r = 0u; r < SC_PER_LANE; ++r) {
        uint i = base + r * SC_LANES + lane;
        s_a[r * SC_LANES + lane] = i < n ? load_input(P(CV_BASE), P(CV_DTYPE), i) : uintBitsToFloat(0x7FC00000u);
    }
    barrier();
    bool smoothing = P(CV_SERIES) == 2u;  // uniform: the barriers of lane_scan are safe
    float a = 1.0;
    float b = 0.0;
    uint last = 0u;
    for (uint k = 0u; k < SC_PER_LANE; ++k) {
        uint at = lane * SC_PER_LANE + k;
        float v = s_a[at];
        if (classify(v) == CLASS_FINITE) last = base + at + 1u;
        if (smoothing) {
            float ea;
            float eb;
            sample_map(v, ea, eb);
            compose(a, b, ea, eb);
        }
    }
    h_a[lane] = a;
    h_b[lane] = b;
    barrier();
    if (smoothing) lane_scan(lane);
    return last;
}

void tile_map(uint tile, uint lane) {
    if (lane == 0u) s_last = 0u;
    uint last = tile_prefix(tile, lane);
    if (last != 0u) atomicMax(s_last, last);
    barrier();
    if (lane == SC_LANES - 1u) {
        scan[tile * SC_WORDS] = floatBitsToUint(h_a[lane]);
        scan[tile * SC_WORDS + 1u] = floatBitsToUint(h_b[lane]);
        scan[tile * SC_WORDS + 2u] = s_last;
    }
}

void carries(uint lane) {
    uint tiles = P(CV_TILES);
    float ka = 1.0;  // the map of every tile before this segment
    float kb = 0.0;
    uint last = 0u;
    if (lane == 0u) s_last = 0u;
    for (uint seg = 0u; seg * SC_TILE < tiles; ++seg) {
        for (uint r = 0u; r < SC_PER_LANE; ++r) {
            uint t = seg * SC_TILE + r * SC_LANES + lane;
            bool in_range = t < tiles;
            s_a[r * SC_LANES + lane] = in_range ? uintBitsToFloat(scan[t * SC_WORDS]) : 1.0;
            s_b[r * SC_LANES + lane] = in_range ? uintBitsToFloat(scan[t * SC_WORDS + 1u]) : 0.0;
            if (in_range) last = max(last, scan[t * SC_WORDS + 2u]);
        }
        barrier();
        float a = 1.0;
        float b = 0.0;
        for (uint k = 0u; k < SC_PER_LANE; ++k) compose(a, b, s_a[lane * SC_PER_LANE + k], s_b[lane * SC_PER_LANE + k]);
        h_a[lane] = a;
        h_b[lane] = b;
        barrier();
        lane_scan(lane);
        float ca = ka;  // the carry into this lane's first tile: the segment's carry, then the lanes before
        float cb = kb;
        if (lane > 0u) compose(ca, cb, h_a[lane - 1u], h_b[lane - 1u]);
        else compose(ca, cb, 1.0, 0.0);
        for (uint k = 0u; k < SC_PER_LANE; ++k) {
            uint at = lane * SC_PER_LANE + k;
            uint t = seg * SC_TILE + at;
            if (t < tiles) {
                scan[t * SC_WORDS + 3u] = floatBitsToUint(ca);
                scan[t * SC_WORDS + 4u] = floatBitsToUint(cb);
            }
            compose(ca, cb, s_a[at], s_b[at]);
        }
        compose(ka, kb, h_a[SC_LANES - 1u], h_b[SC_LANES - 1u]);
        barrier();  // every lane has read s and h before the next segment overwrites them
    }
    if (last != 0u) atomicMax(s_last, last);
    barrier();
    if (lane == 0u) {
        stats[CS_LAST_INDEX] = s_last;  // 1 + the index of the last finite sample; 0: none
        if (s_last != 0u) stats[CS_LAST] = floatBitsToUint(ftz(load_input(P(CV_BASE), P(CV_DTYPE), s_last - 1u)));
    }
}

void apply_carry(uint tile, uint lane) {
    tile_prefix(tile, lane);
    float p = uintBitsToFloat(scan[tile * SC_WORDS + 3u]);
    float m = uintBitsToFloat(scan[tile * SC_WORDS + 4u]);
    if (lane > 0u) compose(p, m, h_a[lane - 1u], h_b[lane - 1u]);
    else compose(p, m, 1.0, 0.0);
    for (uint k = 0u; k < SC_PER_LANE; ++k) {
        uint at = lane * SC_PER_LANE + k;
        float v = s_a[at];
        if (classify(v) != CLASS_FINITE) {
            s_a[at] = uintBitsToFloat(0x7FC00000u);
            continue;
        }
        float ea;
        float eb;
        sample_map(v, ea, eb);
        compose(p, m, ea, eb);
        precise float d = ftz(1.0 - p);
        precise float y = ftz(m * recip_unit(d));
        s_a[at] = on_axis(y);
    }
    barrier();
    uint n = P(CV_N);
    for (uint r = 0u; r < SC_PER_LANE; ++r) {
        uint i = tile * SC_TILE + r * SC_LANES + lane;
        if (i < n) smoothed[i] = s_a[r * SC_LANES + lane];
    }
}

void main() {
    uint tile = gl_WorkGroupID.x;
    uint lane = gl_LocalInvocationID.x;
    if (SPEC_STAGE == 1u) {
        if (tile == 0u) carries(lane);
    } else if (tile < P(CV_TILES)) {  // uniform over the workgroup: its barriers are safe
        if (SPEC_STAGE == 0u) tile_map(tile, lane);
        else apply_carry(tile, lane);
    }
}
