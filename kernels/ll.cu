// Low-latency dispatch and combine, one kernel launch each (docs/DESIGN.md).
//
// Dispatch: the rank's tokens are cut into contiguous ranges, one per
// sending block. Every block counts each expert's selections over the whole
// topk_idx (a few kilobytes, so no grid-wide step is needed), which tells the
// sending block the row each of its selections takes inside its expert's
// rows from this rank (tokens ascending). It sends each token, one message
// per (token, destination peer), the row first and then a header with the
// routing and those rows. Once its stores are issued the block takes its
// ticket, and its worker warps write the own rank's rows while the peers'
// data is on its way; after the peers' release they copy the messages the
// block owns (one per source token) to the rows their headers name, so the
// receive side scans nothing; the last block also writes the layout.
//
// Combine: the expert side walks the received (source, token) slots, cut
// into row slices so every warp of the grid has work, peers first, and
// either reduces its local experts' weighted rows into one bf16 partial
// (rank_local_reduce) or sends every expert row back (direct_send); the own
// rank's slots follow on the worker warps. The source side waits for every
// rank and reduces per token. In the lines protocol (rank_local_reduce) the
// partials travel as flagged lines that the source side polls, and the own
// rank's partial is computed by the source side itself while they land.
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
// protocols, dtype and combine mode fixed.
#include <limits.h>

#include "ll.cuh"

using namespace epbench;

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarp;
constexpr int kWorkers = kThreads - kWarp;  // threads of warps 1.. (warp 0 makes the releases)
constexpr int kVecPerLane = 2;              // 16-byte vectors per lane in a combine work item
constexpr int kBatch = 4;                   // rows whose loads are in flight together in combine
constexpr int kSliceVecs = kWarp * kVecPerLane;  // a row is cut into slices of this many vectors
constexpr int kSpreadTokens = 16;          // below: dispatch rows leave from many SMs (see the send pass)
constexpr int kMaxVecPerThread = 4;       // 16-byte vectors of a row per thread (hidden <= 16384)
constexpr int kMaxRecvVecPerThread = (16384 / 8 + kThreads - kWarp - 1) / (kThreads - kWarp);  // of a received row, per worker

// Barrier of the worker warps (1..kWarps-1) only: warp 0 may be waiting in
// its release fence meanwhile.
__device__ __forceinline__ void workers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kWorkers) : "memory"); }

// The tokens of this rank that block b sends: [t0, t1), contiguous ranges
// over min(grid, T) blocks (empty for the others).
__device__ __forceinline__ void token_range(int T, int& t0, int& t1) {
    const int ns = min((int)gridDim.x, T);
    const int b = blockIdx.x;
    t0 = b < ns ? (int)((int64_t)b * T / ns) : T;
    t1 = b < ns ? (int)((int64_t)(b + 1) * T / ns) : T;
}

// Own-rank tokens are never sent to the own rank: the sending block writes
// their rows into the own expert rows directly.
__device__ __forceinline__ bool direct_self(const LLArgs& a, int s) { return s == a.rank; }

__device__ __forceinline__ const uint8_t* dispatch_slot(const LLArgs& a, uint64_t base, int src, int t) {
    return at<const uint8_t>(base, a.off_dispatch_recv) +
           ((uint64_t)src * a.tokens + t) * (uint64_t)message_bytes(a.topk, a.hidden);
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
__device__ __forceinline__ void unit_store(uint4* p, uint32_t d0, uint32_t d1, uint32_t flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
                 : "memory");
}

__device__ __forceinline__ uint4 unit_load(const uint4* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

// Waits until unit p carries `flag` in both halves and returns its 8 data
// bytes in *d; bounded like wait_arrivals (false when it gave up).
__device__ inline bool unit_wait(const uint4* p, uint32_t flag, uint2* d, uint64_t deadline, int* err, int phase,
                                 int peer) {
    for (uint32_t spins = 1;; spins++) {
        const uint4 v = unit_load(p);
        if (v.y == flag && v.w == flag) {
            *d = make_uint2(v.x, v.z);
            return true;
        }
        if ((spins & 255) == 0 && bound_reached(deadline, err, phase, peer)) return false;
    }
}

// Settles the units at(i), i < N (null: none), whose first loads are in
// unit(i) (a reference): while any lacks the call's flag, reloads every one
// that does, all loads in flight together, so waiting units cost one round
// trip per poll instead of one each in turn. Bounded like unit_wait; on a
// timeout the peer of a waiting unit, peer_of(i), is recorded. The loops
// unroll, so unit(i) can name registers.
template <int N, typename Unit, typename At, typename PeerOf>
__device__ __forceinline__ bool units_settle(Unit unit, At at, uint32_t flag, uint64_t deadline, int* err, int phase,
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
        if (bound_reached(deadline, err, phase, waiting)) return false;
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
                                    uint64_t* w1, uint64_t deadline, int* err, int phase, int peer) {
    const int lane = threadIdx.x % kWarp;
    const int line = first + lane / 8;
    const bool mine = line < nlines;
    const uint4* p = lines + (int64_t)line * 8 + lane % 8;
    for (uint32_t spins = 1;; spins++) {
        const bool ready = line_ready(*w1, flag) || !mine;
        if (__all_sync(0xffffffffu, ready)) return true;
        if (!ready) line_load(p, w0, w1);
        if ((spins & 255) == 0 && __any_sync(0xffffffffu, bound_reached(deadline, err, phase, peer))) return false;
    }
}

// lines_settle with the first loads made here.
__device__ inline bool lines_wait(const uint4* lines, int first, int nlines, uint64_t flag, uint64_t* w0,
                                  uint64_t* w1, uint64_t deadline, int* err, int phase, int peer) {
    const int lane = threadIdx.x % kWarp;
    const int line = first + lane / 8;
    if (line < nlines) line_load(lines + (int64_t)line * 8 + lane % 8, w0, w1);
    return lines_settle(lines, first, nlines, flag, w0, w1, deadline, err, phase, peer);
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
    return at<uint4>(base, a.off_inline_dispatch) + ((uint64_t)src * a.tokens + t) * inline_slot_units(a.topk, a.hidden);
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
// at once slow the stream down). Warp-uniform.
__device__ __forceinline__ void release_peers(const LLArgs& a, const uint64_t* bases, uint64_t off_signal) {
    for (int q = threadIdx.x % kWarp; q < a.ranks; q += kWarp) {
        if (q == a.rank) continue;
        __threadfence_system();
        red_release_sys_add(at<uint64_t>(bases[q], off_signal) + a.rank, 1);
    }
}

__device__ __forceinline__ void red_release_gpu_add(uint64_t* p, uint64_t v) {
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
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
        if (!a.fp8) {
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
    if (!a.fp8) unpack8(r.v, f);
    else dequant8(make_uint2(r.v.x, r.v.y), r.scale, f);
}

// The arguments of this call: those passed, or with the device clock
// (ll.cuh, kClockWords) the epoch and expected arrivals its record holds,
// advanced for this call; thread 0 of block 0 writes the other kernel's
// record.
// Whether the call's arguments are the module's variant (ll.cuh); if not,
// block 0 records kPhaseVariant in the error word and every block returns.
__device__ __forceinline__ bool variant_ok(const LLArgs& p) {
#ifdef EPBENCH_DISPATCH_PROTO
    if (p.inline_proto != EPBENCH_DISPATCH_PROTO || p.combine_proto != EPBENCH_COMBINE_PROTO || p.fp8 != EPBENCH_FP8 ||
        p.combine_mode != EPBENCH_COMBINE_MODE) {
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicCAS(p.err, 0, kPhaseVariant << 24);
        return false;
    }
#endif
    return true;
}

__device__ __forceinline__ LLArgs clocked(const LLArgs& p, bool dispatch) {
    LLArgs a = p;
#ifdef EPBENCH_DISPATCH_PROTO
    a.inline_proto = EPBENCH_DISPATCH_PROTO;
    a.combine_proto = EPBENCH_COMBINE_PROTO;
    a.fp8 = EPBENCH_FP8;
    a.combine_mode = EPBENCH_COMBINE_MODE;
#endif
    if (p.clock == nullptr) return a;
    const uint64_t* in = p.clock + (dispatch ? 0 : kClockCombine);
    const uint64_t epoch = __ldcg(in) + (dispatch ? 1 : 0);
    const uint64_t ed = __ldcg(in + 1) + (dispatch && p.inline_proto == kProtoFenced ? 1 : 0);
    const uint64_t ec = __ldcg(in + 2) + (!dispatch && p.combine_proto == kProtoFenced ? 1 : 0);
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

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) epbench_ll_dispatch(const LLArgs args) {
    if (!variant_ok(args)) return;
    const LLArgs a = clocked(args, true);
    // Dynamic shared memory: two int arrays of E entries (DispatchSharedBytes).
    extern __shared__ int dyn[];
    __shared__ int dests[kMaxTopK];      // the current token's destination peers
    __shared__ int64_t own_rows[kMaxTopK];  // its own-rank rows (expert-major row index)
    __shared__ int ndest, nown;
    __shared__ uint64_t peer_base[kMaxRanks];
    __shared__ int64_t rows[kMaxTopK];  // rows of the message being received
    __shared__ int nrows;
    __shared__ int waited_upto;  // sources of order 1..waited_upto-1 have arrived
    __shared__ int failed;
    __shared__ float gamax[16384 / kScaleBlock];  // lines, FP8: each channel group's largest magnitude
    __shared__ int lhdr[2 + 3 * kMaxTopK];        // lines: the header being sent
    // Spread (fewer than kSpreadTokens tokens, so T * K <= kWorkers): every
    // selection's expert, and its row among that expert's rows from here.
    __shared__ int sel_e[kWorkers], sel_p[kWorkers];

    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts, E = R * L;
    int* const before = dyn;     // selections of each expert by this rank's tokens before the current one
    int* const total = dyn + E;  // selections of each expert by all this rank's tokens
    const int vec_per_row = H / 8;  // uint4 = 8 bf16
    const int hdr = header_bytes(K), msg = message_bytes(K, H);
    const int rb = row_bytes(H, a.fp8), groups = H / kScaleBlock;
    const uint64_t self = a.peers[a.rank];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)R * T;
    uint8_t* const recv = reinterpret_cast<uint8_t*>(a.recv_x);
    int t0, t1;
    token_range(T, t0, t1);

    // The block's first token row is loaded along with the routing below:
    // thread i holds vectors i, i + kThreads, ... of the row.
    // Lane k of warp 0 holds the token's k-th expert id.
    uint4 xv[kMaxVecPerThread];
    int64_t tok_e = -1;
    auto load_x = [&](int t) {
        const uint4* src = reinterpret_cast<const uint4*>(a.x + (int64_t)t * H);
#pragma unroll
        for (int i = 0; i < kMaxVecPerThread; i++) {
            const int v = threadIdx.x + i * kThreads;
            if (v < vec_per_row) xv[i] = __ldg(src + v);
        }
        if (threadIdx.x < K) tok_e = __ldg(a.topk_idx + (int64_t)t * K + threadIdx.x);
    };
    // For fewer than kSpreadTokens tokens the rows leave from many SMs (see
    // the send pass), so the block holds no row. The inline protocol always
    // spreads: it is used for fewer tokens only (config.InlineMaxTokens).
    const bool inl = a.inline_proto == kProtoInline, lines = a.inline_proto == kProtoLines;
    const bool spread = inl || (T < kSpreadTokens && !lines);
    if (t0 < t1 && !spread) load_x(t0);
    for (int q = threadIdx.x; q < R; q += kThreads) peer_base[q] = a.peers[q];

    // Destinations of a token (warp 0, lane k holding its k-th expert): the
    // distinct peers, each named by the lowest lane that selects it, into
    // dests/ndest. Returns the lane's rank (-1 for none).
    auto find_dests = [&](int64_t e) {
        const int q = e >= 0 && e < E ? (int)(e / L) : -1;
        const unsigned same = __match_any_sync(0xffffffffu, q);
        const bool lead = q >= 0 && !direct_self(a, q) && (__ffs(same) - 1) == lane;
        const unsigned leads = __ballot_sync(0xffffffffu, lead);
        if (lead) dests[__popc(leads & ((1u << lane) - 1u))] = q;
        if (lane == 0) ndest = __popc(leads);
        return q;
    };
    auto slot_at = [&](int q, int t) {
        return at<uint8_t>(peer_base[q], a.off_dispatch_recv) + ((uint64_t)a.rank * T + t) * (uint64_t)msg;
    };
    const uint32_t flag = (uint32_t)a.epoch;
    const uint64_t flag64 = flag;  // lines
    const int p0 = inline_payload_unit(K);  // inline: the row's first unit in a slot
    auto islot_at = [&](int q, int t) { return inline_slot(a, peer_base[q], a.rank, t); };
    const int sub = threadIdx.x % 16;                               // FP8: lane in its half-warp
    const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;  // FP8: the half-warp

    // The counters are zeroed while the first round of topk_idx is loaded.
    const int n_ids = T * K, nb = t0 * K;
    int64_t ids[4];
    auto load4 = [&](int i0) {
#pragma unroll
        for (int u = 0; u < 4; u++) ids[u] = i0 + u * kThreads < n_ids ? __ldg(a.topk_idx + i0 + u * kThreads) : -1;
    };
    auto count4 = [&](int i0) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (ids[u] < 0 || ids[u] >= E) continue;
            atomicAdd(&total[ids[u]], 1);
            if (i0 + u * kThreads < nb) atomicAdd(&before[ids[u]], 1);
        }
    };
    load4(threadIdx.x);
    for (int e = threadIdx.x; e < 2 * E; e += kThreads) dyn[e] = 0;
    if (threadIdx.x == 0) {
        failed = 0;
        waited_upto = 1;
    }
    __syncthreads();

    // --- the rows to the peers first: they need only the destinations, and
    // stream over NVLink while the blocks count. One SM stores only ~20 GB/s
    // over NVLink, so for fewer than kSpreadTokens tokens the rows are spread
    // over the grid 16 vectors (one FP8 scale group) at a time (group c of all
    // tokens' rows goes to block c % grid); otherwise each block sends its own
    // tokens from the registers that already hold them ---
    const int row_groups = vec_per_row / 16, all_groups = T * row_groups;
    const int stored_blocks = min((int)gridDim.x, spread ? all_groups : T);  // blocks that store (and take a ticket)
    for (int c = (threadIdx.x / 16) * gridDim.x + blockIdx.x; spread && c < all_groups; c += (kThreads / 16) * gridDim.x) {
        const int t = c / row_groups, v = (c % row_groups) * 16 + sub;
        const uint4 val = __ldg(reinterpret_cast<const uint4*>(a.x + (int64_t)t * H) + v);
        // The token's destination peers, each once: a bit per rank.
        uint64_t seen[kMaxRanks / 64] = {};
        for (int k = 0; k < K; k++) {
            const int64_t e = __ldg(a.topk_idx + (int64_t)t * K + k);
            if (e >= 0 && e < E) {
                const int q = (int)(e / L);
                seen[q / 64] |= 1ull << (q % 64);
            }
        }
        seen[a.rank / 64] &= ~(1ull << (a.rank % 64));
        uint2 q8;
        float scale = 0.f;
        if (a.fp8) q8 = quantize8(val, half, &scale);
        for (int w = 0; w < (R + 63) / 64; w++) {
            for (uint64_t m = seen[w]; m; m &= m - 1) {
                const int q = w * 64 + __ffsll((long long)m) - 1;
                if (!a.fp8) {
                    if (inl) vec_store(islot_at(q, t) + p0 + 2 * v, val, flag);
                    else reinterpret_cast<uint4*>(slot_at(q, t) + hdr)[v] = val;
                } else if (inl) {
                    uint4* m8 = islot_at(q, t) + p0;
                    unit_store(m8 + v, q8.x, q8.y, flag);
                    if (sub == 0) unit_store(m8 + H / 8 + v / 16, __float_as_uint(scale), 0, flag);
                } else {
                    uint8_t* m8 = slot_at(q, t) + hdr;
                    reinterpret_cast<uint2*>(m8)[v] = q8;
                    if (sub == 0) reinterpret_cast<float*>(m8 + H)[v / 16] = scale;
                }
            }
        }
    }
    const int nhl = lines_header_lines(K), nrl = lines_row_lines(H, a.fp8);
    for (int t = t0; !spread && !lines && t < t1; t++) {
        if (warp == 0) find_dests(tok_e);
        __syncthreads();
        const int nd = ndest;
#pragma unroll
        for (int u = 0; u < kMaxVecPerThread; u++) {
            const int v = threadIdx.x + u * kThreads;
            if (v >= vec_per_row) break;
            uint2 q8;
            float scale = 0.f;
            if (a.fp8) q8 = quantize8(xv[u], half, &scale);  // a half-warp holds 128 channels
            for (int i = 0; i < nd; i++) {  // fenced
                if (!a.fp8) {
                    reinterpret_cast<uint4*>(slot_at(dests[i], t) + hdr)[v] = xv[u];
                } else {
                    uint8_t* m8 = slot_at(dests[i], t) + hdr;
                    reinterpret_cast<uint2*>(m8)[v] = q8;
                    if (sub == 0) reinterpret_cast<float*>(m8 + H)[v / 16] = scale;
                }
            }
        }
        __syncthreads();  // dests is rewritten for the next token
        if (t + 1 < t1) load_x(t + 1);
    }
    EPBENCH_TRACE(a, 5);

    // --- count every expert's selections (every block counts all of
    // topk_idx, so no grid-wide step is needed) ---
    count4(threadIdx.x);
    if (spread && threadIdx.x < n_ids) sel_e[threadIdx.x] = (int)ids[0];
    for (int i0 = threadIdx.x + 4 * kThreads; i0 < n_ids; i0 += 4 * kThreads) {
        load4(i0);
        count4(i0);
    }
    __syncthreads();
    // Every peer learns how many rows each of its experts gets from here.
    if (blockIdx.x == 0) {
        for (int q = 0; q < R; q++) {
            if (direct_self(a, q)) continue;
            int* c = at<int>(peer_base[q], a.off_dispatch_counts) + (int64_t)a.rank * L;
            uint4* ic = at<uint4>(peer_base[q], a.off_inline_counts) + (int64_t)a.rank * L;
            for (int l = threadIdx.x; l < L; l += kThreads) {
                if (inl || lines) unit_store(ic + l, total[q * L + l], 0, flag);
                else c[l] = total[q * L + l];
            }
        }
    }

    // --- the headers (warp 0), with the row of every selection in its
    // expert's rows from here (tokens in order) ---
    auto headers_of = [&](int t) {
        // Experts within a token are distinct, so the lanes of one token
        // never share a counter.
        int64_t e = -1;
        float w = 0.f;
        if (lane < K) {
            e = __ldg(a.topk_idx + (int64_t)t * K + lane);
            w = __ldg(a.topk_w + (int64_t)t * K + lane);
        }
        const int q = find_dests(e);
        int p = 0;
        if (q >= 0) {
            p = before[e];
            before[e] = p + 1;
        }
        if (q >= 0 && direct_self(a, q)) {
            a.src_info[(e - lo) * rows_per_expert + p] = t;
            a.row_pos[((int64_t)a.rank * T + t) * K + lane] = p;
        }
        __syncwarp();
        if (lines) {
            // The header to every peer; `present` tells whether the row comes.
            if (lane < K) {
                lhdr[2 + lane] = (int)e;
                lhdr[2 + K + lane] = __float_as_int(w);
                lhdr[2 + 2 * K + lane] = p;
            }
            if (lane == 0) lhdr[1] = t;
            __syncwarp();
            const int ln = lane / 8, part = lane % 8;
            for (int r = 0; r < R; r++) {
                if (direct_self(a, r)) continue;
                bool sent = false;
                for (int i = 0; i < ndest; i++) sent |= dests[i] == r;
                if (ln >= nhl) continue;
                uint32_t c[4] = {};
#pragma unroll
                for (int j = 0; j < 4 && part < 7; j++) {
                    const int i = ln * 2 * kLineWords + 4 * part + j;
                    c[j] = i == 0 ? (sent ? 1u : 0u) : i < 2 + 3 * K ? (uint32_t)lhdr[i] : 0u;
                }
                line_store(islot_at(r, t) + ln * 8 + part, (uint64_t)c[1] << 32 | c[0],
                           part == 7 ? flag64 : (uint64_t)c[3] << 32 | c[2]);
            }
            __syncwarp();  // lhdr is rewritten for the next token
        }
        for (int i = 0; i < ndest && !lines; i++) {
            if (inl) {
                uint4* m = islot_at(dests[i], t);
                if (lane < K) {
                    unit_store(m + 1 + lane, (uint32_t)e, p, flag);
                    unit_store(m + 1 + K + lane, __float_as_uint(w), 0, flag);
                }
                continue;
            }
            int* mh = reinterpret_cast<int*>(slot_at(dests[i], t));
            if (lane == 0) {
                mh[0] = a.epoch;
                mh[1] = t;
            }
            if (lane < K) {
                hdr_ids(mh)[lane] = (int)e;
                hdr_w(mh, K)[lane] = w;
                hdr_pos(mh, K)[lane] = p;
            }
        }
        // Inline: every peer learns whether the token comes to it.
        for (int r = lane; inl && r < R; r += kWarp) {
            if (direct_self(a, r)) continue;
            bool sent = false;
            for (int i = 0; i < ndest; i++) sent |= dests[i] == r;
            unit_store(islot_at(r, t), sent ? 1u : 0u, 0, flag);
        }
        __syncwarp();  // dests is rewritten for the next token
    };
    if (warp == 0 && !lines)
        for (int t = t0; t < t1; t++) headers_of(t);
    // Spread: the workers write the own rank's rows meanwhile, spread like
    // the sends (group c of the rows by block c % grid, from the L1 that
    // holds it), at rows counted here: a selection's row among its expert's
    // rows from this rank is the number of earlier tokens that select it.
    if (spread && warp > 0) {
        const int i = threadIdx.x - kWarp;
        if (i < n_ids) {
            const int e = sel_e[i];
            int p = 0;
            for (int j = 0; j < i / K * K; j++) p += sel_e[j] == e;
            sel_p[i] = p;
        }
        workers_sync();
        for (int c = (i / 16) * gridDim.x + blockIdx.x; c < all_groups; c += (kWorkers / 16) * gridDim.x) {
            const int t = c / row_groups, v = (c % row_groups) * 16 + sub;
            const uint4 val = __ldg(reinterpret_cast<const uint4*>(a.x + (int64_t)t * H) + v);
            uint2 q8;
            float scale = 0.f;
            if (a.fp8) q8 = quantize8(val, half, &scale);  // the half-warp holds the group
            for (int k = 0; k < K; k++) {
                const int e = sel_e[t * K + k];
                if (e < lo || e >= hi) continue;
                const int64_t row = (int64_t)(e - lo) * rows_per_expert + sel_p[t * K + k];
                if (!a.fp8) {
                    reinterpret_cast<uint4*>(recv + row * rb)[v] = val;
                } else {
                    reinterpret_cast<uint2*>(recv + row * rb)[v] = q8;
                    if (sub == 0) a.recv_scales[row * groups + v / 16] = scale;
                }
            }
        }
        EPBENCH_TRACE_BY(a, 6, kWarp);
    }
    // Lines: each token's header goes first, so the receiver knows where its
    // rows go while they stream in.
    for (int t = t0; lines && t < t1; t++) {
        if (warp == 0) headers_of(t);
        if (a.fp8) {
#pragma unroll
            for (int u = 0; u < kMaxVecPerThread; u++) {
                const int v = threadIdx.x + u * kThreads;
                if (v >= vec_per_row) break;  // half-warp uniform: 16 | vec_per_row for FP8
                float f[8];
                unpack8(xv[u], f);
                const float amax = group_amax(f, half);
                if (sub == 0) gamax[v / 16] = amax;
            }
        }
        __syncthreads();
        const int nd = ndest;
        const uint64_t* xw = reinterpret_cast<const uint64_t*>(a.x + (int64_t)t * H);
        // The FP8 row's data word w as it travels.
        auto word = [&](int w) -> uint64_t {
            if (w < H / 8) {
                float f[8];
                unpack8(__ldg(reinterpret_cast<const uint4*>(xw) + w), f);
                const uint2 q = e4m3x8(f, gamax[w / 16]);
                return (uint64_t)q.y << 32 | q.x;
            }
            const int g = 2 * (w - H / 8);
            const float s0 = g < groups ? __fdiv_rn(gamax[g], 448.f) : 0.f;
            const float s1 = g + 1 < groups ? __fdiv_rn(gamax[g + 1], 448.f) : 0.f;
            return (uint64_t)__float_as_uint(s1) << 32 | __float_as_uint(s0);
        };
        for (int q4 = warp; 4 * q4 < nrl; q4 += kWarps) {
            __syncwarp();
            const int ln = 4 * q4 + lane / 8;
            if (ln >= nrl) continue;
            const int w = line_word(ln);
            uint64_t d0 = 0, d1 = flag64;  // part 7
            if (w >= 0 && !a.fp8) {
                // 16 bytes of the row (w is even, H / 4 too)
                const uint4 v = w < H / 4 ? __ldg(reinterpret_cast<const uint4*>(xw) + w / 2) : make_uint4(0, 0, 0, 0);
                d0 = (uint64_t)v.y << 32 | v.x;
                d1 = (uint64_t)v.w << 32 | v.z;
            } else if (w >= 0) {
                d0 = word(w);
                d1 = word(w + 1);
            }
            for (int i = 0; i < nd; i++) line_store(islot_at(dests[i], t) + (nhl + ln) * 8 + lane % 8, d0, d1);
        }
        __syncthreads();  // dests and gamax are rewritten for the next token
        if (t + 1 < t1) load_x(t + 1);
    }
    __syncthreads();
    EPBENCH_TRACE(a, 1);
    // Warp 0 takes the block's ticket and, if last, releases the peers; then
    // it is done. The own rank's rows are not part of the release: the
    // workers write them while the peers' data is on its way, then go on to
    // the receive side.
    if (warp == 0) {
        if (!inl && !lines && (int)blockIdx.x < stored_blocks &&
            last_ticket(at<uint64_t>(self, a.off_dispatch_signal) + R, stored_blocks)) {
            release_peers(a, peer_base, a.off_dispatch_signal);
            EPBENCH_TRACE(a, 2);
        }
        return;
    }
    const int wt = threadIdx.x - kWarp;

    // --- the own rank's rows (workers), at the rows warp 0 chose ---
    // Written by the threads of warps w0 .. w0+nw-1 (all the workers, or in
    // the lines protocol some, while the others receive).
    auto own_rows_of_block = [&](int w0, int nw) {
        const int n = nw * kWarp, me = threadIdx.x - w0 * kWarp;
        const int bar = nw == kWarps - 1 ? 1 : 2;  // 1: workers_sync's
        auto sync = [&]() { asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(n) : "memory"); };
        for (int t = t0; t < t1; t++) {
            if (warp == w0) {
                int64_t e = -1;
                if (lane < K) e = __ldg(a.topk_idx + (int64_t)t * K + lane);
                const bool mine = e >= lo && e < hi;
                const unsigned mines = __ballot_sync(0xffffffffu, mine);
                if (mine)
                    own_rows[__popc(mines & ((1u << lane) - 1u))] =
                        (e - lo) * rows_per_expert + a.row_pos[((int64_t)a.rank * T + t) * K + lane];
                if (lane == 0) nown = __popc(mines);
            }
            const uint4* src = reinterpret_cast<const uint4*>(a.x + (int64_t)t * H);
            sync();
            const int no = nown;
            for (int base = 0; base < vec_per_row; base += n * kMaxRecvVecPerThread) {
                uint4 xr[kMaxRecvVecPerThread];
#pragma unroll
                for (int u = 0; u < kMaxRecvVecPerThread; u++) {
                    const int v = base + me + u * n;
                    if (v < vec_per_row) xr[u] = __ldg(src + v);
                }
#pragma unroll
                for (int u = 0; u < kMaxRecvVecPerThread; u++) {
                    const int v = base + me + u * n;
                    if (v >= vec_per_row) break;  // half-warp uniform: 16 | vec_per_row for FP8
                    if (!a.fp8) {
                        for (int i = 0; i < no; i++) reinterpret_cast<uint4*>(recv + own_rows[i] * rb)[v] = xr[u];
                    } else {
                        float scale;
                        const uint2 q = quantize8(xr[u], half, &scale);  // a half-warp holds 128 channels
                        for (int i = 0; i < no; i++) {
                            reinterpret_cast<uint2*>(recv + own_rows[i] * rb)[v] = q;
                            if (sub == 0) a.recv_scales[own_rows[i] * groups + v / 16] = scale;
                        }
                    }
                }
            }
            sync();  // own_rows is rewritten for the next token
        }
        EPBENCH_TRACE_BY(a, 6, w0 * kWarp);
    };
    if (!lines && !spread) own_rows_of_block(1, kWarps - 1);


    // --- peers: the workers copy the messages this block owns (one per
    // source token, sources in order from rank+1) to the rows their headers
    // name; the last block also writes the layout ---
    const int* counts = at<const int>(self, a.off_dispatch_counts);
    const uint4* icounts = at<const uint4>(self, a.off_inline_counts);
    const uint64_t* arrived = at<const uint64_t>(self, a.off_dispatch_signal);
    // Waits (first worker) for the sources of order below `upto` (inline:
    // nothing to wait for, every datum is polled).
    auto wait_sources = [&](int upto) {
        if (wt == 0 && !inl && !lines) {
            for (int o = waited_upto; o < upto && !failed; o++) {
                const int p = (a.rank + o) % R;
                if (!wait_arrivals(arrived + p, a.expect, deadline, a.err, kPhaseDispatch, p)) failed = 1;
                else waited_upto = o + 1;
            }
        }
    };
    // The number of rows local expert l gets from source s (false: gave up).
    auto count_of = [&](int s, int l, int* c) {
        if (direct_self(a, s)) {
            *c = total[lo + l];
            return true;
        }
        if (!inl && !lines) {
            *c = __ldcg(counts + (int64_t)s * L + l);
            return true;
        }
        uint2 d;
        if (!unit_wait(icounts + (int64_t)s * L + l, flag, &d, deadline, a.err, kPhaseDispatch, s)) return false;
        *c = (int)d.x;
        return true;
    };
    // The row, among local expert l's rows, of token t's selection k at
    // position p among those from the source of order ord (the own rank's
    // rows come first, then the sources in order from rank+1); with record,
    // the token and the row are kept for combine. False where a count could
    // not be had.
    auto place = [&](int l, int ord, int p, int t, int k, bool record, int* row) {
        int begin = total[lo + l];
        for (int o = 1; o < ord; o++) {
            int c = 0;
            if (!count_of((a.rank + o) % R, l, &c)) return false;
            begin += c;
        }
        *row = begin + p;
        if (record) {
            a.src_info[l * rows_per_expert + *row] = t;
            a.row_pos[((int64_t)((a.rank + ord) % R) * T + t) * K + k] = *row;
        }
        return true;
    };
    if (blockIdx.x == gridDim.x - 1) {
        wait_sources(R);
        workers_sync();
        if (failed) return;
        for (int l = wt; l < L; l += kWorkers) {
            int64_t running = 0;
            for (int o = 0; o < R; o++) {
                const int s = (a.rank + o) % R;
                int c;
                if (!count_of(s, l, &c)) {
                    failed = 1;
                    break;
                }
                a.layout_range[(int64_t)l * R + s] = (running << 32) | (int64_t)c;
                running += c;
            }
            a.recv_count[l] = (int)running;
        }
    }
    const int nmsg = (R - 1) * T;
    const int nvec = inl && a.fp8 ? H / 8 : rb / 16;  // per row: 16-byte vectors, or inline FP8 8-byte units
    bool traced = false;
    if (lines) {
        // Warps 1-7 write the own rank's rows while warps 8-15 receive: one
        // warp per (message, 16 of its row lines) polls the header lines,
        // then its row lines, and copies each line's data as it stands to
        // the rows the header names.
        constexpr int kOwnWarps = 7;
        if (warp <= kOwnWarps) {
            own_rows_of_block(1, kOwnWarps);
            return;
        }
        const int chunks = (nrl + 15) / 16;
        const int nw = gridDim.x * (kWarps - 1 - kOwnWarps);
        for (int item = (warp - 1 - kOwnWarps) * gridDim.x + blockIdx.x; item < nmsg * chunks; item += nw) {
            const int m = item / chunks, c = item % chunks;
            const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
            const uint4* slot = inline_slot(a, self, s, t);
            // The row lines' first loads go out with the header's.
            uint64_t w0[4] = {}, w1[4] = {}, h0 = 0, h1 = 0;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int ln = c * 16 + 4 * q + lane / 8;
                if (ln < nrl) line_load(slot + (nhl + ln) * 8 + lane % 8, &w0[q], &w1[q]);
            }
            if (!lines_wait(slot, 0, nhl, flag64, &h0, &h1, deadline, a.err, kPhaseDispatch, s)) break;
            if (header_int(h0, h1, 0) == 0) continue;  // the token does not come here
            const int k = lane < K ? lane : 0;
            const int id = header_int(h0, h1, 2 + k), pk = header_int(h0, h1, 2 + 2 * K + k);
            const bool mine = lane < K && id >= lo && id < hi;
            const unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (mines == 0) continue;
            bool ok = true;
            int64_t row = 0;
            if (mine) {
                int r = 0;
                ok = place(id - lo, ord, pk, t, lane, c == 0, &r);
                row = (int64_t)(id - lo) * rows_per_expert + r;
            }
            if (__any_sync(0xffffffffu, !ok)) break;
#pragma unroll
            for (int q = 0; q < 4 && ok; q++) {
                if (c * 16 + 4 * q >= nrl) break;
                ok = lines_settle(slot + nhl * 8, c * 16 + 4 * q, nrl, flag64, &w0[q], &w1[q], deadline, a.err,
                                  kPhaseDispatch, s);
            }
            if (!ok) break;
            for (unsigned mm = mines; mm; mm &= mm - 1) {
                const int64_t r = __shfl_sync(0xffffffffu, row, __ffs(mm) - 1);
                uint64_t* dst = reinterpret_cast<uint64_t*>(recv + r * rb);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int ln = c * 16 + 4 * q + lane / 8;
                    if (ln >= nrl) continue;
                    const int w = line_word(ln);
                    if (w < 0) continue;
                    const uint4 val = make_uint4((uint32_t)w0[q], (uint32_t)(w0[q] >> 32), (uint32_t)w1[q],
                                                 (uint32_t)(w1[q] >> 32));
                    if (!a.fp8) {
                        if (w < H / 4) reinterpret_cast<uint4*>(dst)[w / 2] = val;
                    } else if (w < H / 8) {
                        reinterpret_cast<uint4*>(dst)[w / 2] = val;
                    } else {
                        const int g = 2 * (w - H / 8);
                        const uint32_t sc[4] = {val.x, val.y, val.z, val.w};
#pragma unroll
                        for (int j = 0; j < 4; j++)
                            if (g + j < groups) a.recv_scales[r * groups + g + j] = __uint_as_float(sc[j]);
                    }
                }
            }
        }
        EPBENCH_TRACE_BY(a, 4, (kOwnWarps + 1) * kWarp);  // the first receiving warp
        return;
    }
    if (spread) {
        // Few messages: each worker warp of the grid takes a slice of one
        // message (kSliceVecs of its vectors or units), so a single token's
        // row is received by many SMs; every such warp reads the header.
        wait_sources(R);
        workers_sync();
        if (failed) return;
        const int slices = (nvec + kSliceVecs - 1) / kSliceVecs;
        const int nw = gridDim.x * (kWarps - 1);
        for (int item = (warp - 1) * gridDim.x + blockIdx.x; item < nmsg * slices; item += nw) {
            const int m = item / slices, v0 = item % slices * kSliceVecs + lane;
            const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
            const uint8_t* slot = dispatch_slot(a, self, s, t);
            const uint4* islot = inline_slot(a, self, s, t);
            // The slice's data loads first (inline: unit 2u + h is half h of
            // vector u, FP8 one unit per vector, the last unit the lane's
            // scale), then the header's.
            uint4 pv[kVecPerLane];
            constexpr int kUnits = 2 * kVecPerLane + 1;
            uint4 un[kUnits];
            const int upv = a.fp8 ? 1 : 2;  // inline: units per vector
            // FP8: the scales of the slice's channel groups, one per lane.
            const int gps = kSliceVecs * (inl ? 8 : 16) / kScaleBlock;
            const int g = (v0 - lane) / kSliceVecs * gps + lane;
            const bool has_scale = a.fp8 && lane < gps && g < groups;
            auto unit_at = [&](int i) -> const uint4* {
                if (i == kUnits - 1) return has_scale ? islot + p0 + H / 8 + g : nullptr;
                const int u = i / 2, v = v0 + u * kWarp;
                if (v >= nvec || (i % 2 == 1 && a.fp8)) return nullptr;
                return islot + p0 + upv * v + i % 2;
            };
#pragma unroll
            for (int i = 0; i < kUnits; i++) {
                const uint4* q = inl ? unit_at(i) : nullptr;
                if (q != nullptr) un[i] = unit_load(q);
            }
#pragma unroll
            for (int u = 0; u < kVecPerLane; u++) {
                const int v = v0 + u * kWarp;
                if (!inl && v < nvec) pv[u] = __ldcg(reinterpret_cast<const uint4*>(slot + hdr) + v);
            }
            bool ok = true, live = true;
            int e = -1, p = 0;
            if (!inl) {
                live = fenced_header(a, slot, &e, &p);
            } else {
                // The presence unit and the lane's header unit polled together
                // (a token not sent here has no header this call).
                uint4 pr = unit_load(islot), hd = make_uint4(0, 0, 0, 0);
                if (lane < K) hd = unit_load(islot + 1 + lane);
                for (uint32_t spins = 1;; spins++) {
                    const bool pr_ok = pr.y == flag && pr.w == flag;
                    if (pr_ok && (pr.x == 0 || lane >= K || (hd.y == flag && hd.w == flag))) break;
                    if (!pr_ok) pr = unit_load(islot);
                    if (lane < K && !(hd.y == flag && hd.w == flag)) hd = unit_load(islot + 1 + lane);
                    if ((spins & 255) == 0 && bound_reached(deadline, a.err, kPhaseDispatch, s)) {
                        ok = false;
                        break;
                    }
                }
                live = pr.x != 0;
                if (live && lane < K) {
                    e = (int)hd.x;
                    p = (int)hd.z;
                }
            }
            if (__any_sync(0xffffffffu, !ok)) return;
            if (!__shfl_sync(0xffffffffu, live, 0)) continue;
            const bool mine = e >= lo && e < hi;
            const unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (mines == 0) continue;
            int64_t row = 0;
            if (mine) {
                int r = 0;
                ok = place(e - lo, ord, p, t, lane, v0 == lane, &r);  // recorded by the message's first slice
                row = (int64_t)(e - lo) * rows_per_expert + r;
            }
            if (__any_sync(0xffffffffu, !ok)) return;
            float scale = 0.f;
            if (inl) {
                ok = units_settle<kUnits>([&](int i) -> uint4& { return un[i]; }, unit_at, flag, deadline, a.err,
                                          kPhaseDispatch, [&](int) { return s; });
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++)
                    pv[u] = make_uint4(un[2 * u].x, un[2 * u].z, un[2 * u + 1].x, un[2 * u + 1].z);
                scale = __uint_as_float(un[kUnits - 1].x);
            } else if (has_scale) {
                scale = __ldcg(reinterpret_cast<const float*>(slot + hdr + H) + g);
            }
            if (__any_sync(0xffffffffu, !ok)) return;
            for (unsigned mm = mines; mm; mm &= mm - 1) {
                const int64_t r = __shfl_sync(0xffffffffu, row, __ffs(mm) - 1);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    const int v = v0 + u * kWarp;
                    if (v >= nvec) continue;
                    if (inl && a.fp8) reinterpret_cast<uint2*>(recv + r * rb)[v] = make_uint2(pv[u].x, pv[u].y);
                    else reinterpret_cast<uint4*>(recv + r * rb)[v] = pv[u];
                }
                if (has_scale) a.recv_scales[r * groups + g] = scale;
            }
        }
        EPBENCH_TRACE_BY(a, 4, kWarp);
        return;
    }
    // Fenced, many tokens: the workers of a block take one message at a time.
    for (int m = blockIdx.x; m < nmsg; m += gridDim.x) {
        const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
        wait_sources(ord + 1);
        workers_sync();  // also: the previous message's rows are stored
        if (failed) return;
        if (!traced) {
            EPBENCH_TRACE_BY(a, 3, kWarp);
            traced = true;
        }
        // The row and the header in one round trip: the row's loads do not
        // depend on where it goes.
        const uint8_t* slot = dispatch_slot(a, self, s, t);
        uint4 pv[kMaxRecvVecPerThread];
        float scale = 0.f;
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v < nvec) pv[u] = __ldcg(reinterpret_cast<const uint4*>(slot + hdr) + v);
        }
        if (a.fp8 && wt < groups) scale = __ldcg(reinterpret_cast<const float*>(slot + hdr + H) + wt);
        if (warp == 1) {
            int e = -1, p = 0;
            const bool live = fenced_header(a, slot, &e, &p);
            const bool mine = live && e >= lo && e < hi;
            const unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (mine) {
                int r = 0;
                if (!place(e - lo, ord, p, t, lane, true, &r)) failed = 1;
                rows[__popc(mines & ((1u << lane) - 1u))] = (int64_t)(e - lo) * rows_per_expert + r;
            }
            if (lane == 0) nrows = __popc(mines);
        }
        workers_sync();
        if (failed) return;
        const int n = nrows;
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v >= nvec) break;
            for (int i = 0; i < n; i++) reinterpret_cast<uint4*>(recv + rows[i] * rb)[v] = pv[u];
        }
        if (a.fp8 && wt < groups)
            for (int i = 0; i < n; i++) a.recv_scales[rows[i] * groups + wt] = scale;
    }
    EPBENCH_TRACE_BY(a, 4, kWarp);
}

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
    line_store(row + line * 8 + part, fl ? 0 : (uint64_t)d.y << 32 | d.x, fl ? (uint64_t)flag : (uint64_t)d.w << 32 | d.z);
}

// Calls use(k, w, raw) for each of the warp's local selections in `local`
// (bit k: lane k holds the selection's expert output row my_row and its
// weight my_w) in top-k order, kBatch rows' loads in flight at a time, raw
// holding the lane's vectors v of the row. Warp-uniform.
template <typename F>
__device__ __forceinline__ void for_local_rows(const LLArgs& a, unsigned local, int64_t my_row, float my_w,
                                               const int v[kVecPerLane], F use) {
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
            load_y(a, __shfl_sync(0xffffffffu, my_row, k), v, raw[b]);
            nb = b + 1;
        }
#pragma unroll
        for (int b = 0; b < kBatch; b++) {
            if (b >= nb) break;
            use(kb[b], wb[b], raw[b]);
        }
    }
}

// The lowest rank above prev that holds one of the token's selections (lane
// k: the rank of selection k, UINT_MAX for none), UINT_MAX when there is
// none: rank_local_reduce's terms, in the order they are added.
// Warp-collective.
__device__ __forceinline__ unsigned next_rank(unsigned my_rank, int prev) {
    return __reduce_min_sync(0xffffffffu, (int)my_rank > prev && my_rank != UINT_MAX ? my_rank : UINT_MAX);
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

// Expert side of combine for one work item: row slice `slice` of the slot
// (source rank s, token t). It either sends the bf16 partial of the local
// experts the token selected (rank_local_reduce) or every such expert row
// (direct_send) to the source's combine receive area. Warp-uniform.
__device__ __forceinline__ void combine_item(const LLArgs& a, uint64_t self, int s, int t, int slice) {
    const int T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int vec_per_row = H / 8, nl = lines_row_lines(H, false);
    const int lane = threadIdx.x % kWarp;
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)a.ranks * T;
    const uint64_t peer = a.peers[s];
    const uint64_t dst_base = at<uint8_t>(peer, a.off_combine_recv) - (uint8_t*)0;
    uint4* const idst = at<uint4>(peer, a.off_inline_combine);  // inline: rows of inline_row_units; lines: of nl lines
    const bool inl = a.combine_proto == kProtoInline, lines = a.combine_proto == kProtoLines;
    const uint32_t flag = (uint32_t)a.epoch;
    // The routing of (s, t) (the message header, or for the own rank's
    // tokens, never sent to itself, its own topk_idx and weights) and the
    // rows dispatch gave the selections, all loaded in one round trip.
    int e = -1, pos = 0;
    float we = 0.f;
    bool live = true;
    if (direct_self(a, s)) {
        if (lane < K) {
            e = (int)a.topk_idx[(int64_t)t * K + lane];
            we = a.topk_w[(int64_t)t * K + lane];
        }
    } else if (a.inline_proto == kProtoLines) {
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
    } else if (a.inline_proto == kProtoFenced) {
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
    // and weight.
    int64_t my_row = -1;
    float my_w = 0.f;
    if (e >= lo && e < hi) {
        my_row = (int64_t)(e - lo) * rows_per_expert + pos;
        my_w = we;
    }
    const unsigned local = __ballot_sync(0xffffffffu, my_row >= 0);
    if (local == 0) return;
    int v[kVecPerLane];
    item_vecs(slice, lines, vec_per_row, nl, v);
    float acc[kVecPerLane][8];
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
    for_local_rows(a, local, my_row, my_w, v, [&](int k, float w, const YRaw* raw) {
        if (a.combine_mode == 0) {
            add_weighted(a, acc, w, raw);
            return;
        }
        // direct_send: every expert row travels back as bf16.
        const uint64_t row = (uint64_t)t * K + k;
        uint4* to = reinterpret_cast<uint4*>(dst_base + row * (uint64_t)H * 2);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++) {
            uint4 out = raw[u].v;
            if (a.fp8 && v[u] >= 0) {
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
    if (a.combine_mode != 0) return;
    const uint64_t row = (uint64_t)a.rank * T + t;
    uint4* to = reinterpret_cast<uint4*>(dst_base + row * (uint64_t)H * 2);
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        const uint4 d = pack8(acc[u]);
        if (lines) {
            line_put(idst + row * nl * 8, item_line(slice, u), nl, d, flag);
        } else if (v[u] >= 0) {
            if (inl) vec_store(idst + row * inline_row_units(H) + 2 * v[u], d, flag);
            else to[v[u]] = d;
        }
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) epbench_ll_combine(const LLArgs args) {
    if (!variant_ok(args)) return;
    const LLArgs a = clocked(args, false);
    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int vec_per_row = H / 8, nl = lines_row_lines(H, false);
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)R * T;
    const uint64_t self = a.peers[a.rank];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const bool inl = a.combine_proto == kProtoInline, lines = a.combine_proto == kProtoLines;
    // Warps are numbered across the blocks first (warp w of the grid is warp
    // w / grid of block w % grid), so a small operation's items land on as
    // many SMs as there are items: one SM stores only ~20 GB/s over NVLink.
    const int gwarp = warp * gridDim.x + blockIdx.x;
    const int nwarps = gridDim.x * kWarps;

    // --- expert side: one warp per received (source rank, token, row slice),
    // the peers' slots first (sources from rank+1 on), then the own rank's
    // with the worker warps while warp 0 releases the peers. With the lines
    // protocol the peers' partials need no release, and the source side
    // computes the own rank's partial itself ---
    const int slices = lines ? (nl + kLinesPerItem - 1) / kLinesPerItem : (vec_per_row + kSliceVecs - 1) / kSliceVecs;
    const int peer_items = (R - 1) * T * slices, own_items = T * slices;
    // Blocks with items of the peers take a ticket for the peers' release,
    // blocks with items of the own rank (worker warps) one for its release.
    const bool peer_worked = (int)blockIdx.x < peer_items;
    const bool own_worked = (int)blockIdx.x < own_items;
    const uint64_t peer_blocks = min((int)gridDim.x, peer_items);
    const uint64_t own_blocks = min((int)gridDim.x, own_items);
    uint64_t* const signal = at<uint64_t>(self, a.off_combine_signal);
    for (int item = gwarp; item < peer_items; item += nwarps) {
        const int st = item / slices;
        combine_item(a, self, (a.rank + 1 + st / T) % R, st % T, item % slices);
    }
    if (!lines) {
        __syncthreads();
        EPBENCH_TRACE(a, 1);
        if (warp == 0 && !inl && peer_worked && last_ticket(signal + R, peer_blocks)) {
            release_peers(a, a.peers, a.off_combine_signal);
            EPBENCH_TRACE(a, 2);
        }
        if (warp > 0) {
            const int nw = gridDim.x * (kWarps - 1);
            for (int item = (warp - 1) * gridDim.x + blockIdx.x; item < own_items; item += nw)
                combine_item(a, self, a.rank, item / slices, item % slices);
            workers_sync();
            // The own rank's partials: the last block releases them at device scope.
            if (warp == 1 && !inl && own_worked && last_ticket(signal + R + 1, own_blocks) && lane == 0)
                red_release_gpu_add(signal + a.rank, 1);
        }
        EPBENCH_TRACE_BY(a, 3, kWarp);
    } else {
        EPBENCH_TRACE_BY(a, 1, 0);
    }

    // --- source side: wait for every rank (fenced), then one warp per
    // (token, row slice) ---
    // The routing of each warp's first token is loaded before the wait.
    int first_e = -1;
    float first_w = 0.f;
    if (gwarp < T * slices && lane < K) {
        const int t = gwarp / slices;
        first_e = (int)a.topk_idx[(int64_t)t * K + lane];
        first_w = a.topk_w[(int64_t)t * K + lane];
    }
    if (!inl && !lines) {
        __shared__ int failed;
        if (threadIdx.x == 0) failed = 0;
        __syncthreads();
        if (threadIdx.x < R) {
            const uint64_t* arrived = at<const uint64_t>(self, a.off_combine_signal);
            if (!wait_arrivals(arrived + threadIdx.x, a.expect, deadline, a.err, kPhaseCombine, threadIdx.x))
                failed = 1;
        }
        __syncthreads();
        if (failed) return;
        EPBENCH_TRACE(a, 4);
    }
    const uint8_t* recv = at<const uint8_t>(self, a.off_combine_recv);
    const uint4* irecv = at<const uint4>(self, a.off_inline_combine);
    const uint32_t flag = (uint32_t)a.epoch;
    // A work item's token's routing (lane k: expert, weight; the warp's
    // first item's loaded before the wait) and the lane's vectors of it.
    auto item_start = [&](int item, int t, int slice, bool in_lines, int* e, float* wk, int v[kVecPerLane]) {
        *e = first_e;
        *wk = first_w;
        if (item != gwarp && lane < K) {
            *e = (int)a.topk_idx[(int64_t)t * K + lane];
            *wk = a.topk_w[(int64_t)t * K + lane];
        }
        item_vecs(slice, in_lines, vec_per_row, nl, v);
    };
    // The item's output vectors.
    auto item_store = [&](int item, int t, const int v[kVecPerLane], const float acc[kVecPerLane][8]) {
        if (item == gwarp) EPBENCH_TRACE(a, 6);
        uint4* to = reinterpret_cast<uint4*>(a.out + (int64_t)t * H);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
            if (v[u] >= 0) to[v[u]] = pack8(acc[u]);
    };
    // Lines (rank_local_reduce): the own rank's partial is computed here from
    // its expert outputs, rounded to bf16 as a peer's is, while the peers'
    // lines land; then the ranks' partials are added in rank order, each
    // peer's lines polled until they carry the call's flag.
    const bool lines_rlr = lines && a.combine_mode == 0, lines_direct = lines && a.combine_mode != 0;
    for (int item = gwarp; lines_rlr && item < T * slices; item += nwarps) {
        const int t = item / slices, slice = item % slices;
        int e, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, true, &e, &wk, v);
        float own[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) own[u][j] = 0.f;
        int64_t my_row = -1;
        if (e >= lo && e < hi)
            my_row = (int64_t)(e - lo) * rows_per_expert + __ldcg(a.row_pos + ((int64_t)a.rank * T + t) * K + lane);
        const unsigned local = __ballot_sync(0xffffffffu, my_row >= 0);
        for_local_rows(a, local, my_row, wk, v, [&](int, float w, const YRaw* raw) { add_weighted(a, own, w, raw); });
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++) {
            unpack8(pack8(own[u]), own[u]);
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        }
        const unsigned my_rank = e >= 0 ? (unsigned)(e / L) : UINT_MAX;
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
                if (!lines_wait(lfrom, first, nl, (uint64_t)flag, &w0, &w1, deadline, a.err, kPhaseCombine, (int)q))
                    return;  // in every lane together
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
    for (int item = gwarp; lines_direct && item < T * slices; item += nwarps) {
        const int t = item / slices, slice = item % slices;
        int e, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, true, &e, &wk, v);
        int64_t my_row = -1;
        if (e >= lo && e < hi)
            my_row = (int64_t)(e - lo) * rows_per_expert + __ldcg(a.row_pos + ((int64_t)a.rank * T + t) * K + lane);
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        for (unsigned left = __ballot_sync(0xffffffffu, e >= 0); left;) {
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
                    if (!lines_settle(lfrom, first, nl, (uint64_t)flag, &w0, &w1, deadline, a.err, kPhaseCombine, q))
                        return;  // in every lane together
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
    bool ok = true;
    for (int item = gwarp; !lines && item < T * slices; item += nwarps) {
        const int t = item / slices, slice = item % slices;
        int e, v[kVecPerLane];
        float wk;
        item_start(item, t, slice, false, &e, &wk, v);
        // The terms of the sum, in the order they are added, taken one at a
        // time (warp-uniform): rank_local_reduce: the ranks holding at least
        // one of the token's selections, ascending, each of which sent one
        // partial row; direct_send: the selections in top-k order.
        const unsigned valid = __ballot_sync(0xffffffffu, e >= 0);
        const unsigned my_rank = e >= 0 ? (unsigned)(e / L) : UINT_MAX;
        int prev = -1;          // rank_local_reduce: the last rank taken
        unsigned left = valid;  // direct_send: the selections not taken yet
        auto next_term = [&](int* row, int* rank, float* w) {
            if (a.combine_mode == 0) {
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
        for (bool more = true; more;) {
            uint4 in[kBatch][kVecPerLane], ihi[kBatch][kVecPerLane];
            int rowb[kBatch], rankb[kBatch];
            float wb[kBatch];
            int nb = 0;
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (!next_term(&rowb[b], &rankb[b], &wb[b])) {
                    more = false;
                    break;
                }
                nb = b + 1;
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
                // Every unit of the batch that lacks the flag reloaded, all
                // together, until none does (one round trip per poll).
                for (uint32_t spins = 1;; spins++) {
                    bool done = true;
                    int waiting = 0;
#pragma unroll
                    for (int b = 0; b < kBatch; b++) {
#pragma unroll
                        for (int u = 0; u < kVecPerLane; u++) {
                            if (b >= nb || v[u] < 0) continue;
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
                    if ((spins & 255) == 0 && bound_reached(deadline, a.err, kPhaseCombine, waiting)) {
                        ok = false;
                        break;
                    }
                }
                if (__any_sync(0xffffffffu, !ok)) return;
#pragma unroll
                for (int b = 0; b < kBatch; b++)
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++)
                        in[b][u] = make_uint4(in[b][u].x, in[b][u].z, ihi[b][u].x, ihi[b][u].z);
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (b >= nb) break;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    float f[8];
                    unpack8(in[b][u], f);
                    if (a.combine_mode == 0) {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = __fadd_rn(acc[u][j], f[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], wb[b], f[j]);
                    }
                }
            }
        }
        item_store(item, t, v, acc);
    }
    EPBENCH_TRACE(a, 5);
}
