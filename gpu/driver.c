#include "driver.h"

#include <string.h>

// cudaProfiler.h is not shipped with every driver-header package; these two
// entry points are part of libcuda.
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);

const char* ep_error_name(int code) {
    const char* s = NULL;
    if (cuGetErrorName((CUresult)code, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN";
    return s;
}

const char* ep_error_string(int code) {
    const char* s = NULL;
    if (cuGetErrorString((CUresult)code, &s) != CUDA_SUCCESS || s == NULL) return "unknown error";
    return s;
}

int ep_module_load(const char* image, uint64_t* module, char* log, size_t log_size) {
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[2] = {log, (void*)(uintptr_t)log_size};
    CUmodule m = NULL;
    if (log_size > 0) log[0] = 0;
    CUresult r = cuModuleLoadDataEx(&m, image, 2, opts, vals);
    *module = (uint64_t)(uintptr_t)m;
    return (int)r;
}

int ep_module_unload(uint64_t module) { return (int)cuModuleUnload((CUmodule)(uintptr_t)module); }

int ep_module_function(uint64_t module, const char* name, uint64_t* function) {
    CUfunction f = NULL;
    CUresult r = cuModuleGetFunction(&f, (CUmodule)(uintptr_t)module, name);
    *function = (uint64_t)(uintptr_t)f;
    return (int)r;
}

int ep_module_global(uint64_t module, const char* name, uint64_t* ptr, size_t* bytes) {
    CUdeviceptr p = 0;
    size_t n = 0;
    CUresult rc = cuModuleGetGlobal(&p, &n, (CUmodule)(uintptr_t)module, name);
    *ptr = (uint64_t)p;
    *bytes = n;
    return (int)rc;
}

int ep_launch(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args) {
    void* params[1] = {args};
    return (int)cuLaunchKernel((CUfunction)(uintptr_t)function, grid, 1, 1, block, 1, 1, smem,
                               (CUstream)(uintptr_t)stream, params, NULL);
}

int ep_occupancy(uint64_t function, unsigned block, unsigned smem, int* blocks) {
    return (int)cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, (CUfunction)(uintptr_t)function, (int)block,
                                                            (size_t)smem);
}

int ep_graph_capture(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args,
                     uint64_t* exec) {
    CUstream s = (CUstream)(uintptr_t)stream;
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    *exec = 0;
    CUresult r = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) return (int)r;
    CUresult launched = (CUresult)ep_launch(function, grid, block, smem, stream, args);
    r = cuStreamEndCapture(s, &g);  // ends the capture even after a failed launch
    if (launched != CUDA_SUCCESS) r = launched;
    if (r == CUDA_SUCCESS) r = cuGraphInstantiateWithFlags(&ge, g, 0);
    if (g != NULL) cuGraphDestroy(g);
    if (r == CUDA_SUCCESS) r = cuGraphUpload(ge, s);
    if (r != CUDA_SUCCESS) {
        if (ge != NULL) cuGraphExecDestroy(ge);
        return (int)r;
    }
    *exec = (uint64_t)(uintptr_t)ge;
    return CUDA_SUCCESS;
}

int ep_graph_launch(uint64_t exec, uint64_t stream) {
    return (int)cuGraphLaunch((CUgraphExec)(uintptr_t)exec, (CUstream)(uintptr_t)stream);
}

int ep_stream_query(uint64_t stream) { return (int)cuStreamQuery((CUstream)(uintptr_t)stream); }

int ep_event_query(uint64_t event) { return (int)cuEventQuery((CUevent)(uintptr_t)event); }

int ep_graph_destroy(uint64_t exec) { return (int)cuGraphExecDestroy((CUgraphExec)(uintptr_t)exec); }

int ep_ipc_handle_size(void) { return (int)sizeof(CUipcMemHandle); }

int ep_ipc_get(uint64_t dptr, void* handle_out) {
    CUipcMemHandle h;
    CUresult r = cuIpcGetMemHandle(&h, (CUdeviceptr)dptr);
    memcpy(handle_out, &h, sizeof h);
    return (int)r;
}

int ep_ipc_open(const void* handle, uint64_t* dptr) {
    CUipcMemHandle h;
    CUdeviceptr p = 0;
    memcpy(&h, handle, sizeof h);
    CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    *dptr = (uint64_t)p;
    return (int)r;
}

int ep_ipc_close(uint64_t dptr) { return (int)cuIpcCloseMemHandle((CUdeviceptr)dptr); }

int ep_profiler_start(void) { return (int)cuProfilerStart(); }
int ep_profiler_stop(void) { return (int)cuProfilerStop(); }


int ep_host_alloc_mapped(size_t bytes, void** host, uint64_t* dptr) {
    void* p = NULL;
    CUresult r = cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) return (int)r;
    memset(p, 0, bytes);
    CUdeviceptr d = 0;
    r = cuMemHostGetDevicePointer(&d, p, 0);
    if (r != CUDA_SUCCESS) {
        cuMemFreeHost(p);
        return (int)r;
    }
    *host = p;
    *dptr = (uint64_t)d;
    return 0;
}

int ep_host_free(void* host) { return (int)cuMemFreeHost(host); }

unsigned ep_load_u32(const void* host) { return __atomic_load_n((const unsigned*)host, __ATOMIC_ACQUIRE); }
void ep_store_u32(void* host, unsigned v) { __atomic_store_n((unsigned*)host, v, __ATOMIC_RELEASE); }
