// Thin C layer over the CUDA driver calls that gorgonia.org/cu lacks or
// cannot make as the kernels need: a launch of one by-value argument block
// (gorgonia/cu passes 8 bytes per parameter, from two allocations per
// launch), CUDA graphs, module loads with the JIT error log in C memory,
// IPC, mapped host memory and the profiler range.
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
int ep_module_global(uint64_t module, const char* name, uint64_t* ptr, size_t* bytes);

// Launches function with a single by-value parameter block at args.
int ep_launch(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args);

// How many blocks of function fit on one SM at once.
int ep_occupancy(uint64_t function, unsigned block, unsigned smem, int* blocks);

// A CUDA graph of that one launch, captured on stream,
// instantiated and uploaded there (the graph itself is released; the
// executable one stays).
int ep_graph_capture(uint64_t function, unsigned grid, unsigned block, unsigned smem, uint64_t stream, void* args,
                     uint64_t* exec);
int ep_graph_launch(uint64_t exec, uint64_t stream);
int ep_stream_query(uint64_t stream);  // cuStreamQuery's result as an int (no Go error made per poll)
int ep_event_query(uint64_t event);    // cuEventQuery's, the same way
int ep_graph_destroy(uint64_t exec);

int ep_ipc_get(uint64_t dptr, void* handle_out);      // CU_IPC_HANDLE_SIZE bytes
int ep_ipc_open(const void* handle, uint64_t* dptr);
int ep_ipc_close(uint64_t dptr);
int ep_ipc_handle_size(void);

int ep_profiler_start(void);
int ep_profiler_stop(void);

// Page-locked host memory mapped into the device's address space: the host
// reads what kernels write there without a copy.
int ep_host_alloc_mapped(size_t bytes, void** host, uint64_t* dptr);
int ep_host_free(void* host);
unsigned ep_load_u32(const void* host);
void ep_store_u32(void* host, unsigned v);
#endif
