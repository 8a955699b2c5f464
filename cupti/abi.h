/*
 * The slice of the CUPTI ABI this package uses, declared here rather than
 * taken from cupti.h: the package must build where no CUPTI headers (or only
 * incomplete ones) are installed, and the library it meets at run time may be
 * a different CUDA release than any header it was built against. Every value
 * below is identical in CUDA 11.8 and CUDA 13; abi_check.c compares them with
 * the real headers whenever a complete set is on the include path.
 */
#ifndef EPBENCH_CUPTI_ABI_H
#define EPBENCH_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* CUptiResult values this package branches on (the enum is int-sized). */
#define EP_CUPTI_SUCCESS 0
#define EP_CUPTI_ERROR_MAX_LIMIT_REACHED 12

/* CUpti_ActivityKind values. */
#define EP_CUPTI_KIND_KERNEL 3
#define EP_CUPTI_KIND_CONCURRENT_KERNEL 10

/* CUpti_ActivityFlag: flush every buffer, complete or not. */
#define EP_CUPTI_FLUSH_FORCED 1u

/*
 * Byte offsets of the fields read from a kernel record. They are the same in
 * CUpti_ActivityKernel3 through CUpti_ActivityKernel10 on 64-bit Linux; only
 * the fields after them and the record size change between versions, so the
 * records are walked with cuptiActivityGetNextRecord and never by size.
 */
#define EP_KREC_KIND 0         /* uint32_t (CUpti_ActivityKind) */
#define EP_KREC_START 16       /* uint64_t, ns */
#define EP_KREC_END 24         /* uint64_t, ns; 0 while the kernel has not finished */
#define EP_KREC_CORRELATION 92 /* uint32_t */
#define EP_KREC_NAME 104       /* const char*, owned by CUPTI */

/*
 * Oldest cuptiGetVersion accepted: 10 is CUDA 9.0, whose CUPTI reports
 * kernels with CUpti_ActivityKernel4, a layout with the offsets above.
 */
#define EP_CUPTI_MIN_VERSION 10u

typedef void (*ep_buffer_requested_fn)(uint8_t** buffer, size_t* size, size_t* max_records);
typedef void (*ep_buffer_completed_fn)(void* context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                       size_t valid_size);

/* Entry points, resolved with dlsym. */
typedef int (*ep_register_callbacks_fn)(ep_buffer_requested_fn requested, ep_buffer_completed_fn completed);
typedef int (*ep_kind_fn)(int kind);                    /* cuptiActivityEnable, cuptiActivityDisable */
typedef int (*ep_flush_all_fn)(uint32_t flag);          /* cuptiActivityFlushAll */
typedef int (*ep_next_record_fn)(uint8_t* buffer, size_t valid_size, void** record);
typedef int (*ep_dropped_fn)(void* context, uint32_t stream_id, size_t* dropped);
typedef int (*ep_result_string_fn)(int result, const char** str); /* cuptiGetResultString, cuptiGetErrorMessage */
typedef int (*ep_version_fn)(uint32_t* version);
typedef int (*ep_timestamp_fn)(uint64_t* timestamp); /* cuptiGetTimestamp */

#endif
