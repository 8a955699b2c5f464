// Package gpu is the CUDA runtime of the CUDA executable: one context per
// rank on the node-local GPU, device identity from the driver and NVML, peer
// reachability, symmetric buffers shared with peers through CUDA IPC, and the
// launch of the LL kernels.
//
// Every CUDA call is made on the calling goroutine, which the executable has
// locked to the main OS thread; there is no work queue in the hot loop.
package gpu
