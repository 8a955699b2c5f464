// Low-latency dispatch and combine, one kernel launch each (docs/DESIGN.md).
//
// Dispatch: every block first sends its tokens, one message per (token,
// destination rank) carrying the routing in a header, into the destination's
// receive slot [source rank][token]; then it signals every rank. The same
// blocks then turn what arrived into the expert-major layout: one work item
// per (local expert, source rank), whose rows start after the rows of lower
// source ranks, so the layout is deterministic and needs no atomics and no
// clean-up between calls.
//
// Combine: the expert side walks the received (source, token) slots, cut
// into row slices so every warp of the grid has work, and
// either reduces its local experts' weighted rows into one bf16 partial
// (rank_local_reduce) or sends every expert row back (direct_send); then it
// signals. The source side waits for every rank and reduces per token.
//
// Arrival counters only grow: each call adds one per block that had work on
// the source rank, and the host passes the total expected after this call
// (kernels/senders.go). Every wait is bounded.
#include <limits.h>

#include "ll.cuh"

using namespace epbench;

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarp;
constexpr int kUnroll = 8;               // 16-byte loads in flight per thread in block copies
constexpr int kVecPerLane = 2;           // 16-byte vectors per lane in a combine work item
constexpr int kBatch = 4;                // rows whose loads are in flight together in combine
constexpr int kSliceVecs = kWarp * kVecPerLane;  // a row is cut into slices of this many vectors

// Exclusive prefix count of pred over the block, in thread order; *total gets
// the block's count. All threads must call it.
__device__ int block_exclusive_count(bool pred, int* total, int* warp_sums) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const unsigned ballot = __ballot_sync(0xffffffffu, pred);
    const int in_warp = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) warp_sums[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, sum = 0;
    for (int w = 0; w < kWarps; w++) {
        const int c = warp_sums[w];
        if (w < warp) before += c;
        sum += c;
    }
    __syncthreads();  // warp_sums may be reused by the caller's next round
    *total = sum;
    return before + in_warp;
}

// The top-k slot of expert `expert` (global id) in a dispatch message header,
// or -1 when the header is stale (another call's epoch) or does not select
// it. All loads are 16 bytes wide and independent, so one header costs one
// memory round trip rather than one per slot.
__device__ __forceinline__ int header_slot(const int* h, int epoch, int topk, int expert) {
    const int4 head = __ldcg(reinterpret_cast<const int4*>(h));
    const int4* ids = reinterpret_cast<const int4*>(h + 4);
    int found = -1;
    // 16 ids (4 loads in flight) per round: one round for top-k up to 16.
    for (int i0 = 0; 4 * i0 < topk; i0 += 4) {
        int4 v[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (4 * (i0 + i) < topk) v[i] = __ldcg(ids + i0 + i);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int k = 4 * (i0 + i);
            if (k >= topk) break;
            if (v[i].x == expert) found = k;
            if (k + 1 < topk && v[i].y == expert) found = k + 1;
            if (k + 2 < topk && v[i].z == expert) found = k + 2;
            if (k + 3 < topk && v[i].w == expert) found = k + 3;
        }
    }
    return head.x == epoch ? found : -1;
}

// The top-k slot of expert `expert` in this rank's own topk_idx row t, or -1.
__device__ __forceinline__ int own_slot(const LLArgs& a, int t, int expert) {
    if (a.topk & 1) {  // rows not 16-byte aligned
        for (int k = 0; k < a.topk; k++)
            if (__ldg(a.topk_idx + (int64_t)t * a.topk + k) == expert) return k;
        return -1;
    }
    const longlong2* row = reinterpret_cast<const longlong2*>(a.topk_idx + (int64_t)t * a.topk);
    int found = -1;
    // 8 ids (4 loads in flight) per round: one round for top-k up to 8.
    for (int i0 = 0; 2 * i0 < a.topk; i0 += 4) {
        longlong2 v[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (2 * (i0 + i) < a.topk) v[i] = __ldg(row + i0 + i);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int k = 2 * (i0 + i);
            if (k >= a.topk) break;
            if (v[i].x == expert) found = k;
            if (v[i].y == expert) found = k + 1;
        }
    }
    return found;
}

// BF16 tokens of the own rank are not sent to itself: the receive side reads
// them from x and topk_idx directly, so it can start before any message
// arrives. (FP8 tokens still travel through the own receive slots, quantised
// once by the sender.)
__device__ __forceinline__ bool direct_self(const LLArgs& a, int s) { return s == a.rank && !a.fp8; }

__device__ __forceinline__ const uint8_t* dispatch_slot(const LLArgs& a, uint64_t base, int src, int t) {
    return at<const uint8_t>(base, a.off_dispatch_recv) +
           ((uint64_t)src * a.tokens + t) * (uint64_t)message_bytes(a.topk, a.hidden);
}

// Tells every rank that this block's part of the operation is written: one
// system-scope release per peer, made only by blocks that had work (the
// `worked` predicate is the same on every rank, so the receiver knows how
// many releases to expect per call: see kernels/senders.go).
__device__ void signal_peers(const LLArgs& a, uint64_t off_signal, bool worked, bool skip_self) {
    __syncthreads();  // every thread's stores before thread q's release
    if (worked && threadIdx.x < a.ranks && !(skip_self && (int)threadIdx.x == a.rank)) {
        __threadfence_system();
        red_release_sys_add(at<uint64_t>(a.peers[threadIdx.x], off_signal) + a.rank, 1);
    }
}

// 8 channels of an expert output row as loaded: a bf16 vector, or for FP8
// dispatch 8 E4M3 bytes (in v.x, v.y) and their scale.
struct YRaw {
    uint4 v;
    float scale;
};

// Starts the loads of vectors v0, v0+32, ... of expert output row `row`.
__device__ __forceinline__ void load_y(const LLArgs& a, int64_t row, int v0, int vec_per_row, YRaw r[kVecPerLane]) {
#pragma unroll
    for (int u = 0; u < kVecPerLane; u++) {
        const int v = v0 + u * kWarp;
        if (v >= vec_per_row) continue;
        if (!a.fp8) {
            r[u].v = __ldg(reinterpret_cast<const uint4*>(a.y + row * a.hidden) + v);
        } else {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(a.y) + row * a.hidden) + v);
            r[u].v.x = q.x;
            r[u].v.y = q.y;
            r[u].scale = __ldg(a.recv_scales + row * (a.hidden / kScaleBlock) + v * 8 / kScaleBlock);
        }
    }
}

// The fp32 values of a loaded vector: bf16 as is, FP8 as the identity
// expert's output bf16(q * scale).
__device__ __forceinline__ void decode_y(const LLArgs& a, const YRaw& r, float f[8]) {
    if (!a.fp8) unpack8(r.v, f);
    else dequant8(make_uint2(r.v.x, r.v.y), r.scale, f);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) epbench_ll_dispatch(const LLArgs a) {
    __shared__ int dests[256];
    __shared__ int sel_rank[kMaxTopK];
    __shared__ int ndest;
    __shared__ int warp_sums[kWarps];
    __shared__ int chunk_t[kThreads];

    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int vec_per_row = H / 8;  // uint4 = 8 bf16
    const int hdr = header_bytes(K), msg = message_bytes(K, H);
    const uint64_t self = a.peers[a.rank];

    // --- send: one message per (token, destination rank) ---
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
        if (threadIdx.x < K) {
            const int64_t e = a.topk_idx[(int64_t)t * K + threadIdx.x];
            sel_rank[threadIdx.x] = e < 0 ? -1 : (int)(e / L);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int n = 0;
            for (int k = 0; k < K; k++) {
                const int q = sel_rank[k];
                if (q < 0 || direct_self(a, q)) continue;
                bool seen = false;
                for (int i = 0; i < n; i++) seen |= dests[i] == q;
                if (!seen) dests[n++] = q;
            }
            ndest = n;
        }
        __syncthreads();
        const int n = ndest;
        for (int i = 0; i < n; i++) {
            uint8_t* m = at<uint8_t>(a.peers[dests[i]], a.off_dispatch_recv) +
                         ((uint64_t)a.rank * T + t) * (uint64_t)msg;
            int* mh = reinterpret_cast<int*>(m);
            if (threadIdx.x == 0) {
                mh[0] = a.epoch;
                mh[1] = t;
            }
            if (threadIdx.x < K) {
                mh[4 + threadIdx.x] = (int)a.topk_idx[(int64_t)t * K + threadIdx.x];
                reinterpret_cast<float*>(mh + 4 + K)[threadIdx.x] = a.topk_w[(int64_t)t * K + threadIdx.x];
            }
        }
        const uint4* src = reinterpret_cast<const uint4*>(a.x + (int64_t)t * H);
        if (!a.fp8) {
            for (int v = threadIdx.x; v < vec_per_row; v += kThreads) {
                const uint4 val = __ldg(src + v);
                for (int i = 0; i < n; i++) {
                    uint8_t* m = at<uint8_t>(a.peers[dests[i]], a.off_dispatch_recv) +
                                 ((uint64_t)a.rank * T + t) * (uint64_t)msg;
                    reinterpret_cast<uint4*>(m + hdr)[v] = val;
                }
            }
        } else {
            // Quantised here, once per token: a half-warp per 128 channels
            // (16 lanes x 8 channels), amax reduced within the half-warp.
            const int groups = H / kScaleBlock;
            const int sub = threadIdx.x % 16;
            const unsigned half = (threadIdx.x % kWarp) < 16 ? 0x0000ffffu : 0xffff0000u;
            for (int g = threadIdx.x / 16; g < groups; g += kThreads / 16) {
                float f[8];
                unpack8(__ldg(src + g * 16 + sub), f);
                float amax = 0.f;
#pragma unroll
                for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(f[j]));
#pragma unroll
                for (int o = 8; o >= 1; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(half, amax, o));
                amax = fmaxf(amax, 1e-4f);
                const float inv = __fdiv_rn(448.f, amax);
                uint2 q;
                uint16_t* qp = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
                for (int j = 0; j < 4; j++) qp[j] = to_e4m3x2(__fmul_rn(f[2 * j], inv), __fmul_rn(f[2 * j + 1], inv));
                const float scale = __fdiv_rn(amax, 448.f);
                for (int i = 0; i < n; i++) {
                    uint8_t* m = at<uint8_t>(a.peers[dests[i]], a.off_dispatch_recv) +
                                 ((uint64_t)a.rank * T + t) * (uint64_t)msg + hdr;
                    reinterpret_cast<uint2*>(m + g * kScaleBlock)[sub] = q;
                    if (sub == 0) reinterpret_cast<float*>(m + H)[g] = scale;
                }
            }
        }
        __syncthreads();  // dests is rewritten for the next token
    }
    EPBENCH_TRACE(a, 1);
    signal_peers(a, a.off_dispatch_signal, (int)blockIdx.x < T, direct_self(a, a.rank));
    EPBENCH_TRACE(a, 2);

    // --- receive: one item per (local expert, source rank) ---
    // Source blocks of an expert are ordered from the own rank on (ord 0:
    // the own rank, then rank+1, ...), so the own rank's rows start at 0 and
    // need nothing from the peers.
    const uint64_t* arrived = at<const uint64_t>(self, a.off_dispatch_signal);
    __shared__ int waited_upto;  // sources of order 0..waited_upto-1 have arrived
    __shared__ int failed;
    if (threadIdx.x == 0) {
        waited_upto = 0;
        failed = 0;
    }
    __syncthreads();
    // Each block takes a contiguous run of items, so that (l, ord) usually
    // follows (l, ord-1) in the same block and its begin is already known.
    const int per_block = (L * R + gridDim.x - 1) / gridDim.x;
    const int item_end = min(L * R, (int)(blockIdx.x + 1) * per_block);
    int known_l = -1, known_ord = -1, known_end = 0;  // the last item done here, and its begin + count
    for (int item = blockIdx.x * per_block; item < item_end; item++) {
        const int l = item / R, ord = item % R, s = (a.rank + ord) % R;
        const int expert = a.rank * L + l;
        if (threadIdx.x == 0) {
            for (int o = waited_upto; o <= ord && !failed; o++) {
                const int p = (a.rank + o) % R;
                if (!direct_self(a, p) && !wait_arrivals(arrived + p, a.expect, deadline, a.err, kPhaseDispatch, p))
                    failed = 1;
                else
                    waited_upto = o + 1;
            }
        }
        __syncthreads();
        if (failed) return;
        if (item == blockIdx.x * per_block) EPBENCH_TRACE(a, 3);

        // Rows of earlier sources (in that order) come first.
        int begin = 0;
        const bool follows = known_l == l && known_ord == ord - 1;
        if (follows) begin = known_end;
        for (int o = 0; o < ord && !follows; o++) {
            const int p = (a.rank + o) % R;
            for (int t0 = 0; t0 < T; t0 += kThreads) {
                const int t = t0 + threadIdx.x;
                bool hit = false;
                if (t < T) {
                    hit = (direct_self(a, p) ? own_slot(a, t, expert)
                                             : header_slot(reinterpret_cast<const int*>(dispatch_slot(a, self, p, t)),
                                                           a.epoch, K, expert)) >= 0;
                }
                begin += __syncthreads_count(hit);
            }
        }
        int count = 0;
        for (int t0 = 0; t0 < T; t0 += kThreads) {
            const int t = t0 + threadIdx.x;
            int k = -1;
            if (t < T) {
                k = direct_self(a, s) ? own_slot(a, t, expert)
                                      : header_slot(reinterpret_cast<const int*>(dispatch_slot(a, self, s, t)), a.epoch,
                                                    K, expert);
            }
            if (__syncthreads_count(k >= 0) == 0) continue;  // nothing for this expert here
            int chunk_n;
            const int pos = block_exclusive_count(k >= 0, &chunk_n, warp_sums);
            if (k >= 0) {
                const int row = begin + count + pos;
                chunk_t[pos] = t;
                a.src_info[(int64_t)l * R * T + row] = t;
                a.row_pos[((int64_t)s * T + t) * K + k] = row;
            }
            __syncthreads();
            // The whole block copies the chunk's rows, kUnroll 16-byte loads
            // in flight per thread before their stores.
            const int rb = row_bytes(H, a.fp8), row_vecs = rb / 16;
            const int total = chunk_n * row_vecs;
            uint8_t* recv = reinterpret_cast<uint8_t*>(a.recv_x);
            for (int base = threadIdx.x; base < total; base += kThreads * kUnroll) {
                uint4 tmp[kUnroll];
#pragma unroll
                for (int u = 0; u < kUnroll; u++) {
                    const int e = base + u * kThreads;
                    if (e < total) {
                        const int i = e / row_vecs, v = e % row_vecs;
                        const uint8_t* from = direct_self(a, s) ? reinterpret_cast<const uint8_t*>(a.x + (int64_t)chunk_t[i] * H)
                                                                : dispatch_slot(a, self, s, chunk_t[i]) + hdr;
                        tmp[u] = __ldcg(reinterpret_cast<const uint4*>(from) + v);
                    }
                }
#pragma unroll
                for (int u = 0; u < kUnroll; u++) {
                    const int e = base + u * kThreads;
                    if (e < total) {
                        const int i = e / row_vecs, v = e % row_vecs;
                        reinterpret_cast<uint4*>(recv + ((int64_t)l * R * T + begin + count + i) * rb)[v] = tmp[u];
                    }
                }
            }
            if (a.fp8) {
                const int groups = H / kScaleBlock;
                for (int e = threadIdx.x; e < chunk_n * groups; e += kThreads) {
                    const int i = e / groups, g = e % groups;
                    const float* from = reinterpret_cast<const float*>(dispatch_slot(a, self, s, chunk_t[i]) + hdr + H);
                    a.recv_scales[((int64_t)l * R * T + begin + count + i) * groups + g] = __ldcg(from + g);
                }
            }
            count += chunk_n;
            __syncthreads();
        }
        known_l = l;
        known_ord = ord;
        known_end = begin + count;
        if (threadIdx.x == 0) {
            a.layout_range[(int64_t)l * R + s] = ((int64_t)begin << 32) | (int64_t)count;
            if (ord == R - 1) a.recv_count[l] = begin + count;
        }
    }
    EPBENCH_TRACE(a, 4);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) epbench_ll_combine(const LLArgs a) {
    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts;
    const int vec_per_row = H / 8;
    const uint64_t self = a.peers[a.rank];
    const int lane = threadIdx.x % kWarp;
    const int gwarp = blockIdx.x * kWarps + threadIdx.x / kWarp;
    const int nwarps = gridDim.x * kWarps;
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)R * T;

    // --- expert side: one warp per received (source rank, token, row slice) ---
    const int slices = (vec_per_row + kSliceVecs - 1) / kSliceVecs;
    for (int item = gwarp; item < R * T * slices; item += nwarps) {
        const int st = item / slices, slice = item % slices;
        const int s = st / T, t = st % T;
        // The routing of (s, t): the message header, or for the own rank's
        // BF16 tokens (never sent to itself) its own topk_idx and weights.
        int e = -1;
        float we = 0.f;
        if (direct_self(a, s)) {
            if (lane < K) {
                e = (int)a.topk_idx[(int64_t)t * K + lane];
                we = a.topk_w[(int64_t)t * K + lane];
            }
        } else {
            const int* h = reinterpret_cast<const int*>(dispatch_slot(a, self, s, t));
            if (__ldcg(h) != a.epoch) continue;
            if (lane < K) {
                e = __ldcg(h + 4 + lane);
                we = __ldcg(reinterpret_cast<const float*>(h + 4 + K) + lane);
            }
        }
        // Local selections in top-k order: lane k holds its expert output
        // row and weight.
        int64_t my_row = -1;
        float my_w = 0.f;
        if (e >= lo && e < hi) {
            my_row = (int64_t)(e - lo) * rows_per_expert + a.row_pos[((int64_t)s * T + t) * K + lane];
            my_w = we;
        }
        const unsigned local = __ballot_sync(0xffffffffu, my_row >= 0);
        if (local == 0) continue;
        const uint64_t dst_base = at<uint8_t>(a.peers[s], a.off_combine_recv) - (uint8_t*)0;
        const int v0 = slice * kSliceVecs + lane;
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        // kBatch rows' loads in flight, then used in top-k order.
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
                load_y(a, __shfl_sync(0xffffffffu, my_row, k), v0, vec_per_row, raw[b]);
                nb = b + 1;
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (b >= nb) break;
                if (a.combine_mode == 0) {
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++) {
                        float f[8];
                        decode_y(a, raw[b][u], f);
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], wb[b], f[j]);
                    }
                } else {
                    // direct_send: every expert row travels back as bf16.
                    uint4* to = reinterpret_cast<uint4*>(dst_base + ((uint64_t)t * K + kb[b]) * (uint64_t)H * 2);
#pragma unroll
                    for (int u = 0; u < kVecPerLane; u++) {
                        if (v0 + u * kWarp >= vec_per_row) continue;
                        if (!a.fp8) {
                            to[v0 + u * kWarp] = raw[b][u].v;
                        } else {
                            float f[8];
                            decode_y(a, raw[b][u], f);
                            to[v0 + u * kWarp] = pack8(f);
                        }
                    }
                }
            }
        }
        if (a.combine_mode == 0) {
            uint4* to = reinterpret_cast<uint4*>(dst_base + ((uint64_t)a.rank * T + t) * (uint64_t)H * 2);
#pragma unroll
            for (int u = 0; u < kVecPerLane; u++)
                if (v0 + u * kWarp < vec_per_row) to[v0 + u * kWarp] = pack8(acc[u]);
        }
    }
    EPBENCH_TRACE(a, 1);
    signal_peers(a, a.off_combine_signal, (int)blockIdx.x * kWarps < R * T * slices, false);
    EPBENCH_TRACE(a, 2);

    // --- source side: wait for every rank, then one warp per token ---
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    if (threadIdx.x < R) {
        const uint64_t* arrived = at<const uint64_t>(self, a.off_combine_signal);
        if (!wait_arrivals(arrived + threadIdx.x, a.expect, deadline, a.err, kPhaseCombine, threadIdx.x)) failed = 1;
    }
    __syncthreads();
    if (failed) return;
    EPBENCH_TRACE(a, 3);
    const uint8_t* recv = at<const uint8_t>(self, a.off_combine_recv);
    for (int item = gwarp; item < T * slices; item += nwarps) {
        const int t = item / slices, slice = item % slices;
        int e = -1;
        float wk = 0.f;
        if (lane < K) {
            e = (int)a.topk_idx[(int64_t)t * K + lane];
            wk = a.topk_w[(int64_t)t * K + lane];
        }
        // Warp-uniform list of the terms of the sum, in the order they are added.
        const unsigned valid = __ballot_sync(0xffffffffu, e >= 0);
        int n = 0;
        int src_row[kMaxTopK];
        float src_w[kMaxTopK];
        if (a.combine_mode == 0) {
            // Ranks holding at least one selection, ascending; each sent one partial row.
            int prev = -1;
            for (;;) {
                int next = INT_MAX;
                for (unsigned m = valid; m; m &= m - 1) {
                    const int q = __shfl_sync(0xffffffffu, e, __ffs(m) - 1) / L;
                    if (q > prev && q < next) next = q;
                }
                if (next == INT_MAX) break;
                src_row[n] = next * T + t;
                src_w[n] = 1.f;
                n++;
                prev = next;
            }
        } else {
            for (unsigned m = valid; m; m &= m - 1) {
                const int k = __ffs(m) - 1;
                src_row[n] = t * K + k;
                src_w[n] = __shfl_sync(0xffffffffu, wk, k);
                n++;
            }
        }
        const int v0 = slice * kSliceVecs + lane;
        float acc[kVecPerLane][8];
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[u][j] = 0.f;
        for (int i0 = 0; i0 < n; i0 += kBatch) {
            uint4 in[kBatch][kVecPerLane];
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (i0 + b >= n) break;
                const uint4* from = reinterpret_cast<const uint4*>(recv + (uint64_t)src_row[i0 + b] * H * 2);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++)
                    if (v0 + u * kWarp < vec_per_row) in[b][u] = __ldcg(from + v0 + u * kWarp);
            }
#pragma unroll
            for (int b = 0; b < kBatch; b++) {
                if (i0 + b >= n) break;
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    float f[8];
                    unpack8(in[b][u], f);
                    if (a.combine_mode == 0) {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = __fadd_rn(acc[u][j], f[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[u][j] = mul_add_rn(acc[u][j], src_w[i0 + b], f[j]);
                    }
                }
            }
        }
        uint4* to = reinterpret_cast<uint4*>(a.out + (int64_t)t * H);
#pragma unroll
        for (int u = 0; u < kVecPerLane; u++)
            if (v0 + u * kWarp < vec_per_row) to[v0 + u * kWarp] = pack8(acc[u]);
    }
    EPBENCH_TRACE(a, 4);
}
