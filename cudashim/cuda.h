/*
 * Include shim for CUDA 13 headers.
 *
 * gorgonia.org/cu was written against the CUDA 11/12 driver API. CUDA 13's
 * cuda.h maps five entry points to new versions with different parameter
 * lists, so that package no longer compiles against it. libcuda still exports
 * the legacy entry points, so this header, placed first on the include path by
 * the Makefile, includes the real cuda.h and then restores the legacy
 * prototypes. With CUDA 12 and older headers it changes nothing.
 */
#ifndef EPBENCH_CUDA_SHIM_H
#define EPBENCH_CUDA_SHIM_H

#include_next <cuda.h>

#if defined(CUDA_VERSION) && CUDA_VERSION >= 13000
#ifdef __cplusplus
extern "C" {
#endif

#undef cuCtxCreate
#define cuCtxCreate cuCtxCreate_v2
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

#undef cuMemAdvise
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device);

#undef cuMemPrefetchAsync
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);

#undef cuGraphGetEdges
CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges);

#undef cuGraphAddDependencies
CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                        size_t numDependencies);

#ifdef __cplusplus
}
#endif
#endif /* CUDA_VERSION >= 13000 */

#endif /* EPBENCH_CUDA_SHIM_H */
