// Shared definitions of the low-latency dispatch and combine kernels.
// The argument block and the buffer layout are mirrored in kernels/args.go;
// docs/DESIGN.md is the contract both sides implement.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace epbench {

// One argument block for both kernels, passed by value.
struct LLArgs {
    // The fields in the order the kernels first read them, so that those read
    // before an entry's first barrier share few 64-byte lines of the constant
    // bank, whose first reads are serial misses (docs/PERF.md, kernels v42):
    // what every entry reads first, then the combine's own, then the rest.
    // (The parameters start at 0x210, in the line of driver words at 0x200.)
    // What the combine reads up to its first own item's routing lies in
    // 0x210..0x27f, two lines (err aside, read only when the variant check
    // fails): the four fields that name the variant and the flags share one
    // word, `modes`, to make room for grid and row_pos there (kernels v54).
    const uint64_t* peers;     // [R] base of every rank's symmetric buffer, mapped here (own included)
    const __nv_bfloat16* x;    // [T, H] token rows
    const int64_t* topk_idx;   // [T, K] selected experts, -1 masked
    const float* topk_w;       // [T, K] combine weights
    uint64_t* clock;           // null, or the device clock (kClockWords): epoch and expect come from there
    uint64_t* trace;           // null, or [grid, kTracePoints] globaltimer stamps of this call's phases
    uint64_t timeout_ns;       // bound of every spin-wait
    uint64_t jitter_ns;        // 0, or the most a kernel waits before it starts (--jitter-us; testing)
    int32_t rank;
    int32_t ranks;
    int32_t tokens;            // the most tokens per rank: the stride of every [R, T] area and output
    int32_t hidden;
    int32_t topk;
    int32_t local_experts;
    int32_t own_tokens;        // the tokens this rank dispatches, at most `tokens`
    int32_t modes;             // the variant's four fields and the flags in one word (kModes*; arg_* below read them)
    int32_t epoch;             // call number, tags dispatch messages so stale slots are ignored
    int32_t grid;              // the launch's blocks, gridDim.x, which the combine reads from here (docs/PERF.md, kernels v53)
    int* row_pos;              // [R, T, K] row of selection (s, t, k) inside its expert (internal)
    const __nv_bfloat16* y;    // [L, R*T, H] combine input (expert outputs)
    __nv_bfloat16* out;        // [T, H] combine output
    uint64_t off_inline_combine;   // inline: [max(T*K, R*T)] rows of H/4 units; lines: rows of lines ([R*T], direct_send [T*K])
    uint64_t off_inline_dispatch;  // inline and lines protocols: [2, R, T] slots of units (inline_slot_units)
    const int* tokens_of;      // [R] the tokens each rank dispatches (-l, -N), or null: every rank `tokens`
    int* active;               // -T: null, or [R] the mask of active ranks (1 active, 0 masked; bound_reached)
    uint64_t off_combine_recv;     // [max(T*K, R*T), H] combine rows
    uint64_t off_combine_signal;   // the combine's arrival counters, laid out as off_dispatch_signal's
    float* recv_scales;        // [L, R*T, H/128] FP8 scales (FP8 dispatch only)
    int* err;                  // error word (host-mapped): 0, (phase << 24) | (peer + 1) of the first wait that timed out, or kPhaseVariant << 24
    uint64_t expect;           // every source's arrival count once this call's release is in: the number of fenced calls
    __nv_bfloat16* recv_x;     // [L, R*T, H] dispatch output (FP8: E4M3 bytes [L, R*T, H])
    int* recv_count;           // [L]
    uint64_t off_dispatch_recv;    // [2, R, T] dispatch messages (header + row) per call parity, source rank and token
    int* src_info;             // [L, R*T] source token of each row
    int64_t* layout_range;     // [L, R] begin << 32 | count
    int* recv_topk_idx;        // rank-major: [R, T, K] each slot's top-k as local experts, -1 elsewhere
    float* recv_topk_w;        // rank-major: [R, T, K] each slot's top-k weights
    uint64_t off_dispatch_signal;  // symmetric offsets: uint64 [R] arrival counters per source rank, then the ticket counter of this rank's blocks
    uint64_t off_dispatch_counts;  // int2 [2, R, L]: {selections of each local expert, epoch} per call parity and source
    uint64_t off_inline_counts;    // inline and lines protocols: [2, R, L] units
};

// Combine modes (in LLArgs.modes; arg_combine_mode). Rank-major is a layout
// of the dispatch output, [R, T] slots (docs/DESIGN.md); its combine reduces
// per rank as rank_local_reduce does, each rank's partial being the slot's
// row.
constexpr int kModeRankLocalReduce = 0;
constexpr int kModeDirectSend = 1;
constexpr int kModeRankMajor = 2;

// Flags (in LLArgs.modes; arg_flags). kFlagPrescale (rank-major): combine
// scales each slot's row by the sum of the token's weights on this rank
// before it is sent, what ep_bench does outside its timed loop before a
// validated combine.
constexpr int kFlagPrescale = 1;

// LLArgs.modes: four bits each for the dispatch's signalling (kProto*), the
// combine's (kProto*), FP8 (0 or 1) and the combine mode (kMode*), from bit
// 0 up, then the flags (kFlag*) from bit 16; bits 24..31 stay zero
// (kModesZeroShift in ll.cu). One word where there were five, so that the
// fields the combine reads first fit two constant lines (kernels v54).
constexpr int kModesDispatchShift = 0;
constexpr int kModesCombineShift = 4;
constexpr int kModesFP8Shift = 8;
constexpr int kModesModeShift = 12;
constexpr int kModesFlagsShift = 16;
constexpr int kModesVariantMask = (1 << kModesFlagsShift) - 1;

// The variant part of a modes word.
__host__ __device__ constexpr int modes_word(int dispatch_proto, int combine_proto, int fp8, int combine_mode) {
    return dispatch_proto << kModesDispatchShift | combine_proto << kModesCombineShift | fp8 << kModesFP8Shift |
           combine_mode << kModesModeShift;
}

// A module is built for one variant of the operations (scripts/ptx.sh, one
// PTX file each): EPBENCH_DISPATCH_PROTO and EPBENCH_COMBINE_PROTO (kProto*),
// EPBENCH_FP8 (0 or 1) and EPBENCH_COMBINE_MODE (kMode*) fix the fields of
// LLArgs.modes of the same meaning (arg_* below), so the compiler leaves out
// every other variant's code. At a
// few tokens the kernels' time is largely instruction fetch, which grows with
// the code they run through (docs/PERF.md). A build without them (a compile
// check) takes the fields at run time.
#if defined(EPBENCH_DISPATCH_PROTO) != defined(EPBENCH_COMBINE_PROTO) || \
    defined(EPBENCH_DISPATCH_PROTO) != defined(EPBENCH_FP8) || defined(EPBENCH_DISPATCH_PROTO) != defined(EPBENCH_COMBINE_MODE)
#error "a variant build defines all of EPBENCH_DISPATCH_PROTO, EPBENCH_COMBINE_PROTO, EPBENCH_FP8 and EPBENCH_COMBINE_MODE"
#endif

// Signalling of an operation (the two proto fields of LLArgs.modes).
constexpr int kProtoFenced = 0;  // the data, one system-scope fence, one release per peer
constexpr int kProtoInline = 1;  // every 8 data bytes travel with the call's flag (no fence, no counters)
constexpr int kProtoLines = 2;   // 128-byte lines that carry the call's flag (below)

// The fields of LLArgs.modes. In a variant build the first four are the
// module's (variant_ok checked the call's against them), constants the
// compiler folds; otherwise they are read from the word.
__device__ __forceinline__ int modes_field(const LLArgs& a, int shift) { return a.modes >> shift & 15; }
#ifdef EPBENCH_DISPATCH_PROTO
__device__ __forceinline__ int arg_dispatch_proto(const LLArgs&) { return EPBENCH_DISPATCH_PROTO; }
__device__ __forceinline__ int arg_combine_proto(const LLArgs&) { return EPBENCH_COMBINE_PROTO; }
__device__ __forceinline__ bool arg_fp8(const LLArgs&) { return EPBENCH_FP8 != 0; }
__device__ __forceinline__ int arg_combine_mode(const LLArgs&) { return EPBENCH_COMBINE_MODE; }
#else
__device__ __forceinline__ int arg_dispatch_proto(const LLArgs& a) { return modes_field(a, kModesDispatchShift); }
__device__ __forceinline__ int arg_combine_proto(const LLArgs& a) { return modes_field(a, kModesCombineShift); }
__device__ __forceinline__ bool arg_fp8(const LLArgs& a) { return modes_field(a, kModesFP8Shift) != 0; }
__device__ __forceinline__ int arg_combine_mode(const LLArgs& a) { return modes_field(a, kModesModeShift); }
#endif
__device__ __forceinline__ int arg_flags(const LLArgs& a) { return a.modes >> kModesFlagsShift; }

// The device clock, for calls whose arguments never change (captured in a
// CUDA graph): two records of {epoch, dispatch expect, combine expect}, the
// first read by dispatch, the second by combine. Each kernel reads only its
// own record and one thread writes the other kernel's, so no block can see
// a record change under it, and the next kernel (stream order) sees the
// write. Dispatch makes the next epoch; combine uses it.
constexpr int kClockWords = 8;
constexpr int kClockCombine = 4;

constexpr int kTracePoints = 8;

// Records phase boundary i of this block, as seen by thread `tid`, when
// tracing is on (a development aid: EPBENCH_TRACE=1; one global store per
// block per point, otherwise skipped by a uniform branch).
#define EPBENCH_TRACE_BY(a, i, tid)                                                          \
    do {                                                                                       \
        if ((a).trace != nullptr && threadIdx.x == (tid)) (a).trace[blockIdx.x * kTracePoints + (i)] = global_timer(); \
    } while (0)
#define EPBENCH_TRACE(a, i) EPBENCH_TRACE_BY(a, i, 0)

constexpr int kPhaseDispatch = 1;
constexpr int kPhaseCombine = 2;
constexpr int kPhaseVariant = 3;  // the call's arguments are not the module's variant (error word: 3 << 24)
constexpr int kPhaseStale = 4;    // a peer's data of another call where this call's must be: (4 << 24) | (peer + 1)

// Who owns a dispatch slot (docs/DESIGN.md, "Calls back to back"): call n
// writes, and reads, the half of every dispatch area that its parity names,
// so a rank that runs ahead into call n+1 writes where its peers finished
// reading in call n-1. A build with EPBENCH_BREAK defined breaks one
// ordering step on purpose, for the tests that show validation catches it
// (never embedded): 1 the slots are not alternated, 2 the fenced release
// has no fence, 3 a flag is stored before its data.
#ifndef EPBENCH_BREAK
#define EPBENCH_BREAK 0
#endif
constexpr int kBreakNoParity = 1, kBreakNoFence = 2, kBreakFlagFirst = 3;
constexpr int kMaxTopK = 32;
constexpr int kMaxRanks = 256;     // config.MaxRanks
constexpr int kWarp = 32;

constexpr int kScaleBlock = 128;  // FP8 channels per scale

// Dispatch message: header then the token row.
//   int32 epoch, int32 token, int32 pad[2], int32 idx[K], float w[K], int32 pos[K], padded to 128 bytes
//   (so the row, and every slot, starts on a 128-byte line);
//   pos[k] is the row of selection k among the rows its expert receives from this source
//   (set for the selections on the destination rank); rank-major: the token's place among
//   the tokens this source sends to the destination (ascending), the same in every selection;
//   BF16: H bf16; FP8: H E4M3 bytes then H/128 float scales.
// Receive slots are sized for the larger, BF16, message.
__host__ __device__ inline int header_bytes(int topk) { return (16 + 12 * topk + 127) / 128 * 128; }
__host__ __device__ inline int message_bytes(int topk, int hidden) { return header_bytes(topk) + 2 * hidden; }
__host__ __device__ inline int row_bytes(int hidden, bool fp8) { return fp8 ? hidden : 2 * hidden; }

// Inline protocol: data travels in 16-byte units {d0, flag, d1, flag}; each
// 8-byte half {data, flag} is one 64-bit element of the store and of the
// load (single-copy atomic), so a reader that sees the call's flag in both
// halves has the unit's 8 data bytes. No fence and no arrival counter
// are needed, at twice the bytes on the wire: the small operations use it.
// A dispatch slot: unit 0 {present, -}, units 1+k {id_k, row_k}, units 1+K+k
// {weight_k, -}, then from unit inline_payload_unit(K) the row (8 bytes per
// unit; FP8: H/8 units of E4M3, then one unit per scale).
__host__ __device__ inline int inline_payload_unit(int topk) { return (1 + 2 * topk + 7) / 8 * 8; }
__host__ __device__ inline int inline_slot_units(int topk, int hidden) {
    return inline_payload_unit(topk) + hidden / 4;  // BF16 row; FP8 (H/8 + H/128) is smaller
}
__host__ __device__ inline int inline_row_units(int hidden) { return hidden / 4; }  // a bf16 combine row

// Lines protocol (inline_proto or combine_proto == kProtoLines): a message travels in
// 128-byte lines, each stored by 8 lanes in one warp instruction: parts 0-6
// carry 7 x 16 data bytes, part 7 the call's flag in its second word. NVLink
// delivers such a line whole, so a reader that sees the flag has the line's
// data (the property NCCL's LL128 protocol relies on): no fence and no
// arrival counter, at 1/7 more bytes, and every data part lands 16-byte
// aligned in the rows. A message is the header lines (ints {present, token,
// id[K], w[K], row[K]}, 28 per line) then the row lines (BF16: H/4 words of
// 8 bytes; FP8: H/8 words of E4M3, then the scales, two per word). It uses
// the inline dispatch slots, which are never smaller. A combine row travels
// the same way, the row lines alone, in the inline combine area: one row of
// lines per (source rank, token) for rank_local_reduce's partials, per
// (token, selection) for direct_send's expert rows.
constexpr int kLineWords = 14;  // data words (8 bytes) per line
__host__ __device__ inline int lines_header_lines(int topk) { return (2 + 3 * topk + 2 * kLineWords - 1) / (2 * kLineWords); }
__host__ __device__ inline int lines_row_words(int hidden, bool fp8) {
    return fp8 ? hidden / 8 + (hidden / 128 + 1) / 2 : hidden / 4;
}
__host__ __device__ inline int lines_row_lines(int hidden, bool fp8) {
    return (lines_row_words(hidden, fp8) + kLineWords - 1) / kLineWords;
}
__host__ __device__ inline int lines_slot_bytes(int topk, int hidden) {
    return 128 * (lines_header_lines(topk) + lines_row_lines(hidden, false));
}

// The half of the dispatch areas call `epoch` owns (0 or 1).
__device__ __forceinline__ int call_parity(int32_t epoch) { return EPBENCH_BREAK == kBreakNoParity ? 0 : epoch & 1; }

__device__ __forceinline__ uint64_t global_timer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void red_release_sys_add(uint64_t* p, uint64_t v) {
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ int ld_volatile(const int* p) { return *(const volatile int*)p; }

// The bound of every poll loop, which checks it every 256 polls (the error
// word lives in host-mapped memory, the host reads it without a copy): true
// when the loop must give up, because another block has recorded an error
// or the deadline (globaltimer ns) has passed; then (phase, peer) is
// recorded in the error word. With a mask of active ranks (elastic EP, -T;
// docs/DESIGN.md) a late peer is masked instead, and the operation goes on
// without it (its caller sees masked(active, peer)); a wait on a peer
// masked before gives up at its first check.
__device__ __forceinline__ bool bound_reached(uint64_t deadline, int* err, int* active, int phase, int peer) {
    if (ld_volatile(err) != 0) return true;
    if (active != nullptr && ld_volatile(active + peer) == 0) return true;
    if (global_timer() <= deadline) return false;
    if (active != nullptr) {
        atomicExch(active + peer, 0);
        return true;
    }
    atomicCAS(err, 0, (phase << 24) | (peer + 1));
    return true;
}

// Whether peer is masked in the mask of active ranks (never without one).
__device__ __forceinline__ bool masked(const int* active, int peer) {
    return active != nullptr && ld_volatile(active + peer) == 0;
}

// Waits until *counter >= target, bounded as bound_reached says. Returns
// false when it gave up.
__device__ inline bool wait_arrivals(const uint64_t* counter, uint64_t target, uint64_t deadline, int* err,
                                     int* active, int phase, int peer) {
    for (uint32_t spins = 1; ld_acquire_sys(counter) < target; spins++)
        if ((spins & 255) == 0 && bound_reached(deadline, err, active, phase, peer)) return false;
    return true;
}

template <typename T>
__device__ __forceinline__ T* at(uint64_t base, uint64_t off) {
    return reinterpret_cast<T*>(base + off);
}

// fp32 arithmetic exactly as the CPU reference does it: every multiply and
// every add rounded on its own (no fused multiply-add).
__device__ __forceinline__ float mul_add_rn(float acc, float w, float v) { return __fadd_rn(acc, __fmul_rn(w, v)); }

// A bf16 is the upper half of the fp32 of the same value, so each channel
// takes one instruction: a shift for the lower bf16 of a word, a mask for
// the upper (__bfloat1622float2 gave the same values in three
// instructions a pair).
__device__ __forceinline__ void unpack8(const uint4& u, float f[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ uint4 pack8(const float f[8]) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return u;
}

// E4M3 from fp32, round to nearest even, finite values saturated to ±448
// (cvt.rn.satfinite.e4m3x2.f32): two at a time, lo in the low byte.
__device__ __forceinline__ uint16_t to_e4m3x2(float lo, float hi) {
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float from_e4m3(uint8_t q) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(q, __NV_E4M3);
    return __half2float(__half(h));
}

// The identity expert's output for 8 FP8 channels: bf16(fp32(q * scale)).
__device__ __forceinline__ void dequant8(const uint2& q, float scale, float f[8]) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&q);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = __bfloat162float(__float2bfloat16_rn(__fmul_rn(from_e4m3(b[i]), scale)));
}

}  // namespace epbench
