// Low-latency dispatch and combine, one kernel launch each (docs/DESIGN.md).
//
// Dispatch: the rank's tokens are cut into contiguous ranges, one per
// sending block. Every block counts each expert's selections over the whole
// topk_idx (a few kilobytes, so no grid-wide step is needed), which tells the
// sending block the row each of its selections takes inside its expert's
// rows from this rank (tokens ascending). It sends each token, one message
// per (token, destination peer): the row and a header with the routing and
// those rows (inline, and fenced below 16 tokens: the rows are spread over
// the grid, the places and counts taken first, the headers sent before the
// rows and the own rank's rows written with the sends; lines: the send pass
// writes the own rank's rows too). Once its stores are issued the block
// takes its ticket; fenced with more tokens, its worker warps then write the
// own rank's rows while the peers' data is on its way. After the peers'
// release they copy the messages the block owns (one per source token) to
// the rows their headers name, so the receive side scans nothing; the last
// block also writes the layout.
//
// Combine: the expert side walks the peers' received (source, token) slots,
// cut into row slices so every warp of the grid has work, and either
// reduces its local experts' weighted rows into one bf16 partial
// (rank_local_reduce) or sends every expert row back (direct_send). The
// source side waits for every peer and reduces per token; the own rank's
// part of its tokens (its partial, or its expert rows) does not pass
// through memory: the source side reads it from the expert outputs itself
// (lines: while the peers' lines land; fenced: once their release is in).
// Inline (the fewest tokens) has the worker warps of the same block compute
// it: a partial, or direct_send's fp32 sum of the own rows before any other
// rank's, through shared memory, the rest through memory as a peer's, polled
// by the source side. So no block waits for another block of its own
// grid. In the lines protocol the partials travel as flagged lines that the
// source side polls.
//
// Releases (fenced protocol): each block that had work takes a ticket when
// its stores are issued; the block that takes a call's last ticket makes the
// one system-scope release per peer. Arrival counters only grow, by one per
// fenced call and source, so the host passes the number of fenced calls and
// nothing is cleaned between calls. Small operations use the inline protocol
// instead (ll.cuh): the data carries the call's flag and is polled, with no
// fence and no counter. The lines protocol (ll.cuh) sends each token's
// header first and its row in flagged 128-byte lines, which the receiving
// warps copy as they land. Below kSpreadTokens tokens a token's row is
// sent, written to the own rank's rows and received by many SMs. Every wait
// is bounded. With a device clock (ll.cuh) the kernels take the call number
// from device memory, so their arguments never change and a CUDA graph can
// replay them. Each PTX file is one variant (ll.cuh), built with the
// protocols, dtype and combine mode fixed. The dispatch kernel is written in
// ll_dispatch.cuh, once per send path: spread over the grid or not.
#include <limits.h>
#include <stddef.h>

// EPBENCH_GIN=1: the GIN build (ll_gin.cuh), of the fenced variants.
#ifndef EPBENCH_GIN
#define EPBENCH_GIN 0
#endif
#include "ll_gin.cuh"
#include "ll.cuh"
#if EPBENCH_GIN && (EPBENCH_DISPATCH_PROTO != 0 || EPBENCH_COMBINE_PROTO != 0 || EPBENCH_COMBINE_MODE == 1)
#error "the GIN build is of the fenced protocols with a per-rank combine (rank_local_reduce or rank-major)"
#endif
#if EPBENCH_GIN
static_assert(epbench::kGinMaskWords * 64 == epbench::kMaxRanks, "GinArgs.peers has a bit per rank");
#endif

using namespace epbench;

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarp;
constexpr int kWorkers = kThreads - kWarp;  // threads of warps 1.. (warp 0 makes the releases)
constexpr int kVecPerLane = 2;              // 16-byte vectors per lane in a combine work item
constexpr int kBatch = 4;                   // rows whose loads are in flight together in combine
// The inline combine's hand-over area per lane, in 16-byte vectors: a bf16
// partial, or direct_send's fp32 sum (twice the room); a build without the
// variant's defines (a compile check) takes the larger.
#if defined(EPBENCH_COMBINE_MODE) && EPBENCH_COMBINE_MODE != 1
constexpr int kHandVecs = kVecPerLane;
#else
constexpr int kHandVecs = 2 * kVecPerLane;
#endif
static_assert(kModeDirectSend == 1, "the #if above spells kModeDirectSend");
constexpr int kSliceVecs = kWarp * kVecPerLane;  // a row is cut into slices of this many vectors
// Bits 24..31 of LLArgs.modes are zero (the flags take the bits below
// them: kernels.Args.SetFlag). Read at run time they are an index the
// compiler cannot fold, which makes a read of the argument block an indexed
// constant load: issued where it stands, waited for only where its value is
// used (the inline combine's y, epbench_ll_combine).
constexpr int kModesZeroShift = 24;
constexpr int kSpreadTokens = 16;          // below: dispatch rows leave from many SMs (see the send pass)
constexpr int kMaxVecPerThread = 4;       // 16-byte vectors of a row per thread (hidden <= 16384)
constexpr int kMaxRecvVecPerThread = (16384 / 8 + kThreads - kWarp - 1) / (kThreads - kWarp);  // of a received row, per worker

// Barrier of the worker warps (1..kWarps-1) only: warp 0 may be waiting in
// its release fence meanwhile.
__device__ __forceinline__ void workers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kWorkers) : "memory"); }

// The tokens of this rank that block b sends: [t0, t1), contiguous ranges
// over min(grid, T) blocks (empty for the others). Where the grid holds the
// tokens (T <= grid: the defaults, one token), block b takes token b and
// nothing is divided; else 32-bit arithmetic suffices: there grid < T <=
// config.MaxTokens (4096), so (b + 1) * T <= grid * T < 2^24. The division
// stood in every dispatch's path to its first barrier (docs/PERF.md, kernels
// v42).
__device__ __forceinline__ void token_range(int T, int& t0, int& t1) {
    const unsigned b = blockIdx.x, g = gridDim.x, n = (unsigned)T;
    if (n <= g) {
        t0 = (int)min(b, n);
        t1 = (int)min(b + 1, n);
    } else {
        t0 = (int)(b * n / g);
        t1 = (int)((b + 1) * n / g);
    }
}

// An item's token (or message) and slice, item / slices and item % slices,
// in unsigned arithmetic: item >= 0 and slices > 0, and the signed forms add
// their sign fix-ups on the way to the routing loads that wait for them.
__device__ __forceinline__ void item_split(int item, int slices, int& t, int& slice) {
    const unsigned q = (unsigned)item / (unsigned)slices;
    t = (int)q;
    slice = item - (int)q * slices;
}

// A selection's expert id from topk_idx, -1 (none) outside [0, E) (one
// unsigned compare).
__device__ __forceinline__ int expert_or_none(int64_t id, int E) { return (uint64_t)id < (uint64_t)E ? (int)id : -1; }

// Selection k of this rank's token t (K selections a token, R ranks of L
// experts): its expert (expert_or_none) and weight, e and w.
__device__ __forceinline__ void own_selection(const LLArgs& a, int t, int k, int K, int R, int L, int* e, float* w) {
    *e = expert_or_none(a.topk_idx[(int64_t)t * K + k], R * L);
    *w = a.topk_w[(int64_t)t * K + k];
}

// The rank whose experts (L a rank) hold selection id `id`, -1 (none) for an
// id outside [0, E).
__device__ __forceinline__ int rank_of(int64_t id, int E, int L) { return id >= 0 && id < E ? (int)(id / L) : -1; }

// Own-rank tokens are never sent to the own rank: the sending block writes
// their rows into the own expert rows directly.
__device__ __forceinline__ bool direct_self(const LLArgs& a, int s) { return s == a.rank; }

// Whether peer is masked (-T), as lane 0 of the warp reads it: a
// warp-uniform answer. Warp-collective.
__device__ __forceinline__ bool masked_warp(const LLArgs& a, int peer) {
    return a.active != nullptr && __shfl_sync(0xffffffffu, (int)masked(a.active, peer), 0) != 0;
}

// The tokens rank s dispatches in this call (its slots from there on hold
// nothing of this call).
__device__ __forceinline__ int tokens_from(const LLArgs& a, int s) {
    return s == a.rank ? a.own_tokens : a.tokens_of == nullptr ? a.tokens : __ldg(a.tokens_of + s);
}

// Whether the dispatch output is rank-major (arg_combine_mode), and
// whether combine reduces per rank (rank_local_reduce and rank-major).
__device__ __forceinline__ bool rank_major(const LLArgs& a) { return arg_combine_mode(a) == kModeRankMajor; }
__device__ __forceinline__ bool per_rank(const LLArgs& a) { return arg_combine_mode(a) != kModeDirectSend; }

// The row of recv_x (and of the expert outputs combine reads) that holds a
// selection of local expert l, from its entry of row_pos: expert-major, its
// place among that expert's R * T rows; rank-major, the token's slot itself.
__device__ __forceinline__ int64_t recv_row(const LLArgs& a, int l, int pos) {
    return rank_major(a) ? (int64_t)pos : (int64_t)l * a.ranks * a.tokens + pos;
}

// Slot (src, t) of this call's half of a dispatch area: [2, R, T] slots,
// the call's parity first (ll.cuh, call_parity).
__device__ __forceinline__ uint64_t slot_index(const LLArgs& a, int src, int t) {
    return ((uint64_t)call_parity(a.epoch) * a.ranks + src) * a.tokens + t;
}

__device__ __forceinline__ const uint8_t* dispatch_slot(const LLArgs& a, uint64_t base, int src, int t) {
    return at<const uint8_t>(base, a.off_dispatch_recv) + slot_index(a, src, t) * (uint64_t)message_bytes(a.topk, a.hidden);
}

// The per-expert counts of source src in this call's half of a counts
// area: [2, R, L] entries.
__device__ __forceinline__ uint64_t count_index(const LLArgs& a, int src) {
    return ((uint64_t)call_parity(a.epoch) * a.ranks + src) * a.local_experts;
}

// Header fields of a message at h.
__device__ __forceinline__ int* hdr_ids(int* h) { return h + 4; }
__device__ __forceinline__ float* hdr_w(int* h, int K) { return reinterpret_cast<float*>(h + 4 + K); }
__device__ __forceinline__ int* hdr_pos(int* h, int K) { return h + 4 + 2 * K; }
__device__ __forceinline__ const int* hdr_ids(const int* h) { return h + 4; }
__device__ __forceinline__ const float* hdr_w(const int* h, int K) { return reinterpret_cast<const float*>(h + 4 + K); }
__device__ __forceinline__ const int* hdr_pos(const int* h, int K) { return h + 4 + 2 * K; }

// A fenced dispatch message's header at slot: whether it is this call's, and
// for lane k < top-k the expert id and row of selection k (left as they are
// in the other lanes).
__device__ __forceinline__ bool fenced_header(const LLArgs& a, const uint8_t* slot, int* e, int* p) {
    const int* h = reinterpret_cast<const int*>(slot);
    const int lane = threadIdx.x % kWarp;
    const bool live = __ldcg(h) == a.epoch;
    if (lane < a.topk) {
        *e = __ldcg(hdr_ids(h) + lane);
        *p = __ldcg(hdr_pos(h, a.topk) + lane);
    }
    return live;
}

// --- inline protocol (ll.cuh) ---
// A unit is two 64-bit elements {d0 | flag << 32, d1 | flag << 32}, each
// stored and loaded in one piece.
__device__ __forceinline__ void unit_store(uint4* p, uint32_t d0, uint32_t d1, uint32_t flag) {
#if EPBENCH_BREAK == 3  // kBreakFlagFirst: the flags land before their data
    uint32_t* w = reinterpret_cast<uint32_t*>(p);
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(w + 1), "r"(flag) : "memory");
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(w + 3), "r"(flag) : "memory");
    __nanosleep(2000);
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(w), "r"(d0) : "memory");
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(w + 2), "r"(d1) : "memory");
#else
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"((uint64_t)flag << 32 | d0),
                 "l"((uint64_t)flag << 32 | d1)
                 : "memory");
#endif
}

// A unit as {d0, flag, d1, flag}.
__device__ __forceinline__ uint4 unit_load(const uint4* p) {
    uint64_t w0, w1;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(w0), "=l"(w1) : "l"(p) : "memory");
    return make_uint4((uint32_t)w0, (uint32_t)(w0 >> 32), (uint32_t)w1, (uint32_t)(w1 >> 32));
}

// Waits until unit p carries `flag` in both halves and returns its 8 data
// bytes in *d; bounded like wait_arrivals (false when it gave up).
__device__ inline bool unit_wait(const uint4* p, uint32_t flag, uint2* d, uint64_t deadline, int* err, int* active, int phase,
                                 int peer) {
    for (uint32_t spins = 1;; spins++) {
        const uint4 v = unit_load(p);
        if (v.y == flag && v.w == flag) {
            *d = make_uint2(v.x, v.z);
            return true;
        }
        if ((spins & 255) == 0 && bound_reached(deadline, err, active, phase, peer)) return false;
    }
}

// Settles the units at(i), i < N (null: none), whose first loads are in
// unit(i) (a reference): while any lacks the call's flag, reloads every one
// that does, all loads in flight together, so waiting units cost one round
// trip per poll instead of one each in turn. Bounded like unit_wait; on a
// timeout the peer of a waiting unit, peer_of(i), is recorded. The loops
// unroll, so unit(i) can name registers.
template <int N, typename Unit, typename At, typename PeerOf>
__device__ __forceinline__ bool units_settle(Unit unit, At at, uint32_t flag, uint64_t deadline, int* err, int* active, int phase,
                                             PeerOf peer_of) {
    auto waits = [&](int i) { return at(i) != nullptr && !(unit(i).y == flag && unit(i).w == flag); };
    for (uint32_t spins = 1;; spins++) {
        bool done = true;
#pragma unroll
        for (int i = 0; i < N; i++) {
            if (!waits(i)) continue;
            done = false;
            unit(i) = unit_load(at(i));
        }
        if (done) return true;
        if ((spins & 255) != 0) continue;
        int waiting = -1;
#pragma unroll
        for (int i = 0; i < N; i++)
            if (waiting < 0 && waits(i)) waiting = peer_of(i);
        if (waiting < 0) return true;
        if (bound_reached(deadline, err, active, phase, waiting)) return false;
    }
}

// A 16-byte vector as two units.
__device__ __forceinline__ void vec_store(uint4* p, uint4 v, uint32_t flag) {
    unit_store(p, v.x, v.y, flag);
    unit_store(p + 1, v.z, v.w, flag);
}


// --- lines protocol (ll.cuh) ---
__device__ __forceinline__ void line_store(uint4* p, uint64_t w0, uint64_t w1) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(w0), "l"(w1) : "memory");
}

// Stores part `part` (0..7) of a line; the 8 lanes of a line call it in one
// instruction.
__device__ __forceinline__ void line_part_store(uint4* p, int part, uint64_t w0, uint64_t w1) {
#if EPBENCH_BREAK == 3  // kBreakFlagFirst: the flag's part lands before the data
    if (part != 7) __nanosleep(2000);
#endif
    line_store(p, w0, w1);
}

__device__ __forceinline__ void line_load(const uint4* p, uint64_t* w0, uint64_t* w1) {
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*w0), "=l"(*w1) : "l"(p) : "memory");
}

// Lane l of a warp stands for part l % 8 (16 bytes) of line l / 8 of a group
// of four lines. Whether the lane's line carries `flag` (the flag is the
// second word of part 7); warp-collective.
__device__ __forceinline__ bool line_ready(uint64_t w1, uint64_t flag) {
    const int lane = threadIdx.x % kWarp;
    return __shfl_sync(0xffffffffu, (int)(w1 == flag), lane | 7) != 0;
}

// The first of the two data words of the lane's part of line `line` (part
// 7, the flag's, has none: -1).
__device__ __forceinline__ int line_word(int line) {
    const int part = threadIdx.x % 8;
    return part < 7 ? line * kLineWords + 2 * part : -1;
}

// Settles lines first .. first+3 of `lines` (the lane's part of line
// first + lane / 8; lines at or past `nlines` skipped), whose first load is
// in *w0, *w1: polls each until it carries `flag`. Bounded like unit_wait;
// warp-collective.
__device__ inline bool lines_settle(const uint4* lines, int first, int nlines, uint64_t flag, uint64_t* w0,
                                    uint64_t* w1, uint64_t deadline, int* err, int* active, int phase, int peer) {
    const int lane = threadIdx.x % kWarp;
    const int line = first + lane / 8;
    const bool mine = line < nlines;
    const uint4* p = lines + (int64_t)line * 8 + lane % 8;
    for (uint32_t spins = 1;; spins++) {
        const bool ready = line_ready(*w1, flag) || !mine;
        if (__all_sync(0xffffffffu, ready)) return true;
        if (!ready) line_load(p, w0, w1);
        if ((spins & 255) == 0 && __any_sync(0xffffffffu, bound_reached(deadline, err, active, phase, peer))) return false;
    }
}

// lines_settle with the first loads made here.
__device__ inline bool lines_wait(const uint4* lines, int first, int nlines, uint64_t flag, uint64_t* w0,
                                  uint64_t* w1, uint64_t deadline, int* err, int* active, int phase, int peer) {
    const int lane = threadIdx.x % kWarp;
    const int line = first + lane / 8;
    __syncwarp();  // the eight lanes of a line load it in one instruction
    if (line < nlines) line_load(lines + (int64_t)line * 8 + lane % 8, w0, w1);
    return lines_settle(lines, first, nlines, flag, w0, w1, deadline, err, active, phase, peer);
}

// Int i of a lines message header held, as words, by the warp's lanes
// (header line i / 30, part (i % 30) / 4, int (i % 30) % 4 of the part).
// Warp-collective: every lane must call it, each with its own i.
__device__ __forceinline__ int header_int(uint64_t w0, uint64_t w1, int i) {
    const int j = i % (2 * kLineWords);
    const int src = (i / (2 * kLineWords)) * 8 + j / 4;
    const uint32_t c0 = __shfl_sync(0xffffffffu, (uint32_t)w0, src);
    const uint32_t c1 = __shfl_sync(0xffffffffu, (uint32_t)(w0 >> 32), src);
    const uint32_t c2 = __shfl_sync(0xffffffffu, (uint32_t)w1, src);
    const uint32_t c3 = __shfl_sync(0xffffffffu, (uint32_t)(w1 >> 32), src);
    const int c = j % 4;
    return (int)(c == 0 ? c0 : c == 1 ? c1 : c == 2 ? c2 : c3);
}

__device__ __forceinline__ uint4* inline_slot(const LLArgs& a, uint64_t base, int src, int t) {
    return at<uint4>(base, a.off_inline_dispatch) + slot_index(a, src, t) * inline_slot_units(a.topk, a.hidden);
}

__device__ __forceinline__ uint64_t atom_add_acq_rel_gpu(uint64_t* p, uint64_t v) {
    uint64_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}

// Takes the calling block's ticket for this call from `tickets` (`blocks`
// tickets per call) and tells whether it was the call's last. Called by one
// warp after a __syncthreads that follows the block's stores; true in every
// lane of the warp that took the last ticket, which then has acquired every
// other block's stores (the ticket is an acquire-release at device scope,
// __syncwarp passes it on to the lanes). The last taker sets the counter back
// to 0 for the next call, which starts after this kernel has ended: so calls
// with different numbers of blocks (a sweep over token counts) follow each
// other.
__device__ __forceinline__ bool last_ticket(uint64_t* tickets, uint64_t blocks) {
    uint64_t t = 0;
    if (threadIdx.x % kWarp == 0) t = atom_add_acq_rel_gpu(tickets, 1);
    t = __shfl_sync(0xffffffffu, t, 0);
    __syncwarp();
    const bool last = t == blocks - 1;
    if (last && threadIdx.x % kWarp == 0) *reinterpret_cast<volatile uint64_t*>(tickets) = 0;
    return last;
}

// One system-scope release per peer, +1 on its arrival counter for this
// rank, made by the warp that took the call's last ticket: the one fence
// waits for every block's stores, earlier blocks do not fence at all (a
// system-scope fence waits for the NVLink stores to drain, and many of them
// at once slow the stream down). A peer reached through GIN gets a strong
// GIN signal add instead (ll_gin.cuh). Warp-uniform.
__device__ __forceinline__ void release_peers(const LLArgs& a, const uint64_t* bases, uint64_t off_signal) {
    for (int q = threadIdx.x % kWarp; q < a.ranks; q += kWarp) {
        if (q == a.rank || masked(a.active, q)) continue;
#if EPBENCH_GIN
        if (gin_peer(q)) {
            gin_signal(q, off_signal + (uint64_t)a.rank * sizeof(uint64_t));
            continue;
        }
#endif
#if EPBENCH_BREAK == 2  // kBreakNoFence: a relaxed add, no fence
        asm volatile("red.relaxed.sys.global.add.u64 [%0], 1;" ::"l"(at<uint64_t>(bases[q], off_signal) + a.rank) : "memory");
#else
        __threadfence_system();
        red_release_sys_add(at<uint64_t>(bases[q], off_signal) + a.rank, 1);
#endif
    }
}

// E4M3 of 8 channels of a group whose largest magnitude is amax (already
// at least 1e-4).
__device__ __forceinline__ uint2 e4m3x8(const float f[8], float amax) {
    const float inv = __fdiv_rn(448.f, amax);
    uint2 q;
    uint16_t* qp = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
    for (int j = 0; j < 4; j++) qp[j] = to_e4m3x2(__fmul_rn(f[2 * j], inv), __fmul_rn(f[2 * j + 1], inv));
    return q;
}

// The largest magnitude of the half-warp's 128 channels (8 per lane), at
// least 1e-4. All 16 lanes of the half-warp must call it.
__device__ __forceinline__ float group_amax(const float f[8], unsigned half) {
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(f[j]));
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(half, amax, o));
    return fmaxf(amax, 1e-4f);
}

// E4M3 of 8 channels (one lane of a half-warp owning 128 channels) and the
// half-warp's scale. All 16 lanes of the half-warp must call it.
__device__ __forceinline__ uint2 quantize8(const uint4 v, unsigned half, float* scale) {
    float f[8];
    unpack8(v, f);
    const float amax = group_amax(f, half);
    *scale = __fdiv_rn(amax, 448.f);
    return e4m3x8(f, amax);
}

// 8 channels of an expert output row as loaded: a bf16 vector, or for FP8
// dispatch 8 E4M3 bytes (in v.x, v.y) and their scale.
struct YRaw {
    uint4 v;
    float scale;
};

// Starts the loads of the vectors v[u] (-1: none) of expert output row `row`.
__device__ __forceinline__ void load_y(const LLArgs& a, int64_t row, const int v[kVecPerLane], YRaw r[kVecPerLane]) {
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        if (v[u] < 0) continue;
        if (!arg_fp8(a)) {
            r[u].v = __ldg(reinterpret_cast<const uint4*>(a.y + row * a.hidden) + v[u]);
        } else {
            const uint2 q =
                __ldg(reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(a.y) + row * a.hidden) + v[u]);
            r[u].v.x = q.x;
            r[u].v.y = q.y;
            r[u].scale = __ldg(a.recv_scales + row * (a.hidden / kScaleBlock) + v[u] * 8 / kScaleBlock);
        }
    }
}

// The fp32 values of a loaded vector: bf16 as is, FP8 as the identity
// expert's output bf16(q * scale).
__device__ __forceinline__ void decode_y(const LLArgs& a, const YRaw& r, float f[8]) {
    if (!arg_fp8(a)) unpack8(r.v, f);
    else dequant8(make_uint2(r.v.x, r.v.y), r.scale, f);
}

// Whether a dispatch of T tokens with signalling proto spreads its rows over
// the grid (the entry epbench_ll_dispatch_spread) rather than sending each
// token's row from the block that owns it (epbench_ll_dispatch): the inline
// protocol always (it takes fewer than kSpreadTokens tokens), the fenced one
// below kSpreadTokens tokens, lines never. kernels.Variant.Spreads mirrors it.
__device__ __forceinline__ bool spreads(int proto, int T) {
    return proto == kProtoInline || (proto == kProtoFenced && T < kSpreadTokens);
}

// Whether the call's arguments are the module's variant (ll.cuh) and, for a
// dispatch entry (spread: 0 or 1; -1 for combine), the entry's; if not,
// block 0 records kPhaseVariant in the error word and every block returns.
__device__ __forceinline__ bool variant_ok(const LLArgs& p, int spread) {
    bool ok = true;
#ifdef EPBENCH_DISPATCH_PROTO
    ok = (p.modes & kModesVariantMask) ==
         modes_word(EPBENCH_DISPATCH_PROTO, EPBENCH_COMBINE_PROTO, EPBENCH_FP8, EPBENCH_COMBINE_MODE);
#endif
    if (spread >= 0 && (spread != 0) != spreads(arg_dispatch_proto(p), p.own_tokens)) ok = false;
    if (!ok && blockIdx.x == 0 && threadIdx.x == 0) atomicCAS(p.err, 0, kPhaseVariant << 24);
    return ok;
}

// The arguments of this call: those passed, or with the device clock
// (ll.cuh, kClockWords) the epoch and expected arrivals its record holds,
// advanced for this call; thread 0 of block 0 writes the other kernel's
// record.
__device__ __forceinline__ LLArgs clocked(const LLArgs& p, bool dispatch) {
    LLArgs a = p;
    if (p.clock == nullptr) return a;
    const uint64_t* in = p.clock + (dispatch ? 0 : kClockCombine);
    const uint64_t epoch = __ldcg(in) + (dispatch ? 1 : 0);
    const uint64_t ed = __ldcg(in + 1) + (dispatch && arg_dispatch_proto(p) == kProtoFenced ? 1 : 0);
    const uint64_t ec = __ldcg(in + 2) + (!dispatch && arg_combine_proto(p) == kProtoFenced ? 1 : 0);
    a.epoch = (int32_t)epoch;
    a.expect = dispatch ? ed : ec;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t* out = p.clock + (dispatch ? kClockCombine : 0);
        out[0] = epoch;
        out[1] = ed;
        out[2] = ec;
    }
    return a;
}

// With --jitter-us (a.jitter_ns > 0) every block waits, when it starts, a
// delay of 0 .. jitter_ns drawn from the rank, the call and the kernel, so
// ranks drift apart even when the host runs ahead of the GPU (testing).
__device__ __forceinline__ void jitter(const LLArgs& a, bool dispatch) {
    if (a.jitter_ns == 0) return;
    uint64_t h = ((uint64_t)(uint32_t)a.epoch << 32 | (uint32_t)a.rank << 1 | (dispatch ? 1u : 0u)) + 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    const uint64_t until = global_timer() + h % (a.jitter_ns + 1);
    while (global_timer() < until) {
    }
}

}  // namespace

// The dispatch entries (ll_dispatch.cuh). A variant's module has those it
// can launch (kernels.Variant.Entries): an inline dispatch always spreads, a
// lines one never.
static_assert(kProtoInline == 1 && kProtoLines == 2, "the #if lines below spell the kProto* values");
#if !defined(EPBENCH_DISPATCH_PROTO) || EPBENCH_DISPATCH_PROTO != 1
#define EPBENCH_DISPATCH_ENTRY epbench_ll_dispatch
#define EPBENCH_SPREAD 0
#include "ll_dispatch.cuh"
#undef EPBENCH_DISPATCH_ENTRY
#undef EPBENCH_SPREAD
#endif
#if !defined(EPBENCH_DISPATCH_PROTO) || EPBENCH_DISPATCH_PROTO != 2
#define EPBENCH_DISPATCH_ENTRY epbench_ll_dispatch_spread
#define EPBENCH_SPREAD 1
#include "ll_dispatch.cuh"
#undef EPBENCH_DISPATCH_ENTRY
#undef EPBENCH_SPREAD
#endif

namespace {

constexpr int kLinesPerItem = 4 * kVecPerLane;  // lines protocol: row lines per combine work item

// The first line of the lane's group of four in part u of combine work item
// `slice` (lines protocol), and the lane's line (part lane % 8 of it).
__device__ __forceinline__ int item_group(int slice, int u) { return slice * kLinesPerItem + 4 * u; }
__device__ __forceinline__ int item_line(int slice, int u) {
    return item_group(slice, u) + (int)(threadIdx.x % kWarp) / 8;
}

// The vectors (16 bytes, 8 channels) of a row that the lane handles in
// combine work item `slice` of a row, -1 for none: vectors slice *
// kSliceVecs + lane + 32u, or with the lines protocol those of item_line
// (part 7 carries the flag).
__device__ __forceinline__ void item_vecs(int slice, bool lines, int vec_per_row, int nlines, int v[kVecPerLane]) {
    const int lane = threadIdx.x % kWarp;
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        int x = slice * kSliceVecs + u * kWarp + lane;
        if (lines) {
            const int line = item_line(slice, u), part = lane % 8;
            x = line < nlines && part < 7 ? line * 7 + part : -1;
        }
        v[u] = x < vec_per_row ? x : -1;
    }
}

// Stores the lane's part of line `line` of the row of lines at `row` (lines
// at or past `nlines` skipped): the 16 data bytes d, or for part 7 the flag.
// The 8 lanes of a line store it in one instruction.
__device__ __forceinline__ void line_put(uint4* row, int line, int nlines, uint4 d, uint32_t flag) {
    if (line >= nlines) return;
    const int part = (int)(threadIdx.x % 8);
    const bool fl = part == 7;
    line_part_store(row + line * 8 + part, part, fl ? 0 : (uint64_t)d.y << 32 | d.x,
                    fl ? (uint64_t)flag : (uint64_t)d.w << 32 | d.z);
}

// The row loads of for_local_rows and for_local_rows_rolling. kRowPtr (a
// bf16 dispatch): the lane of each selection forms its row's address once
// (row_ptr), and a row's loads take it by two shuffles instead of each lane
// multiplying out the row's offset.
template <bool kRowPtr>
__device__ __forceinline__ const uint4* row_ptr(const LLArgs& a, int64_t my_row) {
    return kRowPtr ? reinterpret_cast<const uint4*>(a.y + (my_row < 0 ? 0 : my_row) * a.hidden) : nullptr;
}

// Starts the loads of the lane's vectors v of selection k's row into raw
// (lane k holds its row my_row, and with kRowPtr its address my_ptr).
// Warp-uniform.
template <bool kRowPtr>
__device__ __forceinline__ void start_row(const LLArgs& a, int k, int64_t my_row, const uint4* my_ptr,
                                          const int v[kVecPerLane], YRaw raw[kVecPerLane]) {
    if (kRowPtr && !arg_fp8(a)) {
        const uint4* const p = reinterpret_cast<const uint4*>(
            __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(my_ptr), k));
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
            if (v[u] >= 0) raw[u].v = __ldg(p + v[u]);
    } else {
        load_y(a, __shfl_sync(0xffffffffu, my_row, k), v, raw);
    }
}

// Calls use(k, w, raw) for each of the warp's local selections in `local`
// (bit k: lane k holds the selection's expert output row my_row and its
// weight my_w) in top-k order, kBatch rows' loads in flight at a time, raw
// holding the lane's vectors v of the row. Warp-uniform.
template <bool kRowPtr = false, typename F>
__device__ __forceinline__ void for_local_rows(const LLArgs& a, unsigned local, int64_t my_row, float my_w,
                                               const int v[kVecPerLane], F use) {
    const uint4* const my_ptr = row_ptr<kRowPtr>(a, my_row);
    for (unsigned m = local; m;) {
        YRaw raw[kBatch][kVecPerLane];
        float wb[kBatch];
        int kb[kBatch];
        int nb = 0;
#pragma unroll
        for (int b = 0; b < kBatch; b++) {
            if (m == 0) break;
            const int k = __ffs(m) - 1;
            m &= m - 1;
            kb[b] = k;
            wb[b] = __shfl_sync(0xffffffffu, my_w, k);
            start_row<kRowPtr>(a, k, my_row, my_ptr, v, raw[b]);
            nb = b + 1;
        }
#pragma unroll
        for (int b = 0; b < kBatch; b++) {
            if (b >= nb) break;
            use(kb[b], wb[b], raw[b]);
        }
    }
}

// Whether the lines combine's own partial is summed by
// for_local_rows_rolling: only in a module of the lines combine, the one
// that runs that path. Elsewhere the path is dead code, but instantiating
// it there still moved the other modules' register allocation.
#if !defined(EPBENCH_COMBINE_PROTO) || EPBENCH_COMBINE_PROTO == 2
constexpr bool kRollOwnRows = true;
#else
constexpr bool kRollOwnRows = false;
#endif

// for_local_rows with each of the kBatch slots taking the next row as soon
// as its own is used: the next rows' loads start while the other slots'
// rows are added, not once the whole batch is (the lines combine's own
// partial, kernels v51 in docs/PERF.md). Warp-uniform.
template <bool kRowPtr = false, typename F>
__device__ __forceinline__ void for_local_rows_rolling(const LLArgs& a, unsigned local, int64_t my_row, float my_w,
                                                       const int v[kVecPerLane], F use) {
    const uint4* const my_ptr = row_ptr<kRowPtr>(a, my_row);
    YRaw raw[kBatch][kVecPerLane];
    float wb[kBatch];
    int kb[kBatch];
    unsigned m = local;
    auto take = [&](int b) {  // the next selection's row into slot b
        const int k = __ffs(m) - 1;
        m &= m - 1;
        kb[b] = k;
        wb[b] = __shfl_sync(0xffffffffu, my_w, k);
        start_row<kRowPtr>(a, k, my_row, my_ptr, v, raw[b]);
    };
    // Slots 0 .. nb-1 hold rows in top-k order (refilled in slot order).
    int nb = 0;
#pragma unroll
    for (int b = 0; b < kBatch; b++) {
        if (m == 0) break;
        take(b);
        nb = b + 1;
    }
    while (nb > 0) {
        int refilled = 0;
#pragma unroll
        for (int b = 0; b < kBatch; b++) {
            if (b >= nb) break;
            use(kb[b], wb[b], raw[b]);
            if (m != 0) {
                take(b);
                refilled = b + 1;
            }
        }
        nb = refilled;
    }
}

// The lowest rank above prev that holds one of the token's selections (lane
// k: the rank of selection k, UINT_MAX for none), UINT_MAX when there is
// none: rank_local_reduce's terms, in the order they are added.
// Warp-collective.
__device__ __forceinline__ unsigned next_rank(unsigned my_rank, int prev) {
    return __reduce_min_sync(0xffffffffu, (int)my_rank > prev && my_rank != UINT_MAX ? my_rank : UINT_MAX);
}

// direct_send: of the own rank's selections (bits of own; lane k holds
// selection k's expert e, -1 for none), those before every other rank's in
// top-k order: the first terms of the source side's sum, which an inline
// combine's worker warp adds up and hands over. Warp-collective.
__device__ __forceinline__ unsigned own_prefix(unsigned own, int e) {
    const unsigned others = __ballot_sync(0xffffffffu, e >= 0) & ~own;
    return others != 0 ? own & ((others & (0u - others)) - 1) : own;
}

// Whether this rank's partial is a token's whole sum (rank_local_reduce and
// rank-major): the token has a selection, and every one is on this rank, of
// experts [lo, hi) (lane k holds selection k's expert, -1 for none and for
// k >= K). Read from
// the routing alone, never from the -T mask, which a warp that gives up on a
// peer changes during the launch: the worker and source warps of an item
// must decide alike. (A token with a masked peer's selection is left to the
// hand-over, where that peer's term counts as zero.) Warp-collective.
__device__ __forceinline__ bool only_own_term(int e, int lo, int hi) {
    return __ballot_sync(0xffffffffu, e >= 0) != 0 && __ballot_sync(0xffffffffu, e >= 0 && (e < lo || e >= hi)) == 0;
}

// The output of a token whose only term is this rank's fp32 partial p
// (only_own_term), as the source side adds the ranks' bf16 partials from
// zero: bf16(0 + bf16(p)). Adding to +0 changes one bf16 value, -0, which
// becomes +0 (bf16(p) is -0 where a tiny negative sum rounds to it, or, in
// rank-major, where the row itself holds -0); so each half that is -0 is
// cleared instead. A NaN stays a NaN (its bits may differ from the sum's).
__device__ __forceinline__ uint4 own_only_out(const float p[8]) {
    uint4 d = pack8(p);
    uint32_t* w = reinterpret_cast<uint32_t*>(&d);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        // bit 15 (31) set where the lower (upper) half's magnitude is not 0;
        // a half's magnitude plus 0x7fff never carries into the next.
        const uint32_t nonzero = (w[i] & 0x7fff7fffu) + 0x7fff7fffu;
        w[i] &= nonzero | 0x7fff7fffu;
    }
    return d;
}

// acc += w * the decoded vectors in raw (the fp32 steps of the CPU reference).
__device__ __forceinline__ void add_weighted(const LLArgs& a, float acc[kVecPerLane][8], float w,
                                             const YRaw raw[kVecPerLane]) {
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        float f[8];
        decode_y(a, raw[u], f);
#pragma unroll
        for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], w, f[j]);
    }
}

// Rank-major: the partial of a slot is its row (every local selection of
// the token, bit k of `local`, names the slot in my_row), in a validated
// pair (kFlagPrescale) scaled by the sum of the local selections' weights
// (fp32, top-k order), each channel fp32(y * sum): what the CPU reference
// computes (cpuref, rankMajorRow). Warp-uniform.
__device__ __forceinline__ void slot_partial(const LLArgs& a, unsigned local, int64_t my_row, float my_w,
                                             const int v[kVecPerLane], float acc[kVecPerLane][8]) {
    const int64_t row = __shfl_sync(0xffffffffu, my_row, __ffs(local) - 1);
    float sum = 0.f;
    for (unsigned m = local; m; m &= m - 1) sum = __fadd_rn(sum, __shfl_sync(0xffffffffu, my_w, __ffs(m) - 1));
    YRaw raw[kVecPerLane];
    load_y(a, row, v, raw);
    const bool scale = (arg_flags(a) & kFlagPrescale) != 0;
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        float f[8];
        decode_y(a, raw[u], f);
#pragma unroll
        for (int j = 0; j < 8; j++) acc[u][j] = scale ? __fmul_rn(f[j], sum) : f[j];
    }
}

// rank_local_reduce and rank-major: acc = the fp32 partial of the local
// selections (bit k of `local`: lane k holds the selection's row my_row and
// weight my_w) over the lane's vectors v, as the CPU reference sums it;
// zero without any. Warp-uniform.
template <bool kRowPtr = false>
__device__ __forceinline__ void local_partial(const LLArgs& a, unsigned local, int64_t my_row, float my_w,
                                              const int v[kVecPerLane], float acc[kVecPerLane][8]) {
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
    if (rank_major(a)) {
        if (local != 0) slot_partial(a, local, my_row, my_w, v, acc);
        return;
    }
    if constexpr (kRowPtr && kRollOwnRows)
        for_local_rows_rolling<true>(a, local, my_row, my_w, v,
                                     [&](int, float w, const YRaw* raw) { add_weighted(a, acc, w, raw); });
    else
        for_local_rows<kRowPtr>(a, local, my_row, my_w, v,
                                [&](int, float w, const YRaw* raw) { add_weighted(a, acc, w, raw); });
}

// Expert side of combine for one work item: row slice `slice` of the slot
// (source rank s, token t). It either sends the bf16 partial of the local
// experts the token selected (rank_local_reduce) or every such expert row
// (direct_send) to the source's combine receive area. With `hand` (inline,
// the own rank's item) it hands part of the item to the source side's warp
// of the same block in shared memory instead, the lane's vectors at hand[0],
// hand[1], ...: rank_local_reduce and rank-major, the partial (bf16, one
// vector each), or, where it is the token's whole sum (only_own_term), the
// output itself, written here; direct_send, the fp32 sum of the own
// selections that come before any other rank's in top-k order (own_prefix),
// two vectors each, the rest of its rows sent as usual. Warp-uniform.
__device__ __forceinline__ void combine_item(const LLArgs& a, uint64_t self, int s, int t, int slice,
                                             uint4* hand = nullptr) {
    const int T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int vec_per_row = H / 8, nl = lines_row_lines(H, false);
    const int lane = threadIdx.x % kWarp;
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)a.ranks * T;
    const uint64_t peer = a.peers[s];
    const uint64_t dst_base = at<uint8_t>(peer, a.off_combine_recv) - (uint8_t*)0;
    uint4* const idst = at<uint4>(peer, a.off_inline_combine);  // inline: rows of inline_row_units; lines: of nl lines
    const bool inl = arg_combine_proto(a) == kProtoInline, lines = arg_combine_proto(a) == kProtoLines;
    const uint32_t flag = (uint32_t)a.epoch;
    if (t >= tokens_from(a, s) || masked_warp(a, s)) return;  // no such token, or a masked source (-T)
    // The routing of (s, t) (the message header, or for the own rank's
    // tokens, never sent to itself, its own topk_idx and weights) and the
    // rows dispatch gave the selections, all loaded in one round trip.
    int e = -1, pos = 0;
    float we = 0.f;
    bool live = true;
    if (direct_self(a, s)) {  // inline: the own rank's tokens, never sent to itself
        if (lane < K) {
            // own_selection written out: calling it here moved an
            // instruction in the inline modules' PTX.
            e = expert_or_none(a.topk_idx[(int64_t)t * K + lane], a.ranks * L);
            we = a.topk_w[(int64_t)t * K + lane];
        }
    } else if (arg_dispatch_proto(a) == kProtoLines) {
        // Lines: dispatch is over, so every line of this call is in place.
        const uint4* h = inline_slot(a, self, s, t);
        uint64_t w0 = 0, w1 = 0;
        if (lane < 8 * lines_header_lines(K)) line_load(h + lane, &w0, &w1);
        const bool fresh = __shfl_sync(0xffffffffu, (int)(w1 == (uint64_t)flag), 7) != 0;  // line 0's flag
        live = fresh && header_int(w0, w1, 0) == 1;
        const int k = lane < K ? lane : 0;
        const int id = header_int(w0, w1, 2 + k);
        const int wbits = header_int(w0, w1, 2 + K + k);
        if (lane < K) {
            e = id;
            we = __int_as_float(wbits);
        }
    } else if (arg_dispatch_proto(a) == kProtoFenced) {
        const int* h = reinterpret_cast<const int*>(dispatch_slot(a, self, s, t));
        live = __ldcg(h) == a.epoch;
        if (lane < K) {
            e = __ldcg(hdr_ids(h) + lane);
            we = __ldcg(hdr_w(h, K) + lane);
        }
    } else {
        // Inline: dispatch is over, so every unit of this call is in place.
        const uint4* h = inline_slot(a, self, s, t);
        const uint4 u0 = unit_load(h);
        live = u0.y == flag && u0.x == 1;
        if (lane < K) {
            e = (int)unit_load(h + 1 + lane).x;
            we = __uint_as_float(unit_load(h + 1 + K + lane).x);
        }
    }
    if (lane < K) pos = __ldcg(a.row_pos + ((int64_t)s * T + t) * K + lane);
    if (!live) return;
    // Local selections in top-k order: lane k holds its expert output row
    // (rank-major: the token's slot) and weight.
    int64_t my_row = -1;
    float my_w = 0.f;
    if (e >= lo && e < hi) {
        my_row = rank_major(a) ? pos : (int64_t)(e - lo) * rows_per_expert + pos;
        my_w = we;
    }
    const unsigned local = __ballot_sync(0xffffffffu, my_row >= 0);
    if (local == 0) return;
    int v[kVecPerLane];
    item_vecs(slice, lines, vec_per_row, nl, v);
    float acc[kVecPerLane][8];
    // direct_send with hand: the selections summed here, into acc.
    const unsigned summed = !per_rank(a) && hand != nullptr ? own_prefix(local, e) : 0u;
    if (!per_rank(a)) {
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
    }
    if (per_rank(a)) local_partial(a, local, my_row, my_w, v, acc);
    else for_local_rows(a, local, my_row, my_w, v, [&](int k, float w, const YRaw* raw) {
        if (summed >> k & 1) {  // as the source side adds a row that came back (bf16: decode_y rounds FP8 to it)
            add_weighted(a, acc, w, raw);
            return;
        }
        // direct_send: every other expert row travels back as bf16.
        const uint64_t row = (uint64_t)t * K + k;
        uint4* to = reinterpret_cast<uint4*>(dst_base + row * (uint64_t)H * 2);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++) {
            uint4 out = raw[u].v;
            if (arg_fp8(a) && v[u] >= 0) {
                float f[8];
                decode_y(a, raw[u], f);
                out = pack8(f);
            }
            if (lines) {
                line_put(idst + row * nl * 8, item_line(slice, u), nl, out, flag);
                continue;
            }
            if (v[u] < 0) continue;
            if (inl) vec_store(idst + row * inline_row_units(H) + 2 * v[u], out, flag);
            else to[v[u]] = out;
        }
    });
    if (!per_rank(a)) {
        if (summed != 0) {
#pragma unroll
            for (int u = 0; u < kVecPerLane; u++) {
                hand[2 * u] = make_uint4(__float_as_uint(acc[u][0]), __float_as_uint(acc[u][1]),
                                                 __float_as_uint(acc[u][2]), __float_as_uint(acc[u][3]));
                hand[2 * u + 1] = make_uint4(__float_as_uint(acc[u][4]), __float_as_uint(acc[u][5]),
                                                       __float_as_uint(acc[u][6]), __float_as_uint(acc[u][7]));
            }
        }
        return;
    }
    // A handed-over item whose token's only term is this partial: the sum
    // is written here, as the source warp would add it (0 + the bf16
    // partial), and nothing is handed over; the source warp decides the
    // same from the same routing and skips the item.
    if (hand != nullptr && only_own_term(e, lo, hi)) {
        uint4* out = reinterpret_cast<uint4*>(a.out + (int64_t)t * H);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
            if (v[u] >= 0) out[v[u]] = own_only_out(acc[u]);
        return;
    }
    const uint64_t row = (uint64_t)a.rank * T + t;
    uint4* to = reinterpret_cast<uint4*>(dst_base + row * (uint64_t)H * 2);
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        const uint4 d = pack8(acc[u]);
        if (hand != nullptr) {
            hand[u] = d;
        } else if (lines) {
            line_put(idst + row * nl * 8, item_line(slice, u), nl, d, flag);
        } else if (v[u] >= 0) {
            if (inl) vec_store(idst + row * inline_row_units(H) + 2 * v[u], d, flag);
            else to[v[u]] = d;
        }
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) epbench_ll_combine(const LLArgs args) {
    if (!variant_ok(args, -1)) return;
    // Inline, the worker warps' own items read y soon after the entry, and
    // its constant line (0x280, the first past the fields read here) is
    // fetched by an indexed load issued now, whose miss then overlaps the
    // entry's own instead of following them (docs/PERF.md, kernels v54).
    // The lines and fenced combines first read y after the routing, where
    // the same load measured slower: they read it where it is used.
    uint64_t y = reinterpret_cast<uint64_t>(args.y);
    if (arg_combine_proto(args) == kProtoInline) {
        const uint64_t off = offsetof(LLArgs, y) + 8 * (uint64_t)((uint32_t)args.modes >> kModesZeroShift);
        asm("{\n\t.reg .u64 %%b;\n\tmov.u64 %%b, epbench_ll_combine_param_0;\n\tadd.u64 %%b, %%b, %1;\n\t"
            "ld.param.u64 %0, [%%b];\n\t}"
            : "=l"(y)
            : "l"(off));
    }
    LLArgs a = clocked(args, false);
    a.y = reinterpret_cast<const __nv_bfloat16*>(y);
    jitter(a, false);
    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int own_n = a.own_tokens;  // this rank's tokens: the source side's
    const int vec_per_row = H / 8, nl = lines_row_lines(H, false);
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)R * T;
    const uint64_t self = a.peers[a.rank];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const bool inl = arg_combine_proto(a) == kProtoInline, lines = arg_combine_proto(a) == kProtoLines;
    // Warps are numbered across the blocks first (warp w of the grid is warp
    // w / grid of block w % grid), so a small operation's items land on as
    // many SMs as there are items: one SM stores only ~20 GB/s over NVLink.
    // The grid is read from the argument block, not from gridDim, whose
    // constant line (the driver's) was one more serial miss on the path to
    // the first item (docs/PERF.md, kernels v53); the dispatch, which gained
    // nothing from it, keeps gridDim.
    const int gwarp = warp * a.grid + blockIdx.x;
    const int nwarps = a.grid * kWarps;

    // --- expert side: one warp per received (peer, token, row slice),
    // sources from rank+1 on; fenced, the last block releases the peers.
    // The own rank's tokens: fenced and lines, the source side reads their
    // own-rank part itself; inline, the worker warps of the same block
    // compute it (an item's expert and source sides share its block, as
    // both number items across the blocks first: the first item of source
    // warps 0..kWarps-2 is handed over in shared memory, its partial or the
    // sum of its first own rows, the rest written as a peer's partial or
    // rows are) and the source side
    // waits for it: at the few tokens where inline is used (auto: up to
    // 32 KB of rows, plan.go; two tokens at hidden 7168) the source side's path is then
    // split over two warps, which measured faster than running it in one
    // (docs/PERF.md, kernels v25 and v26). No block waits for another block
    // of its own grid ---
    const int slices = lines ? (nl + kLinesPerItem - 1) / kLinesPerItem : (vec_per_row + kSliceVecs - 1) / kSliceVecs;
    const int peer_items = (R - 1) * T * slices;
    // The source side's items: with the lines protocol, a row slice of lines
    // as a peer sends them (item_vecs: 7 of every 8 lanes hold a vector);
    // at one rank, where nothing arrives in lines, a plain slice (every lane,
    // whole aligned lines of the rows read).
    const bool line_items = lines && R > 1;
    const int src_slices = lines && !line_items ? (vec_per_row + kSliceVecs - 1) / kSliceVecs : slices;
    // Blocks with items take a ticket for the peers' release; block 0 takes
    // one even without items (a rank without peers' tokens still releases).
    const uint64_t peer_blocks = max(1, min(a.grid, peer_items));
    const bool peer_worked = blockIdx.x < peer_blocks;
    uint64_t* const signal = at<uint64_t>(self, a.off_combine_signal);
    __shared__ int failed;  // fenced: a wait for a peer gave up
    if (!inl && !lines && threadIdx.x == 0) failed = 0;
    // Inline: the own rank's part of the first item of source warp w
    // (0..kWarps-2), computed by worker warp w + 1 of the same block (the
    // first own item of that warp is the same item), handed over here
    // instead of through memory (rank_local_reduce and rank-major: its
    // partial, unless that is the token's whole sum, which the worker
    // writes to the output itself; direct_send: the sum of its own_prefix
    // rows; combine_item); hand_ready[w] says it is in place. A direct_send sum (fp32) takes
    // twice the room of a partial.
    __shared__ uint4 hand_part[kWarps - 1][kWarp][kHandVecs];
    __shared__ int hand_ready[kWarps - 1];
    const bool handing = inl;
    const int hand_items = a.grid * (kWarps - 1);  // items [0, hand_items) hand their own part over
    if (handing && threadIdx.x < kWarps - 1) hand_ready[threadIdx.x] = 0;
    for (int item = gwarp; item < peer_items; item += nwarps) {
        int st, slice;
        item_split(item, slices, st, slice);
        int ord, t;
        item_split(st, T, ord, t);
        combine_item(a, self, (a.rank + 1 + ord) % R, t, slice);
    }
    if (!lines) {
        __syncthreads();
        EPBENCH_TRACE(a, 1);
        if (warp == 0 && !inl && peer_worked && last_ticket(signal + R, peer_blocks)) {
#if EPBENCH_GIN
            // GIN peers (ll_gin.cuh): the partials of their tokens, rows
            // rank * T + t of their combine area, from the mirrors in one put
            // per peer, posted by the lane that signals that peer below.
            bool put = false;
            for (int s = lane; s < R; s += kWarp) {
                if (direct_self(a, s) || masked(a.active, s) || !gin_peer(s)) continue;
                gin_put(s, a.off_combine_recv + (uint64_t)a.rank * T * H * 2, (uint64_t)tokens_from(a, s) * H * 2);
                put = true;
            }
#endif
            release_peers(a, a.peers, a.off_combine_signal);
#if EPBENCH_GIN
            if (put) gin_flush();  // the next calls write the mirrors again
#endif
            EPBENCH_TRACE(a, 2);
        }
        if (inl && warp > 0) {
            const int nw = a.grid * (kWarps - 1);
            for (int item = (warp - 1) * a.grid + blockIdx.x; item < own_n * slices; item += nw) {
                const bool hand = handing && item < hand_items;  // the warp's first item
                int t, slice;
                item_split(item, slices, t, slice);
                combine_item(a, self, a.rank, t, slice, hand ? hand_part[warp - 1][lane] : nullptr);
                if (hand) {
                    __syncwarp();
                    __threadfence_block();
                    if (lane == 0) *(volatile int*)&hand_ready[warp - 1] = 1;
                }
            }
            // No barrier here: the source side takes the worker warps'
            // parts through hand_ready and the flags, not through a wait
            // for all of them.
            EPBENCH_TRACE_BY(a, 3, kWarp);  // warp 1's own parts done
        }
    } else {
        EPBENCH_TRACE_BY(a, 1, 0);
    }

    // --- source side: wait for every peer (fenced), then one warp per
    // (token, row slice). Fenced, warp 0 took the block's ticket (and the
    // last block's warp 0 made the releases): it waits for the peers by
    // itself and takes the source side's last items, while warp 1 waits for
    // the others, so no warp waits for the ticket ---
    const int sgwarp = (inl || lines ? warp : (warp + kWarps - 1) % kWarps) * a.grid + blockIdx.x;
    // The routing of each warp's first token, with the rows dispatch gave
    // its selections on this rank, is loaded before the wait. Inline and
    // lines, where no wait follows, check its expert id where the item
    // starts (first_id), so that no instruction waits for the loads before
    // then; fenced, here (first_e).
    int64_t first_id = -1;
    int first_e = -1, first_pos = 0;
    float first_w = 0.f;
    int first_t = 0, first_slice = 0;  // lanes below K: the first item's token and slice
    if (sgwarp < own_n * src_slices && lane < K) {
        int t, slice;
        item_split(sgwarp, src_slices, t, slice);
        first_t = t, first_slice = slice;
        if (inl || lines) {
            first_id = a.topk_idx[(int64_t)t * K + lane];
            first_w = a.topk_w[(int64_t)t * K + lane];
        } else {
            own_selection(a, t, lane, K, R, L, &first_e, &first_w);
        }
        if (!inl) first_pos = __ldcg(a.row_pos + ((int64_t)a.rank * T + t) * K + lane);
    }
    if (!inl && !lines) {
        bool ok = true;
        for (int q = lane; warp <= 1 && q < R; q += kWarp) {
            const uint64_t* arrived = at<const uint64_t>(self, a.off_combine_signal);
            if (q != a.rank && !wait_arrivals(arrived + q, a.expect, deadline, a.err, a.active, kPhaseCombine, q) &&
                !masked(a.active, q))  // -T: a masked rank's partials are left out
                ok = false;
        }
        if (warp == 0) {
            if (__any_sync(0xffffffffu, !ok)) return;
            __syncwarp();  // each lane acquired its peers' counters: order them before every lane's reads of partials
        } else {
            if (warp == 1 && __any_sync(0xffffffffu, !ok) && lane == 0) failed = 1;
            workers_sync();
            if (failed) return;
            EPBENCH_TRACE_BY(a, 4, kWarp);
        }
    }
    const uint8_t* recv = at<const uint8_t>(self, a.off_combine_recv);
    const uint4* irecv = at<const uint4>(self, a.off_inline_combine);
    const uint32_t flag = (uint32_t)a.epoch;
    // A work item's token's routing and the lane's vectors of it. Lane k
    // holds selection k's expert and weight and, unless inline (whose own
    // rows the expert side reads), the selection's row among its expert's
    // rows if it is on this rank; all in one round trip, the warp's first
    // item's loaded before the wait.
    // item_vecs: with the lines protocol, the lines of a slice as a peer
    // sends them, or plain slices at one rank (line_items, src_slices).
    auto item_start = [&](int item, int t, int slice, int* e, float* wk, int* pos, int v[kVecPerLane]) {
        *e = inl || lines ? expert_or_none(first_id, R * L) : first_e;
        *wk = first_w;
        *pos = first_pos;
        if (item != sgwarp && lane < K) {
            own_selection(a, t, lane, K, R, L, e, wk);
            if (!inl) *pos = __ldcg(a.row_pos + ((int64_t)a.rank * T + t) * K + lane);
        }
        item_vecs(slice, line_items, vec_per_row, nl, v);
    };
    // The lane's own-rank row of a selection (rank-major: the token's slot),
    // -1 for a selection elsewhere.
    auto own_row = [&](int e, int pos) -> int64_t {
        if (e < lo || e >= hi) return -1;
        return rank_major(a) ? pos : (int64_t)(e - lo) * rows_per_expert + pos;
    };
    // The item's output vectors, vector u being out(u).
    auto item_put = [&](int item, int t, const int v[kVecPerLane], auto out) {
        if (item == sgwarp) EPBENCH_TRACE_BY(a, 6, inl || lines ? 0 : kWarp);  // the block's source-side warp 0
        uint4* to = reinterpret_cast<uint4*>(a.out + (int64_t)t * H);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
            if (v[u] >= 0) to[v[u]] = out(u);
    };
    auto item_store = [&](int item, int t, const int v[kVecPerLane], const float acc[kVecPerLane][8]) {
        item_put(item, t, v, [&](int u) { return pack8(acc[u]); });
    };
    // Lines (rank_local_reduce): the own rank's partial is computed here from
    // its expert outputs, rounded to bf16 as a peer's is, while the peers'
    // lines land; then the ranks' partials are added in rank order, each
    // peer's lines polled until they carry the call's flag.
    const bool lines_rlr = lines && per_rank(a), lines_direct = lines && !per_rank(a);
    for (int item = sgwarp; lines_rlr && item < own_n * src_slices; item += nwarps) {
        int t, slice;
        if (item == sgwarp) {  // split above, by lane 0 among others
            t = __shfl_sync(0xffffffffu, first_t, 0);
            slice = __shfl_sync(0xffffffffu, first_slice, 0);
        } else {
            item_split(item, src_slices, t, slice);
        }
        int e, pos, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, &e, &wk, &pos, v);
        const int64_t my_row = own_row(e, pos);
        float own[kVecPerLane][8];
        local_partial<true>(a, __ballot_sync(0xffffffffu, my_row >= 0), my_row, wk, v, own);
        // A token whose every selection is on this rank (at one rank, every
        // token; only_own_term): its sum is the own partial alone, added as
        // below (own_only_out), with no rank order to find and no peer to
        // wait for.
        if (only_own_term(e, lo, hi)) {
            item_put(item, t, v, [&](int u) { return own_only_out(own[u]); });
            continue;
        }
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++) {
            unpack8(pack8(own[u]), own[u]);
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        }
        // -T: a masked rank's partial is left out.
        const unsigned my_rank = e >= 0 && !masked(a.active, e / L) ? (unsigned)(e / L) : UINT_MAX;
        for (int prev = -1;;) {
            const unsigned q = next_rank(my_rank, prev);
            if (q == UINT_MAX) break;
            prev = (int)q;
            if ((int)q == a.rank) {
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[u][j] = __fadd_rn(acc[u][j], own[u][j]);
                continue;
            }
            const uint4* lfrom = irecv + ((uint64_t)q * T + t) * nl * 8;
#pragma unroll
            for (int u = 0; u < kVecPerLane; u++) {
                const int first = item_group(slice, u);
                if (first >= nl) break;
                uint64_t w0 = 0, w1 = 0;
                if (!lines_wait(lfrom, first, nl, (uint64_t)flag, &w0, &w1, deadline, a.err, a.active, kPhaseCombine,
                                (int)q)) {
                    if (masked_warp(a, (int)q)) break;  // -T: given up on
                    return;                             // in every lane together
                }
                float f[8];
                unpack8(make_uint4((uint32_t)w0, (uint32_t)(w0 >> 32), (uint32_t)w1, (uint32_t)(w1 >> 32)), f);
#pragma unroll
                for (int j = 0; j < 8; j++) acc[u][j] = __fadd_rn(acc[u][j], f[j]);
            }
        }
        item_store(item, t, v, acc);
    }
    // Lines (direct_send): every selection's row, added in top-k order, kBatch
    // rows' loads in flight at a time: the own rank's expert outputs read here
    // (rounded to bf16 as a sent row is), the peers' rows polled in lines
    // until they carry the call's flag.
    for (int item = sgwarp; lines_direct && item < own_n * src_slices; item += nwarps) {
        int t, slice;
        item_split(item, src_slices, t, slice);
        int e, pos, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, &e, &wk, &pos, v);
        const int64_t my_row = own_row(e, pos);
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        for (unsigned left = __ballot_sync(0xffffffffu, e >= 0 && !masked(a.active, e / L)); left;) {
            YRaw raw[kBatch][kVecPerLane];
            int kb[kBatch];
            bool peer[kBatch];
            int nb = 0;
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (left == 0) break;
                const int k = __ffs(left) - 1;
                left &= left - 1;
                kb[b] = k;
                const int64_t r = __shfl_sync(0xffffffffu, my_row, k);
                peer[b] = r < 0;
                nb = b + 1;
                if (!peer[b]) {
                    load_y(a, r, v, raw[b]);
                    continue;
                }
                const uint4* lfrom = irecv + ((uint64_t)t * K + k) * nl * 8;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    const int line = item_line(slice, u);
                    if (line >= nl) continue;
                    uint64_t w0, w1;
                    line_load(lfrom + line * 8 + lane % 8, &w0, &w1);
                    raw[b][u].v = make_uint4((uint32_t)w0, (uint32_t)(w0 >> 32), (uint32_t)w1, (uint32_t)(w1 >> 32));
                }
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (b >= nb) break;
                if (!peer[b]) continue;
                const uint4* lfrom = irecv + ((uint64_t)t * K + kb[b]) * nl * 8;
                const int q = __shfl_sync(0xffffffffu, e, kb[b]) / L;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    const int first = item_group(slice, u);
                    if (first >= nl) break;
                    uint64_t w0 = (uint64_t)raw[b][u].v.y << 32 | raw[b][u].v.x;
                    uint64_t w1 = (uint64_t)raw[b][u].v.w << 32 | raw[b][u].v.z;
                    if (!lines_settle(lfrom, first, nl, (uint64_t)flag, &w0, &w1, deadline, a.err, a.active,
                                      kPhaseCombine, q)) {
                        if (!masked_warp(a, q)) return;  // in every lane together
                        w0 = w1 = 0;                     // -T: given up on, left out
                    }
                    raw[b][u].v = make_uint4((uint32_t)w0, (uint32_t)(w0 >> 32), (uint32_t)w1, (uint32_t)(w1 >> 32));
                }
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (b >= nb) break;
                const float w = __shfl_sync(0xffffffffu, wk, kb[b]);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    float f[8];
                    if (peer[b]) {
                        unpack8(raw[b][u].v, f);
                    } else {
                        decode_y(a, raw[b][u], f);
                        unpack8(pack8(f), f);
                    }
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], w, f[j]);
                }
            }
        }
        item_store(item, t, v, acc);
    }
    // Waits until this warp's worker says its part is in hand_part (bounded
    // all the same, never masked: the worker waits for nothing); false at
    // the bound.
    auto handed = [&]() {
        for (uint32_t spins = 1; *(volatile int*)&hand_ready[warp] == 0; spins++)
            if ((spins & 255) == 0 && bound_reached(deadline, a.err, nullptr, kPhaseCombine, a.rank)) return false;
        __threadfence_block();
        return true;
    };
    for (int item = sgwarp; !lines && item < own_n * slices; item += nwarps) {
        int t, slice;
        item_split(item, slices, t, slice);
        int e, pos, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, &e, &wk, &pos, v);
        // The terms of the sum, in the order they are added, taken one at a
        // time (warp-uniform): rank_local_reduce: the ranks holding at least
        // one of the token's selections, ascending, each peer (inline: each
        // rank) having sent one partial row; direct_send: the selections in
        // top-k order, each peer's (inline: each one but the handed-over
        // ones below) sent as a row. Fenced, the own rank's terms are read
        // here: its partial, computed first and rounded to bf16 as a peer's
        // is, or its expert output rows. Inline, a warp's first item's own
        // partial, or the sum of its own_prefix rows (the sum's first terms),
        // comes through shared memory (hand_part) from the worker warp that
        // computed it.
        // -T: the selections and partials of masked ranks are left out.
        const int64_t my_row = own_row(e, pos);
        uint4 ownp[kVecPerLane];
        if (!inl && per_rank(a)) {
            const unsigned local = __ballot_sync(0xffffffffu, my_row >= 0);
            if (local != 0) {
                float p[kVecPerLane][8];
                local_partial(a, local, my_row, wk, v, p);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) ownp[u] = pack8(p[u]);
            }
        }
        const bool sel = e >= 0 && !masked(a.active, e / L);
        const unsigned valid = __ballot_sync(0xffffffffu, sel);
        const unsigned my_rank = sel ? (unsigned)(e / L) : UINT_MAX;
        // A handed-over item whose token's only term is this rank's partial
        // (only_own_term): its worker warp writes the output (combine_item).
        if (per_rank(a) && handing && item < hand_items && only_own_term(e, lo, hi)) continue;
        int prev = -1;          // rank_local_reduce: the last rank taken
        unsigned left = valid;  // direct_send: the selections not taken yet
        auto next_term = [&](int* row, int* rank, float* w) {
            if (per_rank(a)) {
                const unsigned q = next_rank(my_rank, prev);
                if (q == UINT_MAX) return false;
                prev = (int)q;
                *row = (int)q * T + t;
                *rank = (int)q;
                *w = 1.f;
                return true;
            }
            if (left == 0) return false;
            const int k = __ffs(left) - 1;
            left &= left - 1;
            *row = t * K + k;
            *rank = __shfl_sync(0xffffffffu, e, k) / L;
            *w = __shfl_sync(0xffffffffu, wk, k);
            return true;
        };
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        if (!per_rank(a) && handing && item < hand_items) {
            const unsigned summed = own_prefix(__ballot_sync(0xffffffffu, my_row >= 0), e);
            if (summed != 0) {
                // The sum, once its worker warp says so.
                if (__any_sync(0xffffffffu, !handed())) return;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    const uint4 x = hand_part[warp][lane][2 * u], y = hand_part[warp][lane][2 * u + 1];
                    acc[u][0] = __uint_as_float(x.x), acc[u][1] = __uint_as_float(x.y);
                    acc[u][2] = __uint_as_float(x.z), acc[u][3] = __uint_as_float(x.w);
                    acc[u][4] = __uint_as_float(y.x), acc[u][5] = __uint_as_float(y.y);
                    acc[u][6] = __uint_as_float(y.z), acc[u][7] = __uint_as_float(y.w);
                }
                left &= ~summed;
            }
        }
        // Batches until one comes short of kBatch terms (the last; nothing
        // carried from one batch to the next but the sum and next_term's
        // state: a flag carried across kept a stack slot, its reload waited
        // on at the top of every batch).
        for (;;) {
            uint4 in[kBatch][kVecPerLane], ihi[kBatch][kVecPerLane];
            // Zeroed: where they live in local memory, the reads the loops
            // below make at b >= nb then find what this launch wrote.
            int rowb[kBatch] = {}, rankb[kBatch] = {};
            float wb[kBatch] = {};
            // Bit b of ownm: in[b] holds the term's data (fenced: the own
            // rank's, read here; inline: handed over); of handm: inline, the
            // term is the own rank's partial, handed over by a worker warp
            // (hand_part). Masks, not arrays of bool: those were kept in
            // local memory and read at b >= nb too, where nothing wrote
            // them, each such read a miss in the middle of the item.
            unsigned ownm = 0, handm = 0;
            int nb = 0;
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (!next_term(&rowb[b], &rankb[b], &wb[b])) break;
                nb = b + 1;
                if (!inl && rankb[b] == a.rank) ownm |= 1u << b;
                if (handing && per_rank(a) && item < hand_items && rankb[b] == a.rank) handm |= 1u << b;
                if (handm >> b & 1) continue;  // settled below
                if ((ownm >> b & 1) && per_rank(a)) {
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++) in[b][u] = ownp[u];
                    continue;
                }
                if (ownm >> b & 1) {  // direct_send: selection rowb[b] - t * K's row (FP8: E4M3 in x, y; its scale in z)
                    YRaw raw[kVecPerLane];
                    load_y(a, __shfl_sync(0xffffffffu, my_row, rowb[b] - t * K), v, raw);
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++)
                        in[b][u] = arg_fp8(a) ? make_uint4(raw[u].v.x, raw[u].v.y, __float_as_uint(raw[u].scale), 0) : raw[u].v;
                    continue;
                }
                const uint4* from = reinterpret_cast<const uint4*>(recv + (uint64_t)rowb[b] * H * 2);
                const uint4* ifrom = irecv + (uint64_t)rowb[b] * inline_row_units(H);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    if (v[u] < 0) continue;
                    if (!inl) {
                        in[b][u] = __ldcg(from + v[u]);
                    } else {  // first loads: the halves of the vector, settled below
                        in[b][u] = unit_load(ifrom + 2 * v[u]);
                        ihi[b][u] = unit_load(ifrom + 2 * v[u] + 1);
                    }
                }
            }
            if (inl) {
                bool ok = true;
                // Every unit of the batch that lacks the flag reloaded, all
                // together, until none does (one round trip per poll); then
                // the handed-over partial, once its worker warp says so. A
                // batch whose only term is that partial (a token whose other
                // ranks are masked or come in another batch) jumps over the
                // poll's code; so does a direct_send
                // batch without terms (all handed over, or none left).
                bool units = !per_rank(a) && nb > 0;
#pragma unroll
                for (int b = 0; b < kBatch; b++) units |= b < nb && !((ownm | handm) >> b & 1);
                for (uint32_t spins = 1; units; spins++) {
                    bool done = true;
                    int waiting = 0;
#pragma unroll
                    for (int b = 0; b < kBatch; b++) {
#pragma unroll
                        for (int u = 0; u < kVecPerLane; u++) {
                            if (b >= nb || v[u] < 0 || ((ownm | handm) >> b & 1)) continue;
                            const uint4* q = irecv + (uint64_t)rowb[b] * inline_row_units(H) + 2 * v[u];
                            const bool lo_w = !(in[b][u].y == flag && in[b][u].w == flag);
                            const bool hi_w = !(ihi[b][u].y == flag && ihi[b][u].w == flag);
                            if (lo_w) in[b][u] = unit_load(q);
                            if (hi_w) ihi[b][u] = unit_load(q + 1);
                            if (lo_w || hi_w) {
                                done = false;
                                waiting = rankb[b];
                            }
                        }
                    }
                    if (done) break;
                    // The own rank's units (items past the hand-over, and
                    // direct_send's own rows after another rank's) are
                    // never masked: its worker warps wait for nothing.
                    if ((spins & 255) == 0 &&
                        bound_reached(deadline, a.err, waiting == a.rank ? nullptr : a.active, kPhaseCombine, waiting)) {
                        if (!masked(a.active, waiting)) {
                            ok = false;
                            break;
                        }
                        // -T: the terms of masked ranks are left out (zero, in place).
#pragma unroll
                        for (int b = 0; b < kBatch; b++)
#pragma unroll
                            for (int u = 0; u < kVecPerLane; u++)
                                if (b < nb && v[u] >= 0 && !(ownm >> b & 1) && masked(a.active, rankb[b]))
                                    in[b][u] = ihi[b][u] = make_uint4(0, flag, 0, flag);
                    }
                }
                // The own partial handed over by its worker warp.
#pragma unroll
                for (int b = 0; b < kBatch; b++) {
                    if (!(ok && b < nb && (handm >> b & 1))) continue;
                    if (!handed()) {
                        ok = false;
                        break;
                    }
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++) in[b][u] = hand_part[warp][lane][u];
                    ownm |= 1u << b;
                }
                if (__any_sync(0xffffffffu, !ok)) return;
#pragma unroll
                for (int b = 0; b < kBatch; b++)
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++)
                        if (!(b < nb && (ownm >> b & 1))) in[b][u] = make_uint4(in[b][u].x, in[b][u].z, ihi[b][u].x, ihi[b][u].z);
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (b >= nb) break;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    float f[8];
                    // An own expert row of an FP8 dispatch decodes as the
                    // bf16 row a peer's expert side sends (combine_item).
                    if (!per_rank(a) && arg_fp8(a) && (ownm >> b & 1))
                        dequant8(make_uint2(in[b][u].x, in[b][u].y), __uint_as_float(in[b][u].z), f);
                    else
                        unpack8(in[b][u], f);
                    if (per_rank(a)) {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = __fadd_rn(acc[u][j], f[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], wb[b], f[j]);
                    }
                }
            }
            if (nb < kBatch) break;
        }
        item_store(item, t, v, acc);
    }
    EPBENCH_TRACE(a, 5);
}
