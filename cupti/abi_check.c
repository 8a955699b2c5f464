/*
 * Compile-time comparison of abi.h with the real CUPTI headers. The check runs
 * only when a complete header set is on the include path (cupti_activity.h
 * also needs the CUDA runtime's builtin_types.h); otherwise this file is
 * empty apart from ep_cupti_abi_checked.
 */
#include "abi.h"

#include <stddef.h>

#if defined(__has_include)
#if __has_include(<cupti_activity.h>) && __has_include(<cupti_version.h>) && __has_include(<builtin_types.h>) && \
    __has_include(<cuda_stdint.h>)
#define EP_CUPTI_HEADERS 1
#endif
#endif

#ifdef EP_CUPTI_HEADERS
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#define EP_CHECK_KERNEL_RECORD(T)                                                                   \
    _Static_assert(offsetof(T, kind) == EP_KREC_KIND, #T ".kind moved");                            \
    _Static_assert(offsetof(T, start) == EP_KREC_START, #T ".start moved");                         \
    _Static_assert(offsetof(T, end) == EP_KREC_END, #T ".end moved");                               \
    _Static_assert(offsetof(T, correlationId) == EP_KREC_CORRELATION, #T ".correlationId moved");   \
    _Static_assert(offsetof(T, name) == EP_KREC_NAME, #T ".name moved");                            \
    _Static_assert(sizeof(((T*)0)->start) == 8 && sizeof(((T*)0)->end) == 8, #T " timestamps resized"); \
    _Static_assert(sizeof(((T*)0)->name) == sizeof(void*), #T ".name is not a pointer")

EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel4);
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel5);
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel6);
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel7);
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel8);
#if CUPTI_API_VERSION >= 130000
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel9);
EP_CHECK_KERNEL_RECORD(CUpti_ActivityKernel10);
#endif

_Static_assert(CUPTI_SUCCESS == EP_CUPTI_SUCCESS, "CUPTI_SUCCESS");
_Static_assert(CUPTI_ERROR_MAX_LIMIT_REACHED == EP_CUPTI_ERROR_MAX_LIMIT_REACHED, "CUPTI_ERROR_MAX_LIMIT_REACHED");
_Static_assert(CUPTI_ACTIVITY_KIND_KERNEL == EP_CUPTI_KIND_KERNEL, "CUPTI_ACTIVITY_KIND_KERNEL");
_Static_assert(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL == EP_CUPTI_KIND_CONCURRENT_KERNEL,
               "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL");
_Static_assert(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED == EP_CUPTI_FLUSH_FORCED, "CUPTI_ACTIVITY_FLAG_FLUSH_FORCED");
_Static_assert(sizeof(CUptiResult) == sizeof(int), "CUptiResult is not int-sized");
_Static_assert(sizeof(CUpti_ActivityKind) == sizeof(int), "CUpti_ActivityKind is not int-sized");
_Static_assert(sizeof(((CUpti_Activity*)0)->kind) == sizeof(uint32_t), "CUpti_Activity.kind resized");

int ep_cupti_abi_checked(void) { return CUPTI_API_VERSION; }
#else
int ep_cupti_abi_checked(void) { return 0; }
#endif
