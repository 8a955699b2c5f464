// Micro-benchmarks of the limits the LL kernels work against (docs/PERF.md):
// SM-driven NVLink store bandwidth (one way and both ways), a local device
// copy, a cross-GPU flag round trip with release/acquire at system scope, an
// empty kernel between two events, the gap the host's synchronisation leaves
// between two operations, a burst to the peer followed by its release, and
// the local path's floors (write-only and read-only rates of the GPU's own
// memory, plain and TMA bulk stores; with the argument `pair`, only the
// local pair's kernels, for a profiler). With the argument `icache`, only
// what a launch pays for code another kernel's code evicted; with `balance`,
// only whether the blocks that end late are late for their SM or their
// data; with `floor`, only the smallest correct one-rank dispatch and
// combine of the defaults' shape, checked, then run for a profiler. Needs
// two GPUs with P2P for the NVLink parts. Build: nvcc -O3 -arch=sm_90 -o
// microbench scripts/microbench.cu
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_fp8.h>

// icache and balance keep per-block (per-SM) records in arrays of this size;
// main refuses a GPU with more SMs.
constexpr int kMaxSMs = 1024;

#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

__global__ void store16(uint4* __restrict__ dst, size_t n) {
    uint4 v = make_uint4(threadIdx.x, blockIdx.x, 1, 2);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = v;
}

__global__ void copy16(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = src[i];
}

__global__ void empty() {}

// Reads n vectors and keeps nothing (the sum goes out only if it is a value
// it cannot be), so the loads are all that is timed.
__global__ void read16(const uint4* __restrict__ src, size_t n, uint4* sink) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(src + i);
        acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
    }
    if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) sink[threadIdx.x] = acc;
}

// Writes n bytes (a multiple of chunk, chunk of 16) with TMA bulk copies
// from a shared-memory chunk: one thread per block issues them, chunks
// spread over the grid.
__global__ void tma_store(uint8_t* dst, size_t n, unsigned chunk) {
    extern __shared__ __align__(128) uint8_t buf[];
    for (unsigned i = threadIdx.x; i < chunk / 16; i += blockDim.x)
        reinterpret_cast<uint4*>(buf)[i] = make_uint4(i, blockIdx.x, 1, 2);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x != 0) return;
    const unsigned sbuf = (unsigned)__cvta_generic_to_shared(buf);
    for (size_t off = (size_t)blockIdx.x * chunk; off < n; off += (size_t)gridDim.x * chunk)
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + off), "r"(sbuf), "r"(chunk)
                     : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// The local path's pair as the benchmark runs it at one rank with the
// defaults (`microbench pair`, timed per kernel by a profiler): the rows
// written (dispatch), the host waits, the same rows read back (combine).
// pair_write and pair_read move the bytes only; the _dep forms first load
// one routing word per thread, on which every store's data (write) or every
// load's address (read) depends, as a dispatch's and a combine's do.
__global__ void pair_write(uint4* __restrict__ dst, size_t n) {
    const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 1, 2);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = v;
}
__global__ void pair_write_dep(uint4* __restrict__ dst, size_t n, const int64_t* __restrict__ route) {
    const uint4 v = make_uint4((unsigned)__ldg(route + threadIdx.x), blockIdx.x, 1, 2);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = v;
}
// Four independent loads in flight per thread per step.
__device__ __forceinline__ void read4(const uint4* __restrict__ src, size_t n, size_t first, uint4* sink) {
    const size_t step = (size_t)gridDim.x * blockDim.x;
    uint4 acc = make_uint4(0, 0, 0, 0);
    size_t i = first;
    for (; i + 3 * step < n; i += 4 * step) {
        const uint4 a = __ldg(src + i), b = __ldg(src + i + step), c = __ldg(src + i + 2 * step), d = __ldg(src + i + 3 * step);
        acc.x ^= a.x ^ b.x ^ c.x ^ d.x, acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
        acc.z ^= a.z ^ b.z ^ c.z ^ d.z, acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
    }
    for (; i < n; i += step) {
        const uint4 a = __ldg(src + i);
        acc.x ^= a.x, acc.y ^= a.y, acc.z ^= a.z, acc.w ^= a.w;
    }
    if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) sink[threadIdx.x] = acc;
}
__global__ void pair_read(const uint4* __restrict__ src, size_t n, uint4* sink) {
    read4(src, n, blockIdx.x * (size_t)blockDim.x + threadIdx.x, sink);
}
__global__ void pair_read_dep(const uint4* __restrict__ src, size_t n, uint4* sink, const int64_t* __restrict__ route) {
    read4(src, n, blockIdx.x * (size_t)blockDim.x + threadIdx.x + (size_t)__ldg(route + threadIdx.x), sink);
}

__device__ __forceinline__ void st_release(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_acquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// ping: writes i to the peer's flag, waits for the peer to echo it back.
__global__ void ping(uint64_t* peer_flag, const uint64_t* my_flag, int rounds) {
    for (int i = 1; i <= rounds; i++) {
        st_release(peer_flag, i);
        while (ld_acquire(my_flag) != (uint64_t)i) {}
    }
}
__global__ void pong(uint64_t* peer_flag, const uint64_t* my_flag, int rounds) {
    for (int i = 1; i <= rounds; i++) {
        while (ld_acquire(my_flag) != (uint64_t)i) {}
        st_release(peer_flag, i);
    }
}

__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// A burst of `per` vectors per block to the peer, then a release, as the LL
// kernels do it: every block takes a ticket (acq_rel, device scope) once its
// stores are issued, the last one makes one system-scope fence and raises the
// peer's flag; the peer (echo) raises ours back. With fence == 0 the last
// block raises the flag without the fence, and the peer instead polls the
// data itself (the last vector each writing thread stores carries the round).
// times[round] = {fence done, ack seen} in ns after the last block started.
__global__ void burst(uint4* peer_data, size_t per, uint64_t* peer_flag, const uint64_t* my_flag,
                      unsigned long long* tickets, int fence, uint64_t round, uint64_t* times) {
    const uint64_t t0 = gtimer();
    const uint4 v = make_uint4((unsigned)round, blockIdx.x, threadIdx.x, (unsigned)round);
    uint4* p = peer_data + blockIdx.x * per;
    for (size_t i = threadIdx.x; i < per; i += blockDim.x) p[i] = v;
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned long long t;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(t) : "l"(tickets) : "memory");
    if (t != gridDim.x - 1) return;
    *reinterpret_cast<volatile unsigned long long*>(tickets) = 0;
    if (fence) __threadfence_system();
    const uint64_t tf = gtimer();
    st_release(peer_flag, round);
    while (ld_acquire(my_flag) != round) {
    }
    times[2 * round] = tf - t0;
    times[2 * round + 1] = gtimer() - t0;
}

// The peer's side of burst: waits for the flag (fence) or for the data
// (one thread per vector of the last 512 of each block's share), then
// raises the sender's flag.
__global__ void echo(const uint4* data, size_t per, const uint64_t* my_flag, uint64_t* peer_flag,
                     unsigned long long* tickets, int fence, uint64_t round) {
    if (fence) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            while (ld_acquire(my_flag) != round) {
            }
            st_release(peer_flag, round);
        }
        return;
    }
    const size_t last = per >= blockDim.x ? per - blockDim.x : 0;
    if (last + threadIdx.x < per) {
        const uint4* q = data + blockIdx.x * per + last + threadIdx.x;
        for (;;) {
            uint4 w;
            asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                         : "l"(q)
                         : "memory");
            if (w.x == (unsigned)round && w.w == (unsigned)round) break;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned long long t;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(t) : "l"(tickets) : "memory");
    if (t != gridDim.x - 1) return;
    *reinterpret_cast<volatile unsigned long long*>(tickets) = 0;
    st_release(peer_flag, round);
}

// Instruction fetch (`microbench icache`): straight-line code of kSteps
// unrolled steps (about ten instructions each, constants unique to the seed S,
// so two seeds are two bodies of code), run `reps` (at most 3) times in one
// launch, the same code each time; thread 0 of each block records the SM clock
// before each pass and after the last. A first pass slower than the second is
// the fetch of cold code; whether it is cold at the next launch of the same
// kernel, or after another kernel, tells whether the SMs' instruction caches
// keep a kernel's code from one launch to the next.
template <int kSteps, uint32_t S>
__device__ __forceinline__ void code_body(long long* clocks, int reps, uint32_t seed) {
    uint32_t a0 = seed ^ threadIdx.x, a1 = a0 * 3u, a2 = a0 * 5u, a3 = a0 * 7u;
    long long* c = clocks + blockIdx.x * 4;
#pragma unroll 1
    for (int r = 0; r < reps && r < 3; r++) {
        if (threadIdx.x == 0) c[r] = clock64();
#pragma unroll
        for (int i = 0; i < kSteps; i++) {
            a0 = (a0 ^ (a0 >> 13)) * 0x9E3779B1u + (S * 0x01000193u + (uint32_t)i * 7919u);
            a1 = (a1 ^ (a1 << 7)) + (a0 ^ (S * 31u + (uint32_t)i));
            a2 = __funnelshift_l(a2, a1, (i % 31) + 1) ^ ((uint32_t)i * 104729u + S);
            a3 += a2 * (S | 1u);
        }
        __syncwarp();
    }
    if (threadIdx.x == 0) c[3] = clock64();
    if ((a0 ^ a1 ^ a2 ^ a3) == 0x9E3779B9u) clocks[gridDim.x * 4] = a3;  // keeps the chains live
}
template <int kSteps, uint32_t S>
__global__ void __launch_bounds__(128, 1) code_run(long long* clocks, int reps, uint32_t seed) {
    code_body<kSteps, S>(clocks, reps, seed);
}
// Both bodies in one kernel, `which` (1 or 2) choosing one per launch: as
// two kernels that alternate would be, made one entry.
template <int kSteps>
__global__ void __launch_bounds__(128, 1) code_two(long long* clocks, int reps, uint32_t seed, int which) {
    if (which == 1) code_body<kSteps, 1>(clocks, reps, seed);
    else code_body<kSteps, 2>(clocks, reps, seed);
}

// Which blocks end late (`microbench balance`): every block writes (or
// reads) its own region of 8 rows of 14336 bytes, as a one-rank dispatch
// block writes its token's rows (a combine block reads them), region
// (block + shift) % grid; thread 0 records its SM, when the block started,
// and when its last store was issued (its last load returned). Shifting the
// regions tells whether a late block is late for its SM or for its data.
__global__ void __launch_bounds__(512, 1) region_rw(uint4* buf, size_t per, int shift, int read, uint64_t* rec) {
    const uint64_t t0 = gtimer();
    uint4* r = buf + (size_t)((blockIdx.x + shift) % gridDim.x) * per;
    uint4 acc = make_uint4(blockIdx.x, 0, 0, 0);
    if (read) {
        for (size_t i = threadIdx.x; i < per; i += blockDim.x) {
            const uint4 v = __ldcg(r + i);
            acc.x ^= v.x;
            acc.y += v.y;
        }
    } else {
        for (size_t i = threadIdx.x; i < per; i += blockDim.x) r[i] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        rec[3 * blockIdx.x] = sm;
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = gtimer();
    }
    if (acc.x == 0xFFFFFFFFu && acc.y == 7u) buf[0] = acc;  // keeps the loads
}

// One launch's time between events a and b on stream s (ms).
template <typename F>
static float event_ms(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, F launch) {
    CK(cudaEventRecord(a, s));
    launch();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

static float time_kernel_ms(cudaStream_t s, void (*launch)(cudaStream_t), int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    launch(s);
    CK(cudaStreamSynchronize(s));
    const float ms = event_ms(s, a, b, [&] {
        for (int i = 0; i < reps; i++) launch(s);
    });
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return ms / reps;
}

static uint4* g_dst;
static uint4* g_src;
static size_t g_n;
static int g_blocks;

// `microbench pair`: the local pair's kernels only, each 200 times in
// turn with a host wait between them, for a profiler to time (docs/PERF.md).
static int pair(int sms) {
    const size_t n = 1015ull * 14336 / sizeof(uint4);  // the default dispatch's rows at one rank
    uint4 *rows, *sink;
    int64_t* route;
    CK(cudaMalloc(&rows, n * sizeof(uint4)));
    CK(cudaMalloc(&sink, 512 * sizeof(uint4)));
    CK(cudaMalloc(&route, 512 * sizeof(int64_t)));
    CK(cudaMemset(route, 0, 512 * sizeof(int64_t)));
    for (int r = 0; r < 200; r++) {
        pair_write<<<sms, 512>>>(rows, n);
        CK(cudaDeviceSynchronize());
        pair_read<<<sms, 512>>>(rows, n, sink);
        CK(cudaDeviceSynchronize());
        pair_read<<<2 * sms, 512>>>(rows, n, sink);
        CK(cudaDeviceSynchronize());
        pair_write_dep<<<sms, 512>>>(rows, n, route);
        CK(cudaDeviceSynchronize());
        pair_read_dep<<<sms, 512>>>(rows, n, sink, route);
        CK(cudaDeviceSynchronize());
        pair_read_dep<<<2 * sms, 512>>>(rows, n, sink, route);
        CK(cudaDeviceSynchronize());
        empty<<<sms, 512>>>();
        CK(cudaDeviceSynchronize());
    }
    printf("pair: %zu bytes written and read back, 200 times\n", n * sizeof(uint4));
    return 0;
}

// --- `microbench floor`: the smallest correct one-rank dispatch and combine
// of the defaults' shape, for a profiler to time beside the LL kernels
// (docs/PERF.md). They produce what the CPU reference defines at one rank,
// and main checks them bit for bit before timing: the dispatch writes token
// t's row to recv row e * T + (how many tokens before t select e) for each
// selection e (-1: none), row_pos[t * K + k] = that row, and recv_count[e];
// FP8 writes E4M3 rows (128-channel blocks, amax = max(max|x|, 1e-4), q =
// e4m3(x * (448 / amax)), scale = amax / 448) with their scales. The combine
// writes out[t] = bf16(sum over k of w_k * row_k), fp32 steps in top-k order
// (rank_local_reduce's partial). One block per token, every load a block
// needs issued at its first instruction, one barrier before the counting
// and one after; no peers, no flags, no arguments beyond the pointers.
constexpr int kFloorThreads = 512;
constexpr int kFloorIds = 4;   // routing entries per thread: T * K <= 2048
constexpr int kFloorVecs = 2;  // 16-byte vectors of a row per thread: H <= 8192
constexpr int kFloorMaxK = 32;

__device__ __host__ __forceinline__ uint16_t bf16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __host__ __forceinline__ float bf16_f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// kMode, for splitting its time (main checks each against its own rows):
// 0 the dispatch above; 1 rows at e * T + t, not counted (the same spread
// over recv, no routing but the token's own, no barrier); 2 rows at t * K +
// k (14.55 MB in one piece), not counted; 3 as 2, but after the count and its
// barriers, which the rows' places then depend on without changing them; 4
// the dispatch above with its rows written by TMA bulk copies: the row staged
// in shared memory before the count's second barrier, then one
// cp.async.bulk of the whole row per selection, each from its own lane; 5 the
// dispatch above with each warp counting by itself (every warp reads the
// routing of the earlier tokens, 16 bytes a lane at a time, and sums its
// matches by warp reductions), so no barrier comes before the stores; the last
// block counts recv_count after its stores, between barriers of its own; 6 as
// 3, but each block reads the routing from a copy of its own (topk + t * T *
// K), so no two SMs ask for the same lines; 7 no count: each selection's row
// takes the next free place of its expert from a global atomic on
// recv_count (zero before the launch), so an expert's rows come in the order
// the atomics happened, which the reference's validation accepts
// (src_info says whose each row is), and recv_count is that counter; 8 the
// dispatch above counting with one shared atomic per match (each thread's
// entries against the 8 experts held in registers), without warp
// reductions.
template <bool kFP8, int kMode = 0>
__global__ void __launch_bounds__(kFloorThreads, 1)
    floor_dispatch(const int64_t* __restrict__ topk, const uint4* __restrict__ x, uint8_t* __restrict__ recv,
                   float* __restrict__ recv_scales, int* __restrict__ row_pos, int* __restrict__ recv_count, int T,
                   int H, int K, int E) {
    __shared__ int before[kFloorMaxK];
    __shared__ int total[1024];
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
    if (t >= T) return;
    const bool counted = kMode == 0 || kMode == 3 || kMode == 4 || kMode == 6 || kMode == 8;
    if (kMode == 6) topk += (int64_t)t * T * K;
    __shared__ __align__(128) uint4 stage[kMode == 4 ? kFloorVecs * kFloorThreads : 1];
    // The last block also counts every expert's rows (recv_count).
    const bool last = (kMode == 0 || kMode == 4 || kMode == 5 || kMode == 8) && t == T - 1;
    const int n = counted ? (t + 1) * K : 0;  // the entries this block reads: tokens 0..t
    int64_t id[kFloorIds];
#pragma unroll
    for (int j = 0; j < kFloorIds; j++) id[j] = tid + j * kFloorThreads < n ? __ldg(topk + tid + j * kFloorThreads) : -1;
    const int64_t mine = lane < K ? __ldg(topk + (int64_t)t * K + lane) : -1;  // every warp holds the token's
    const int nv = H / 8;
    uint4 v[kFloorVecs];
#pragma unroll
    for (int j = 0; j < kFloorVecs; j++) {
        const int i = tid + j * kFloorThreads;
        v[j] = i < nv ? __ldg(x + (int64_t)t * nv + i) : make_uint4(0, 0, 0, 0);
    }
    if (tid < K) before[tid] = 0;
    for (int e = tid; last && e < E; e += kFloorThreads) total[e] = 0;
    if (counted) __syncthreads();
    // How many earlier tokens select each of this token's experts: each
    // thread's entries against the K experts, summed over the warp (kMode 8:
    // one shared atomic per match instead).
    if constexpr (kMode == 8) {
        int64_t mk[8];
#pragma unroll
        for (int k = 0; k < 8; k++) mk[k] = __shfl_sync(0xffffffffu, mine, k);
#pragma unroll
        for (int j = 0; j < kFloorIds; j++)
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (k < K && tid + j * kFloorThreads < t * K && id[j] == mk[k]) atomicAdd(&before[k], 1);
    }
    for (int k = 0; counted && kMode != 8 && k < K; k++) {
        const int64_t ek = __shfl_sync(0xffffffffu, mine, k);
        int c = 0;
#pragma unroll
        for (int j = 0; j < kFloorIds; j++) c += tid + j * kFloorThreads < t * K && id[j] == ek;
        c = __reduce_add_sync(0xffffffffu, c);
        if (lane == 0 && c != 0) atomicAdd(&before[k], c);
    }
    if (last) {
#pragma unroll
        for (int j = 0; j < kFloorIds; j++)
            if (id[j] >= 0) atomicAdd(&total[id[j]], 1);
    }
    // FP8: each row's 128-channel blocks quantized while the counts settle
    // (16 lanes hold one block).
    uint2 q[kFloorVecs];
    float scale[kFloorVecs];
    if (kFP8) {
#pragma unroll
        for (int j = 0; j < kFloorVecs; j++) {
            const uint32_t w[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
            float f[8], amax = 0.f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                f[2 * i] = bf16_f((uint16_t)(w[i] & 0xffffu));
                f[2 * i + 1] = bf16_f((uint16_t)(w[i] >> 16));
                amax = fmaxf(amax, fmaxf(fabsf(f[2 * i]), fabsf(f[2 * i + 1])));
            }
#pragma unroll
            for (int d = 8; d >= 1; d >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
            amax = fmaxf(amax, 1e-4f);
            const float inv = __fdiv_rn(448.f, amax);
            uint16_t p[4];
#pragma unroll
            for (int i = 0; i < 4; i++) p[i] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(f[2 * i], inv), __fmul_rn(f[2 * i + 1], inv)), __NV_SATFINITE, __NV_E4M3);
            q[j] = make_uint2(p[0] | (uint32_t)p[1] << 16, p[2] | (uint32_t)p[3] << 16);
            scale[j] = __fdiv_rn(amax, 448.f);
        }
    }
    __shared__ int slot[kFloorMaxK];  // kMode 7
    if constexpr (kMode == 7) {
        if (tid < K) slot[tid] = mine >= 0 ? atomicAdd(&recv_count[mine], 1) : -1;
        __syncthreads();
    }
    int warp_before = 0;  // kMode 5: lane k's count for selection k
    if constexpr (kMode == 5) {
        int64_t mk[8];
        int c[8] = {};
#pragma unroll
        for (int k = 0; k < 8; k++) mk[k] = __shfl_sync(0xffffffffu, mine, k);
        const int nb = t * K;  // even: K is
#pragma unroll 4
        for (int i = 2 * lane; i < nb; i += 64) {
            const longlong2 d = __ldg(reinterpret_cast<const longlong2*>(topk + i));
#pragma unroll
            for (int k = 0; k < 8; k++) c[k] += (d.x == mk[k]) + (d.y == mk[k]);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            c[k] = __reduce_add_sync(0xffffffffu, c[k]);
            if (lane == k) warp_before = c[k];
        }
    }
    if (kMode == 4) {
#pragma unroll
        for (int j = 0; j < kFloorVecs; j++)
            if (tid + j * kFloorThreads < nv) stage[tid + j * kFloorThreads] = v[j];
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    if (counted) __syncthreads();
    const int e = lane < K ? (int)mine : -1;
    // The reference's place (kModes 0, 4 and 8), or the probe's own.
    const int pos = e < 0                       ? -1
                    : kMode == 1                ? e * T + t
                    : kMode == 2                ? t * K + lane
                    : kMode == 3 || kMode == 6  ? t * K + lane + (before[lane] >> 30)  // before < 2^30: the same place
                    : kMode == 5                ? e * T + warp_before
                    : kMode == 7                ? e * T + slot[lane]
                                                : e * T + before[lane];
    if (tid < K) row_pos[t * K + tid] = pos;
    if (last && kMode != 5)
        for (int i = tid; i < E; i += kFloorThreads) recv_count[i] = total[i];
    if constexpr (kMode == 4) {
        if (tid < K && pos >= 0) {
            const unsigned sbuf = (unsigned)__cvta_generic_to_shared(stage);
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(recv + (int64_t)pos * H * 2),
                         "r"(sbuf), "r"(H * 2)
                         : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
    }
    for (int k = 0; kMode != 4 && k < K; k++) {
        const int p = __shfl_sync(0xffffffffu, pos, k);
        if (p < 0) continue;
#pragma unroll
        for (int j = 0; j < kFloorVecs; j++) {
            const int i = tid + j * kFloorThreads;
            if (i >= nv) continue;
            if (kFP8) {
                reinterpret_cast<uint2*>(recv + (int64_t)p * H)[i] = q[j];
                if ((i & 15) == 0) recv_scales[(int64_t)p * (H / 128) + i / 16] = scale[j];
            } else {
                reinterpret_cast<uint4*>(recv + (int64_t)p * H * 2)[i] = v[j];
            }
        }
    }
    if (kMode == 5 && last) {  // the whole block, so its barriers are block-uniform
        for (int e2 = tid; e2 < E; e2 += kFloorThreads) total[e2] = 0;
        __syncthreads();
        for (int i = tid; i < T * K; i += kFloorThreads) {
            const int64_t e2 = __ldg(topk + i);
            if (e2 >= 0) atomicAdd(&total[e2], 1);
        }
        __syncthreads();
        for (int e2 = tid; e2 < E; e2 += kFloorThreads) recv_count[e2] = total[e2];
    }
}

// kTwoBatches (a probe): the last four rows' loads issued only once the first
// four rows have arrived, two round trips as the LL combine takes them: their
// places depend on the first rows' data through salt, 0 at run time, which
// the compiler cannot fold away.
template <bool kTwoBatches = false>
__global__ void __launch_bounds__(kFloorThreads, 1)
    floor_combine(const uint4* __restrict__ rows, const int* __restrict__ row_pos, const float* __restrict__ topk_w,
                  uint4* __restrict__ out, int T, int H, int K, unsigned salt = 0) {
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
    if (t >= T) return;
    const int pos = lane < K ? __ldg(row_pos + t * K + lane) : -1;
    const float w = lane < K ? __ldg(topk_w + t * K + lane) : 0.f;
    const int nv = H / 8;
    float acc[kFloorVecs][8] = {};
    // All rows' loads in flight before the sums (K <= 8 here: 16 vectors).
    uint4 r[8][kFloorVecs];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int p = __shfl_sync(0xffffffffu, pos, k);
        if (kTwoBatches && k >= 4) {
            unsigned dep = 0;
#pragma unroll
            for (int b = 0; b < 4; b++) dep ^= r[b][0].x ^ r[b][1].x;
            p += (int)(dep & salt);
        }
#pragma unroll
        for (int j = 0; j < kFloorVecs; j++) {
            const int i = tid + j * kFloorThreads;
            r[k][j] = k < K && p >= 0 && i < nv ? __ldg(rows + (int64_t)p * nv + i) : make_uint4(0, 0, 0, 0);
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const int p = __shfl_sync(0xffffffffu, pos, k);
        const float wk = __shfl_sync(0xffffffffu, w, k);
        if (k >= K || p < 0) continue;
#pragma unroll
        for (int j = 0; j < kFloorVecs; j++) {
            const uint32_t u[4] = {r[k][j].x, r[k][j].y, r[k][j].z, r[k][j].w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                acc[j][2 * i] = __fadd_rn(acc[j][2 * i], __fmul_rn(wk, bf16_f((uint16_t)(u[i] & 0xffffu))));
                acc[j][2 * i + 1] = __fadd_rn(acc[j][2 * i + 1], __fmul_rn(wk, bf16_f((uint16_t)(u[i] >> 16))));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < kFloorVecs; j++) {
        const int i = tid + j * kFloorThreads;
        if (i >= nv) continue;
        uint32_t o[4];
#pragma unroll
        for (int c = 0; c < 4; c++) o[c] = bf16_rn(acc[j][2 * c]) | (uint32_t)bf16_rn(acc[j][2 * c + 1]) << 16;
        out[(int64_t)t * nv + i] = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

// E4M3 of f, round to nearest even, finite values saturated to ±448 (the
// host's check of floor_dispatch<true>).
static uint8_t host_e4m3(float f) {
    const uint8_t sign = signbit(f) ? 0x80 : 0;
    const float a = fabsf(f);
    if (a >= 448.f) return sign | 0x7e;
    // The finite magnitudes by code, 0x00..0x7e, ascending: lo the largest
    // at or below a, then the nearer of lo and lo + 1 (a tie: the even code,
    // whose mantissa is even).
    auto val = [](int c) {
        const int ex = c >> 3, m = c & 7;
        return ex == 0 ? ldexpf((float)m, -9) : ldexpf(1.f + m / 8.f, ex - 7);
    };
    int lo = 0, hi = 0x7e;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (val(mid) <= a) lo = mid;
        else hi = mid;
    }
    if (val(hi) <= a) lo = hi;
    if (lo == 0x7e) return sign | 0x7e;
    const float dl = a - val(lo), dh = val(lo + 1) - a;
    const int c = dl < dh ? lo : dh < dl ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    return sign | (uint8_t)c;
}

// Launches probe kMode of the BF16 floor dispatch (probe 7's counters zeroed
// first, by a memset: not a kernel, so the profiler times the dispatch alone).
template <int kMode>
static void floor_probe(const int64_t* topk, const uint4* x, uint8_t* recv, int* pos, int* count, int T, int H, int K,
                        int E, int grid) {
    if (kMode == 7) CK(cudaMemsetAsync(count, 0, E * sizeof(int)));
    floor_dispatch<false, kMode><<<grid, kFloorThreads>>>(topk, x, recv, nullptr, pos, count, T, H, K, E);
    CK(cudaGetLastError());  // a launch that never ran (resources, configuration)
}

// `microbench floor`: checks the floor kernels and the probes against the
// host, then runs each 200 times with a host wait after every kernel (BF16
// dispatch and combine, FP8 dispatch and combine with the empty kernel, each
// probe with a combine, the BF16 dispatch with the two-batch combine), for a
// profiler. Exit 1 when a check fails, 3 when the shape does not fit the GPU
// (fewer SMs than its 128 tokens), and then nothing runs.
static int floor_pair(int sms) {
    const int T = 128, H = 7168, K = 8, E = 256, nv = H / 8, G = H / 128;
    if (T > sms || T * K > kFloorIds * kFloorThreads || nv > kFloorVecs * kFloorThreads || E > 1024 || K > 8 ||
        H % 128 != 0) {
        fprintf(stderr, "floor: the defaults' shape does not fit this GPU (%d SMs): not run\n", sms);
        return 3;
    }
    // Routing: K distinct experts per token; 9 entries then set to -1 (the
    // defaults' 1015 selections of 1024), from a fixed LCG.
    uint64_t s = 0x2545f4914f6cdd1dull;
    auto rnd = [&] { s = s * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(s >> 33); };
    int64_t* h_topk = (int64_t*)malloc(T * K * sizeof(int64_t));
    float* h_w = (float*)malloc(T * K * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            int64_t e;
            bool dup;
            do {
                e = rnd() % E;
                dup = false;
                for (int j = 0; j < k; j++) dup |= h_topk[t * K + j] == e;
            } while (dup);
            h_topk[t * K + k] = e;
            h_w[t * K + k] = (rnd() % 1000000) / 1e6f;
        }
    for (int m = 0; m < 9; m++) {
        const int t = rnd() % T;
        h_topk[t * K + rnd() % K] = -1;
    }
    uint16_t* h_x = (uint16_t*)malloc((size_t)T * H * 2);
    for (size_t i = 0; i < (size_t)T * H; i++) h_x[i] = bf16_rn(((int)(rnd() % 20001) - 10000) / 2500.f);
    // The reference's layout.
    int* ref_pos = (int*)malloc(T * K * sizeof(int));
    int* ref_count = (int*)calloc(E, sizeof(int));
    int rows = 0;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            const int64_t e = h_topk[t * K + k];
            ref_pos[t * K + k] = e < 0 ? -1 : (int)e * T + ref_count[e]++;
            rows += e >= 0;
        }

    int64_t* topk;
    float *w, *scales;
    uint4 *x, *out;
    uint8_t *recv, *recv8;
    int *pos, *count;
    const size_t recv_bytes = (size_t)E * T * H * 2;
    CK(cudaMalloc(&topk, T * K * sizeof(int64_t)));
    CK(cudaMalloc(&w, T * K * sizeof(float)));
    CK(cudaMalloc(&x, (size_t)T * H * 2));
    CK(cudaMalloc(&out, (size_t)T * H * 2));
    CK(cudaMalloc(&recv, recv_bytes));
    CK(cudaMalloc(&recv8, (size_t)E * T * H));
    CK(cudaMalloc(&scales, (size_t)E * T * G * sizeof(float)));
    CK(cudaMalloc(&pos, T * K * sizeof(int)));
    CK(cudaMalloc(&count, E * sizeof(int)));
    CK(cudaMemcpy(topk, h_topk, T * K * sizeof(int64_t), cudaMemcpyHostToDevice));
    int64_t* topk_copies;  // probe 6: one copy of the routing per token's block
    CK(cudaMalloc(&topk_copies, (size_t)T * T * K * sizeof(int64_t)));
    for (int t = 0; t < T; t++)
        CK(cudaMemcpy(topk_copies + (size_t)t * T * K, h_topk, T * K * sizeof(int64_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, h_w, T * K * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, h_x, (size_t)T * H * 2, cudaMemcpyHostToDevice));

    // Check: BF16 dispatch, combine, FP8 dispatch.
    int bad = 0;
    int* g_pos = (int*)malloc(T * K * sizeof(int));
    int* g_count = (int*)malloc(E * sizeof(int));
    uint16_t* row = (uint16_t*)malloc((size_t)H * 2);
    auto check_layout = [&](const char* what) {
        CK(cudaMemcpy(g_pos, pos, T * K * sizeof(int), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(g_count, count, E * sizeof(int), cudaMemcpyDeviceToHost));
        if (memcmp(g_pos, ref_pos, T * K * sizeof(int)) != 0 || memcmp(g_count, ref_count, E * sizeof(int)) != 0) {
            fprintf(stderr, "floor: %s: row_pos or recv_count differ from the reference\n", what);
            bad++;
        }
    };
    CK(cudaMemset(pos, 0xff, T * K * sizeof(int)));
    CK(cudaMemset(count, 0xff, E * sizeof(int)));
    floor_dispatch<false><<<sms, kFloorThreads>>>(topk, x, recv, nullptr, pos, count, T, H, K, E);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    check_layout("bf16 dispatch");
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            if (ref_pos[t * K + k] < 0) continue;
            CK(cudaMemcpy(row, recv + (size_t)ref_pos[t * K + k] * H * 2, (size_t)H * 2, cudaMemcpyDeviceToHost));
            if (memcmp(row, h_x + (size_t)t * H, (size_t)H * 2) != 0 && bad++ < 3)
                fprintf(stderr, "floor: bf16 dispatch: token %d selection %d: row differs\n", t, k);
        }
    // The combine reads rows of its own, one per selection, so that a row
    // taken for another selection's shows.
    uint16_t* h_y = (uint16_t*)malloc((size_t)T * K * H * 2);
    for (size_t i = 0; i < (size_t)T * K * H; i++) h_y[i] = bf16_rn(((int)(rnd() % 20001) - 10000) / 2500.f);
    for (int i = 0; i < T * K; i++)
        if (ref_pos[i] >= 0)
            CK(cudaMemcpy(recv + (size_t)ref_pos[i] * H * 2, h_y + (size_t)i * H, (size_t)H * 2, cudaMemcpyHostToDevice));
    floor_combine<false><<<sms, kFloorThreads>>>(reinterpret_cast<const uint4*>(recv), pos, w, out, T, H, K);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    uint16_t* h_out = (uint16_t*)malloc((size_t)T * H * 2);
    CK(cudaMemcpy(h_out, out, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
    for (int t = 0; t < T; t++)
        for (int c = 0; c < H; c++) {
            float acc = 0.f;
            for (int k = 0; k < K; k++) {
                if (ref_pos[t * K + k] < 0) continue;
                const volatile float p = h_w[t * K + k] * bf16_f(h_y[((size_t)t * K + k) * H + c]);
                acc = acc + p;
            }
            if (h_out[(size_t)t * H + c] != bf16_rn(acc) && bad++ < 3)
                fprintf(stderr, "floor: combine: token %d channel %d: %04x, expected %04x\n", t, c,
                        h_out[(size_t)t * H + c], bf16_rn(acc));
        }
    CK(cudaMemset(out, 0xff, (size_t)T * H * 2));
    floor_combine<true><<<sms, kFloorThreads>>>(reinterpret_cast<const uint4*>(recv), pos, w, out, T, H, K);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    {
        uint16_t* o2 = (uint16_t*)malloc((size_t)T * H * 2);
        CK(cudaMemcpy(o2, out, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
        if (memcmp(o2, h_out, (size_t)T * H * 2) != 0) {
            fprintf(stderr, "floor: the two-batch combine's outputs differ\n");
            bad++;
        }
        free(o2);
    }
    CK(cudaMemset(pos, 0xff, T * K * sizeof(int)));
    CK(cudaMemset(count, 0xff, E * sizeof(int)));
    floor_dispatch<true><<<sms, kFloorThreads>>>(topk, x, recv8, scales, pos, count, T, H, K, E);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    check_layout("fp8 dispatch");
    uint8_t* q = (uint8_t*)malloc(H);
    float* sc = (float*)malloc(G * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            const int p = ref_pos[t * K + k];
            if (p < 0) continue;
            CK(cudaMemcpy(q, recv8 + (size_t)p * H, H, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(sc, scales + (size_t)p * G, G * sizeof(float), cudaMemcpyDeviceToHost));
            for (int g = 0; g < G; g++) {
                float amax = 1e-4f;
                for (int c = 0; c < 128; c++) amax = fmaxf(amax, fabsf(bf16_f(h_x[(size_t)t * H + g * 128 + c])));
                const volatile float inv = 448.f / amax;
                for (int c = 0; c < 128; c++) {
                    const volatile float y = bf16_f(h_x[(size_t)t * H + g * 128 + c]) * inv;
                    if (q[g * 128 + c] != host_e4m3(y) && bad++ < 3)
                        fprintf(stderr, "floor: fp8 dispatch: token %d channel %d: %02x, expected %02x\n", t,
                                g * 128 + c, q[g * 128 + c], host_e4m3(y));
                }
                if (sc[g] != amax / 448.f && bad++ < 3) fprintf(stderr, "floor: fp8 dispatch: token %d block %d: scale differs\n", t, g);
            }
        }
    // The probes (kMode 1 to 8): each row at its mode's place, row_pos saying so.
    int* probe_pos = (int*)malloc(T * K * sizeof(int));
    auto check_probe = [&](int mode, void (*launch)(const int64_t*, const uint4*, uint8_t*, int*, int*, int, int, int, int, int)) {
        CK(cudaMemset(pos, 0xff, T * K * sizeof(int)));
        CK(cudaMemset(count, 0xff, E * sizeof(int)));
        CK(cudaMemset(recv, 0xff, recv_bytes));
        launch(mode == 6 ? topk_copies : topk, x, recv, pos, count, T, H, K, E, sms);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(g_pos, pos, T * K * sizeof(int), cudaMemcpyDeviceToHost));
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++) {
                const int64_t e = h_topk[t * K + k];
                probe_pos[t * K + k] = e < 0                              ? -1
                                       : mode == 1                          ? (int)e * T + t
                                       : mode == 2 || mode == 3 || mode == 6 ? t * K + k
                                                                            : ref_pos[t * K + k];  // 7: below
            }
        if (mode == 7) {  // each expert's places taken once each, in any order
            int* seen = (int*)calloc((size_t)E * T, sizeof(int));
            for (int i = 0; i < T * K; i++) {
                const int64_t e = h_topk[i];
                const int p = g_pos[i];
                if (e < 0 ? p != -1 : p < e * T || p >= e * T + ref_count[e] || seen[p]++) {
                    fprintf(stderr, "floor: probe 7: token %d selection %d: place %d\n", i / K, i % K, p);
                    bad++;
                    free(seen);
                    return;
                }
            }
            free(seen);
            memcpy(probe_pos, g_pos, T * K * sizeof(int));
        }
        if (mode == 4 || mode == 5 || mode == 7 || mode == 8) {
            CK(cudaMemcpy(g_count, count, E * sizeof(int), cudaMemcpyDeviceToHost));
            if (memcmp(g_count, ref_count, E * sizeof(int)) != 0) {
                fprintf(stderr, "floor: probe %d: recv_count differs\n", mode);
                bad++;
            }
        }
        if (memcmp(g_pos, probe_pos, T * K * sizeof(int)) != 0) {
            fprintf(stderr, "floor: probe %d: row_pos differs\n", mode);
            bad++;
            return;
        }
        for (int i = 0; i < T * K; i++) {
            if (probe_pos[i] < 0) continue;
            CK(cudaMemcpy(row, recv + (size_t)probe_pos[i] * H * 2, (size_t)H * 2, cudaMemcpyDeviceToHost));
            if (memcmp(row, h_x + (size_t)(i / K) * H, (size_t)H * 2) != 0 && bad++ < 3)
                fprintf(stderr, "floor: probe %d: token %d selection %d: row differs\n", mode, i / K, i % K);
        }
    };
    static void (*const probes[8])(const int64_t*, const uint4*, uint8_t*, int*, int*, int, int, int, int, int) = {
        floor_probe<1>, floor_probe<2>, floor_probe<3>, floor_probe<4>,
        floor_probe<5>, floor_probe<6>, floor_probe<7>, floor_probe<8>};
    for (int m = 0; m < 8; m++) check_probe(m + 1, probes[m]);
    if (bad) {
        fprintf(stderr, "floor: %d mismatches: not timed\n", bad);
        return 1;
    }
    printf("floor: checked against the host: %d rows (%.2f MB BF16, %.2f MB FP8 with scales), row_pos, recv_count, "
           "the combine's %d outputs\n",
           rows, rows * H * 2 / 1e6, rows * (H + G * 4) / 1e6, T);
    printf("floor: the probes' rows (kMode 1 to 8) and the two-batch combine's outputs checked too\n");
    // For a profiler's --launch-skip: the kernels the checks launched (the
    // dispatches, the combines of both kinds, the probes).
    printf("floor: %d check launches before the timed ones\n", 4 + (int)(sizeof(probes) / sizeof(probes[0])));
    // Each launch waited for, as the benchmark's loop waits between its kernels.
    const uint4* rows_in = reinterpret_cast<const uint4*>(recv);
    auto dispatch = [&](bool fp8) {
        if (fp8) floor_dispatch<true><<<sms, kFloorThreads>>>(topk, x, recv8, scales, pos, count, T, H, K, E);
        else floor_dispatch<false><<<sms, kFloorThreads>>>(topk, x, recv, nullptr, pos, count, T, H, K, E);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    };
    auto combine = [&](bool two_batches) {
        if (two_batches) floor_combine<true><<<sms, kFloorThreads>>>(rows_in, pos, w, out, T, H, K);
        else floor_combine<false><<<sms, kFloorThreads>>>(rows_in, pos, w, out, T, H, K);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    };
    for (int r = 0; r < 200; r++) dispatch(false), combine(false);
    for (int r = 0; r < 200; r++) {
        dispatch(true), combine(false);
        empty<<<sms, kFloorThreads>>>();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
    }
    for (int m = 0; m < 8; m++)
        for (int r = 0; r < 200; r++) {
            probes[m](m == 5 ? topk_copies : topk, x, recv, pos, count, T, H, K, E, sms);
            CK(cudaDeviceSynchronize());
            combine(false);
        }
    for (int r = 0; r < 200; r++) dispatch(false), combine(true);
    printf("floor: 200 BF16 pairs, then 200 FP8 dispatches each with a combine and an empty kernel, then 200 of "
           "each probe (kMode 1 to 8) with a combine, then 200 BF16 pairs with the two-batch combine\n");
    return 0;
}

// Pearson's r of x and y over n values.
static double pearson(const double* x, const double* y, int n) {
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) mx += x[i] / n, my += y[i] / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

// `microbench balance`: region_rw's blocks, 40 launches each with the regions
// as they are and shifted by half the grid, writes then reads; per SM and per
// region the mean time from the launch's first block start to the block's
// end (us). If the same SMs are late whatever data they get, r(SM) is high
// and r(region) low; if the data makes them late, the other way round.
static int balance(int sms) {
    const size_t per = 8 * 14336 / sizeof(uint4);
    uint4* buf;
    uint64_t* rec;
    CK(cudaMalloc(&buf, per * sms * sizeof(uint4)));
    CK(cudaMemset(buf, 1, per * sms * sizeof(uint4)));
    CK(cudaMalloc(&rec, 3 * sms * sizeof(uint64_t)));
    const int n = 40;
    uint64_t h[3 * kMaxSMs];
    for (int read = 0; read < 2; read++) {
        static double by_sm[2][kMaxSMs], by_region[2][kMaxSMs];
        static int sm_n[2][kMaxSMs];
        memset(by_sm, 0, sizeof by_sm);
        memset(by_region, 0, sizeof by_region);
        memset(sm_n, 0, sizeof sm_n);
        double spread = 0, avg = 0;
        for (int c = 0; c < 2; c++) {
            const int shift = c * sms / 2;
            for (int l = 0; l <= n; l++) {
                region_rw<<<sms, 512>>>(buf, per, shift, read, rec);
                CK(cudaGetLastError());
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(h, rec, 3 * sms * sizeof(uint64_t), cudaMemcpyDeviceToHost));
                if (l == 0) continue;
                uint64_t t0 = UINT64_MAX, hi = 0;
                double sum = 0;
                for (int b = 0; b < sms; b++) t0 = h[3 * b + 1] < t0 ? h[3 * b + 1] : t0;
                for (int b = 0; b < sms; b++) {
                    const double us = (h[3 * b + 2] - t0) / 1e3;
                    const int sm = (int)h[3 * b] % kMaxSMs;
                    by_sm[c][sm] += us / n;
                    sm_n[c][sm]++;
                    by_region[c][(b + shift) % sms] += us / n;
                    hi = h[3 * b + 2] > hi ? h[3 * b + 2] : hi;
                    sum += us;
                }
                spread += ((hi - t0) / 1e3 - sum / sms) / (2 * n);
                avg += sum / sms / (2 * n);
            }
        }
        // SMs that ran exactly one block per launch in both arrangements.
        double xs[kMaxSMs], ys[kMaxSMs];
        int m = 0;
        for (int sm = 0; sm < kMaxSMs; sm++)
            if (sm_n[0][sm] == n && sm_n[1][sm] == n) xs[m] = by_sm[0][sm], ys[m] = by_sm[1][sm], m++;
        const double r_sm = pearson(xs, ys, m), r_region = pearson(by_region[0], by_region[1], sms);
        double lo = 1e9, top = 0;
        for (int i = 0; i < m; i++) lo = xs[i] < lo ? xs[i] : lo, top = xs[i] > top ? xs[i] : top;
        printf("balance %s 8 x 14336 bytes per block: block end avg %.2f us, latest block %.2f us after the average; "
               "per-SM means %.2f..%.2f us over %d SMs; r(SM, regions shifted) %.2f, r(region, SMs shifted) %.2f\n",
               read ? "read " : "write", avg, spread, lo, top, m, r_sm, r_region);
    }
    return 0;
}

// `microbench icache`: per launch of kernel A, the average over the blocks
// of each of its three passes (SM cycles), A launched 20 times after
// `before` (another launch, or none), with a host wait between launches as
// the LL loop has.
template <typename B, typename A>
static void icache_runs(int sms, long long* clocks, const char* what, B before, A launch_a) {
    const int n = 20;
    long long h[4 * kMaxSMs];
    double p0 = 0, p1 = 0, p2 = 0;
    for (int r = 0; r <= n; r++) {
        before();
        CK(cudaDeviceSynchronize());
        launch_a();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h, clocks, sizeof(long long) * 4 * sms, cudaMemcpyDeviceToHost));
        if (r == 0) continue;
        for (int b = 0; b < sms; b++) {
            p0 += h[4 * b + 1] - h[4 * b];
            p1 += h[4 * b + 2] - h[4 * b + 1];
            p2 += h[4 * b + 3] - h[4 * b + 2];
        }
    }
    const double k = 1.0 / ((double)n * sms);
    printf("icache %s: pass 1 %.0f, pass 2 %.0f, pass 3 %.0f SM cycles (block average)\n", what, p0 * k, p1 * k,
           p2 * k);
}

// A of kSteps after itself, after another kernel B of the same size, after
// an empty kernel, and as one half of a kernel whose other half is B, after
// B and after itself.
template <int kSteps>
static void icache_case(int sms, long long* clocks) {
    char what[96];
    auto a = [&] { code_run<kSteps, 1><<<sms, 128>>>(clocks, 3, 5); };
    auto a2 = [&] { code_two<kSteps><<<sms, 128>>>(clocks, 3, 5, 1); };
    snprintf(what, sizeof what, "%5d steps, A after itself", kSteps);
    icache_runs(sms, clocks, what, [] {}, a);
    snprintf(what, sizeof what, "%5d steps, A after another kernel's code", kSteps);
    icache_runs(sms, clocks, what, [&] { code_run<kSteps, 2><<<sms, 128>>>(clocks, 2, 7); }, a);
    snprintf(what, sizeof what, "%5d steps, A after an empty kernel", kSteps);
    icache_runs(sms, clocks, what, [&] { empty<<<sms, 128>>>(); }, a);
    snprintf(what, sizeof what, "%5d steps, A in one kernel with B, after B", kSteps);
    icache_runs(sms, clocks, what, [&] { code_two<kSteps><<<sms, 128>>>(clocks, 2, 7, 2); }, a2);
    snprintf(what, sizeof what, "%5d steps, A in one kernel with B, after itself", kSteps);
    icache_runs(sms, clocks, what, [] {}, a2);
}

// A of kSteps after a kernel B of kStepsB: how much other code it takes to
// make A's code cold.
template <int kSteps, int kStepsB>
static void icache_after(int sms, long long* clocks) {
    char what[96];
    snprintf(what, sizeof what, "%5d steps, A after B of %d steps", kSteps, kStepsB);
    icache_runs(sms, clocks, what, [&] { code_run<kStepsB, 3><<<sms, 128>>>(clocks, 2, 7); },
                [&] { code_run<kSteps, 1><<<sms, 128>>>(clocks, 3, 5); });
}

static int icache(int sms) {
    long long* clocks;
    CK(cudaMalloc(&clocks, sizeof(long long) * (4 * sms + 1)));
    icache_case<128>(sms, clocks);
    icache_case<512>(sms, clocks);
    icache_case<1536>(sms, clocks);
    icache_after<128, 8>(sms, clocks);
    icache_after<128, 32>(sms, clocks);
    icache_after<128, 64>(sms, clocks);
    icache_after<512, 8>(sms, clocks);
    icache_after<512, 32>(sms, clocks);
    icache_after<512, 128>(sms, clocks);
    // Where the second level ends: A of 77 KiB after B of 29 to 58 KiB.
    icache_after<512, 192>(sms, clocks);
    icache_after<512, 256>(sms, clocks);
    icache_after<512, 320>(sms, clocks);
    icache_after<512, 384>(sms, clocks);
    return 0;
}

int main(int argc, char** argv) {
    const bool pair_only = argc == 2 && strcmp(argv[1], "pair") == 0;
    const bool icache_only = argc == 2 && strcmp(argv[1], "icache") == 0;
    const bool balance_only = argc == 2 && strcmp(argv[1], "balance") == 0;
    const bool floor_only = argc == 2 && strcmp(argv[1], "floor") == 0;
    if (argc > 1 && !pair_only && !icache_only && !balance_only && !floor_only) {
        fprintf(stderr, "usage: microbench [pair | icache | balance | floor]\n");
        return 2;
    }
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = 256ull << 20;
    g_n = bytes / sizeof(uint4);
    printf("microbench: %d GPU(s), %d SMs\n", n, sms);
    if (sms > kMaxSMs) {
        fprintf(stderr, "microbench: %d SMs, at most %d supported\n", sms, kMaxSMs);
        return 1;
    }
    if (pair_only) return pair(sms);
    if (icache_only) return icache(sms);
    if (balance_only) return balance(sms);
    if (floor_only) return floor_pair(sms);

    cudaStream_t s0;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&s0));
    {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        auto one = [&] { empty<<<1, 32, 0, s0>>>(); };
        float best = 1e9;
        for (int r = 0; r < 20; r++) {
            const float ms = event_ms(s0, a, b, one);
            if (r > 0 && ms < best) best = ms;
        }
        float sum = 0;
        for (int r = 0; r < 20; r++) sum += event_ms(s0, a, b, one);
        printf("empty kernel between events: avg %.2f us, best %.2f us\n", sum / 20 * 1e3, best * 1e3);
    }
    // The same with the grid of the LL kernels (one 512-thread block per SM).
    {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        float sum = 0;
        for (int r = 0; r < 21; r++) {
            const float ms = event_ms(s0, a, b, [&] { empty<<<sms, 512, 0, s0>>>(); });
            if (r > 0) sum += ms;
        }
        printf("empty kernel of %d x 512 threads between events: avg %.2f us\n", sms, sum / 20 * 1e3);
    }
    // The same kernel launched as a one-node CUDA graph (what --cuda-graph
    // would do): does the graph path reach the GPU sooner than a launch?
    {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
        empty<<<sms, 512, 0, s0>>>();
        CK(cudaStreamEndCapture(s0, &g));
        CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
        CK(cudaGraphUpload(ge, s0));
        CK(cudaStreamSynchronize(s0));
        cudaEvent_t a, b, c;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaEventCreate(&c));
        for (int graph = 0; graph < 2; graph++) {
            float sum = 0, gap = 0;
            for (int r = 0; r < 41; r++) {
                CK(cudaEventRecord(a, s0));
                if (graph) CK(cudaGraphLaunch(ge, s0));
                else empty<<<sms, 512, 0, s0>>>();
                CK(cudaEventRecord(b, s0));
                CK(cudaStreamSynchronize(s0));
                CK(cudaEventRecord(c, s0));
                if (graph) CK(cudaGraphLaunch(ge, s0));
                else empty<<<sms, 512, 0, s0>>>();
                CK(cudaStreamSynchronize(s0));
                float ms, ms2;
                CK(cudaEventElapsedTime(&ms, a, b));
                CK(cudaEventElapsedTime(&ms2, b, c));
                if (r > 0) sum += ms, gap += ms2;
            }
            printf("%s of %d x 512 threads between events: avg %.2f us; sync gap after it %.2f us\n",
                   graph ? "one-node graph" : "kernel launch  ", sms, sum / 40 * 1e3, gap / 40 * 1e3);
        }
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    // The host's synchronisation between two operations, as the benchmark
    // loop has it: an event after a kernel, the host waits for the stream,
    // then records the next event; the gap between the two events is the
    // time the host needs to see the kernel's end and get a command back to
    // the GPU. Three ways of waiting.
    {
        cudaEvent_t a, b, c;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaEventCreate(&c));
        const char* names[3] = {"cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamQuery poll"};
        for (int m = 0; m < 3; m++) {
            float sum = 0, best = 1e9;
            for (int r = 0; r < 41; r++) {
                CK(cudaEventRecord(a, s0));
                empty<<<1, 32, 0, s0>>>();
                CK(cudaEventRecord(b, s0));
                if (m == 0) CK(cudaStreamSynchronize(s0));
                if (m == 1) CK(cudaEventSynchronize(b));
                if (m == 2)
                    while (cudaStreamQuery(s0) == cudaErrorNotReady) {
                    }
                CK(cudaEventRecord(c, s0));
                CK(cudaStreamSynchronize(s0));
                float ms;
                CK(cudaEventElapsedTime(&ms, b, c));
                if (r > 0) sum += ms;
                if (r > 0 && ms < best) best = ms;
            }
            printf("sync gap (%s): avg %.2f us, best %.2f us\n", names[m], sum / 40 * 1e3, best * 1e3);
        }
    }
    CK(cudaMalloc(&g_src, bytes));
    CK(cudaMalloc(&g_dst, bytes));
    g_blocks = sms;
    float ms = time_kernel_ms(s0, [](cudaStream_t s) { copy16<<<g_blocks, 512, 0, s>>>(g_dst, g_src, g_n); }, 10);
    printf("local copy (%d blocks): %.0f GB/s (bytes copied)\n", g_blocks, bytes / (ms * 1e-3) / 1e9);
    // The local path's floors: the best a grid of the LL kernels' shape (and
    // twice as many blocks) writes and reads of the GPU's own memory, at
    // 256 MiB (the rate) and at the default dispatch's rows (1015 rows of
    // 14336 bytes, 14.55 MB: the time per kernel, launches back to back).
    {
        static uint4* sink;
        CK(cudaMalloc(&sink, 512 * sizeof(uint4)));
        static size_t n_small;
        n_small = 1015ull * 14336 / sizeof(uint4);
        for (int mult = 1; mult <= 2; mult++) {
            g_blocks = sms * mult;
            float w = time_kernel_ms(s0, [](cudaStream_t s) { store16<<<g_blocks, 512, 0, s>>>(g_dst, g_n); }, 10);
            float r = time_kernel_ms(s0, [](cudaStream_t s) { read16<<<g_blocks, 512, 0, s>>>(g_src, g_n, sink); }, 10);
            float ws = time_kernel_ms(s0, [](cudaStream_t s) { store16<<<g_blocks, 512, 0, s>>>(g_dst, n_small); }, 50);
            float rs = time_kernel_ms(s0, [](cudaStream_t s) { read16<<<g_blocks, 512, 0, s>>>(g_src, n_small, sink); }, 50);
            printf("local %3d blocks x 512: write-only %.0f GB/s, read-only %.0f GB/s (256 MiB); 14.55 MB: write %.2f us, read %.2f us per kernel\n",
                   g_blocks, bytes / (w * 1e-3) / 1e9, bytes / (r * 1e-3) / 1e9, ws * 1e3, rs * 1e3);
        }
        static unsigned chunk;
        for (unsigned c : {4096u, 16384u, 32768u}) {
            chunk = c;
            CK(cudaFuncSetAttribute(tma_store, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c));
            g_blocks = sms;
            float w = time_kernel_ms(s0, [](cudaStream_t s) { tma_store<<<g_blocks, 128, chunk, s>>>((uint8_t*)g_dst, g_n * 16, chunk); }, 10);
            static size_t small;
            small = (1015ull * 14336) / chunk * chunk;
            float ws = time_kernel_ms(s0, [](cudaStream_t s) { tma_store<<<g_blocks, 128, chunk, s>>>((uint8_t*)g_dst, small, chunk); }, 50);
            printf("local TMA bulk stores from shared, %u-byte chunks, %d blocks: %.0f GB/s (256 MiB); %.2f MB: %.2f us per kernel\n",
                   c, g_blocks, bytes / (w * 1e-3) / 1e9, small / 1e6, ws * 1e3);
        }
        g_blocks = sms;
    }

    if (n < 2) {
        printf("one GPU: NVLink measurements skipped\n");
        return 0;
    }
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) {
        printf("GPU 0 cannot access GPU 1: NVLink measurements skipped\n");
        return 0;
    }
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    uint4* remote;
    CK(cudaMalloc(&remote, bytes));
    uint4* back;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&back, bytes));
    cudaStream_t s1;
    CK(cudaSetDevice(1));
    CK(cudaStreamCreate(&s1));
    CK(cudaSetDevice(0));

    for (int blocks : {16, 32, 66, sms}) {
        g_dst = remote;
        g_blocks = blocks;
        ms = time_kernel_ms(s0, [](cudaStream_t s) { store16<<<g_blocks, 512, 0, s>>>(g_dst, g_n); }, 10);
        printf("NVLink stores GPU0->GPU1, %3d blocks x 512 threads, 16 B: %.0f GB/s\n", blocks, bytes / (ms * 1e-3) / 1e9);
    }
    {
        // Both directions at once.
        cudaEvent_t a0, b0, a1, b1;
        CK(cudaSetDevice(0));
        CK(cudaEventCreate(&a0));
        CK(cudaEventCreate(&b0));
        CK(cudaSetDevice(1));
        CK(cudaEventCreate(&a1));
        CK(cudaEventCreate(&b1));
        const int reps = 10;
        CK(cudaSetDevice(0));
        CK(cudaEventRecord(a0, s0));
        for (int i = 0; i < reps; i++) store16<<<sms, 512, 0, s0>>>(remote, g_n);
        CK(cudaEventRecord(b0, s0));
        CK(cudaSetDevice(1));
        CK(cudaEventRecord(a1, s1));
        for (int i = 0; i < reps; i++) store16<<<sms, 512, 0, s1>>>(back, g_n);
        CK(cudaEventRecord(b1, s1));
        CK(cudaEventSynchronize(b1));
        CK(cudaSetDevice(0));
        CK(cudaEventSynchronize(b0));
        float m0, m1;
        CK(cudaEventElapsedTime(&m0, a0, b0));
        CK(cudaSetDevice(1));
        CK(cudaEventElapsedTime(&m1, a1, b1));
        printf("NVLink stores both ways at once: %.0f + %.0f GB/s\n", reps * bytes / (m0 * 1e-3) / 1e9,
               reps * bytes / (m1 * 1e-3) / 1e9);
    }
    {
        uint64_t *f0, *f1;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&f0, 8));
        CK(cudaMemset(f0, 0, 8));
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&f1, 8));
        CK(cudaMemset(f1, 0, 8));
        CK(cudaDeviceSynchronize());
        const int rounds = 10000;
        pong<<<1, 1, 0, s1>>>(f0, f1, rounds);
        CK(cudaSetDevice(0));
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaEventRecord(a, s0));
        ping<<<1, 1, 0, s0>>>(f1, f0, rounds);
        CK(cudaEventRecord(b, s0));
        CK(cudaEventSynchronize(b));
        float m;
        CK(cudaEventElapsedTime(&m, a, b));
        printf("cross-GPU flag round trip (st.release.sys / ld.acquire.sys): %.2f us\n", m * 1e3 / rounds);
    }
    {
        // The release scheme's cost: a burst to the peer, then the flag after
        // one fence (fence 1), or the peer polling the data (fence 0).
        uint64_t *f0, *f1, *times;
        unsigned long long *k0, *k1;
        const int rounds = 50;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&f0, 8));
        CK(cudaMalloc(&k0, 8));
        CK(cudaMalloc(&times, 16 * (rounds + 1)));
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&f1, 8));
        CK(cudaMalloc(&k1, 8));
        struct Case {
            int blocks;
            size_t bytes;
        };
        for (Case c : {Case{8, 14336}, Case{128, 1835008}, Case{128, 3670016}}) {
            for (int fence = 1; fence >= 0; fence--) {
                CK(cudaSetDevice(1));
                CK(cudaMemset(f1, 0, 8));
                CK(cudaMemset(k1, 0, 8));
                CK(cudaMemset(remote, 0, c.bytes));
                CK(cudaDeviceSynchronize());
                CK(cudaSetDevice(0));
                CK(cudaMemset(f0, 0, 8));
                CK(cudaMemset(k0, 0, 8));
                CK(cudaDeviceSynchronize());
                const size_t per = c.bytes / 16 / c.blocks;
                for (int r = 1; r <= rounds; r++) {
                    CK(cudaSetDevice(1));
                    echo<<<c.blocks, 512, 0, s1>>>(remote, per, f1, f0, k1, fence, r);
                    CK(cudaSetDevice(0));
                    burst<<<c.blocks, 512, 0, s0>>>(remote, per, f1, f0, k0, fence, r, times);
                    CK(cudaStreamSynchronize(s0));
                    CK(cudaSetDevice(1));
                    CK(cudaStreamSynchronize(s1));
                }
                CK(cudaSetDevice(0));
                uint64_t h[2 * (rounds + 1)];
                CK(cudaMemcpy(h, times, sizeof h, cudaMemcpyDeviceToHost));
                double tf = 0, ta = 0;
                for (int r = 2; r <= rounds; r++) tf += h[2 * r], ta += h[2 * r + 1];
                tf /= (rounds - 1) * 1e3;
                ta /= (rounds - 1) * 1e3;
                if (fence)
                    printf("burst %7zu B from %3d blocks, ticket + one fence + flag: fence done %.2f us, echo back %.2f us\n",
                           c.bytes, c.blocks, tf, ta);
                else
                    printf("burst %7zu B from %3d blocks, peer polls the data:        echo back %.2f us\n", c.bytes,
                           c.blocks, ta);
            }
        }
    }
    return 0;
}
