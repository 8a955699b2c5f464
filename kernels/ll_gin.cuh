// The GIN build of the fenced kernels (EPBENCH_GIN=1, modules ll_nccl_*):
// a peer that NCCL reaches only through GIN (GPU-initiated networking; every
// peer under -n) is written through a mirror. The host gives such a peer a
// region of this rank's own symmetric window as its entry in LLArgs.peers,
// so every store the fenced kernels make for it lands there, at the offset
// it would have in the peer's region; what a call wrote for the peer then
// travels in a few large GIN puts from the mirror to the same offset in the
// peer's window, and the release that would have been a system-scope add
// on the peer's arrival counter becomes a strong GIN signal add on it: NCCL
// makes the signal visible only after every earlier put of the context to
// that peer. The receiving side is unchanged, it waits on its counter.
//
// Built against NCCL's device headers with only the CPU-proxy GIN backend
// compiled in (the host refuses any other GIN type): ll.cu includes this
// file first, so nothing else sees the backend switches.
#ifndef EPBENCH_LL_GIN_CUH
#define EPBENCH_LL_GIN_CUH

#if EPBENCH_GIN
#define NCCL_GIN_GDAKI_ENABLE 0
#define NCCL_GIN_GPI_ENABLE 0
#include "nccl_device.h"

static_assert(NCCL_VERSION_CODE == EPBENCH_NCCL_VERSION, "the GIN build takes NCCL's device headers of EPBENCH_NCCL_VERSION");

namespace epbench {

constexpr int kGinMaskWords = 256 / 64;  // kMaxRanks / 64 (ll.cuh comes after this file)

// What the host writes into the module's epbench_gin once it is loaded
// (gpu.GinArgs spells the same layout).
struct GinArgs {
    ncclWindow_t win;                    // the symmetric window: this rank's region at 0, then the mirrors
    uint64_t region;                     // bytes of one region: peer q's mirror is at (q + 1) * region
    uint64_t peers[kGinMaskWords];       // bit q: peer q is reached through GIN (LLArgs.peers[q] is its mirror)
    ncclDevComm comm;                    // the device communicator (proxy GIN, one context)
};

}  // namespace epbench

__device__ epbench::GinArgs epbench_gin;

namespace epbench {

__device__ __forceinline__ bool gin_peer(int q) { return (epbench_gin.peers[q / 64] >> (q % 64)) & 1; }

// Puts bytes at offset off of peer q's mirror to offset off of q's window.
// One thread, after a barrier that follows the stores it covers (NCCL
// releases them at device scope before the put is posted).
__device__ __forceinline__ void gin_put(int q, uint64_t off, uint64_t bytes) {
    if (bytes == 0) return;
    ncclGin gin{epbench_gin.comm, 0};
    gin.put(ncclTeamWorld(epbench_gin.comm), q, epbench_gin.win, off, epbench_gin.win,
            (uint64_t)(q + 1) * epbench_gin.region + off, bytes);
}

// +1 on the uint64 at offset off of q's window, visible to q only after
// every put this rank's context made to q before it. One thread.
__device__ __forceinline__ void gin_signal(int q, uint64_t off) {
    ncclGin gin{epbench_gin.comm, 0};
    gin.signal(ncclTeamWorld(epbench_gin.comm), q, ncclGin_StrongVASignalAdd{epbench_gin.win, off, 1});
}

// Waits until the sources of every put this thread made may be written
// again (the next calls write the mirrors).
__device__ __forceinline__ void gin_flush() {
    ncclGin gin{epbench_gin.comm, 0};
    gin.flush(ncclCoopThread{});
}

}  // namespace epbench
#endif  // EPBENCH_GIN

#endif
