// Micro-benchmarks of the limits the LL kernels work against (docs/PERF.md):
// SM-driven NVLink store bandwidth (one way and both ways), a local device
// copy, a cross-GPU flag round trip with release/acquire at system scope, and
// an empty kernel between two events. Needs two GPUs with P2P for the NVLink
// parts. Build: nvcc -O3 -arch=sm_90 -o microbench scripts/microbench.cu
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>

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

static float time_kernel_ms(cudaStream_t s, void (*launch)(cudaStream_t), int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    launch(s);
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < reps; i++) launch(s);
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms / reps;
}

static uint4* g_dst;
static uint4* g_src;
static size_t g_n;
static int g_blocks;

int main() {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = 256ull << 20;
    g_n = bytes / sizeof(uint4);
    printf("microbench: %d GPU(s), %d SMs\n", n, sms);

    cudaStream_t s0;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&s0));
    {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        float best = 1e9;
        for (int r = 0; r < 20; r++) {
            CK(cudaEventRecord(a, s0));
            empty<<<1, 32, 0, s0>>>();
            CK(cudaEventRecord(b, s0));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (r > 0 && ms < best) best = ms;
        }
        float sum = 0;
        for (int r = 0; r < 20; r++) {
            CK(cudaEventRecord(a, s0));
            empty<<<1, 32, 0, s0>>>();
            CK(cudaEventRecord(b, s0));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            sum += ms;
        }
        printf("empty kernel between events: avg %.2f us, best %.2f us\n", sum / 20 * 1e3, best * 1e3);
    }
    CK(cudaMalloc(&g_src, bytes));
    CK(cudaMalloc(&g_dst, bytes));
    g_blocks = sms;
    float ms = time_kernel_ms(s0, [](cudaStream_t s) { copy16<<<g_blocks, 512, 0, s>>>(g_dst, g_src, g_n); }, 10);
    printf("local copy (%d blocks): %.0f GB/s (bytes copied)\n", g_blocks, bytes / (ms * 1e-3) / 1e9);

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
    return 0;
}
