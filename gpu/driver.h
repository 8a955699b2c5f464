// Thin C layer over the CUDA driver calls the hot loop and IPC need, which
// gorgonia.org/cu either lacks (IPC, profiler) or wraps with a per-call
// allocation (kernel launch).
#ifndef EPBENCH_GPU_DRIVER_H
#define EPBENCH_GPU_DRIVER_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

const char* ep_error_name(int code);
const char* ep_error_string(int code);

int ep_module_load(const char* image, uint64_t* module, char* log, size_t log_size);
int ep_module_unload(uint64_t module);
int ep_module_function(uint64_t module, const char* name, uint64_t* function);

// Launches function with a single by-value parameter block at args.
int ep_launch(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args);

// A CUDA graph of that one launch, captured on stream, instantiated and
// uploaded there (the graph itself is released; the executable one stays).
int ep_graph_capture(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args,
                     uint64_t* exec);
int ep_graph_launch(uint64_t exec, uint64_t stream);
int ep_graph_destroy(uint64_t exec);

int ep_stream_create(uint64_t* stream);
int ep_stream_destroy(uint64_t stream);
int ep_stream_sync(uint64_t stream);

int ep_event_create(uint64_t* event);
int ep_event_destroy(uint64_t event);
int ep_event_record(uint64_t event, uint64_t stream);
int ep_event_elapsed_ms(uint64_t start, uint64_t end, float* ms);

int ep_ipc_get(uint64_t dptr, void* handle_out);      // CU_IPC_HANDLE_SIZE bytes
int ep_ipc_open(const void* handle, uint64_t* dptr);
int ep_ipc_close(uint64_t dptr);
int ep_ipc_handle_size(void);

int ep_memset_d32_async(uint64_t dptr, unsigned value, size_t n, uint64_t stream);
int ep_memcpy_htod_async(uint64_t dst, const void* src, size_t bytes, uint64_t stream);
int ep_memcpy_dtoh(void* dst, uint64_t src, size_t bytes);

int ep_profiler_start(void);
int ep_profiler_stop(void);



// Page-locked host memory mapped into the device's address space: the host
// reads what kernels write there without a copy.
int ep_host_alloc_mapped(size_t bytes, void** host, uint64_t* dptr);
int ep_host_free(void* host);
unsigned ep_load_u32(const void* host);
void ep_store_u32(void* host, unsigned v);
#endif
