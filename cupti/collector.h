/*
 * The C half of the collector: CUPTI's buffer callbacks, the parsing of
 * completed buffers and the per-kernel-name aggregates. CUPTI may call the
 * callbacks on its own threads, so nothing here calls into Go and all state
 * is guarded by one mutex. Go reads the state only through ep_cupti_snapshot.
 */
#ifndef EPBENCH_CUPTI_COLLECTOR_H
#define EPBENCH_CUPTI_COLLECTOR_H

#include "abi.h"

#include <stddef.h>
#include <stdint.h>

/* Distinct kernel names kept apart; records of further names are summed
 * into one overflow bucket (they still count towards their class). */
#define EP_MAX_KERNELS 64
/* Bytes kept of each name, NUL included; longer names are truncated. */
#define EP_NAME_MAX 256

/* Returned by the call wrappers when no library is bound. */
#define EP_CUPTI_NOT_BOUND (-1)

enum { EP_CLASS_DISPATCH = 0, EP_CLASS_COMBINE = 1, EP_CLASSES = 2 };

/* The entry points of the loaded library; the optional ones may be NULL. */
typedef struct {
    void* register_callbacks; /* cuptiActivityRegisterCallbacks */
    void* enable;             /* cuptiActivityEnable */
    void* disable;            /* cuptiActivityDisable */
    void* flush_all;          /* cuptiActivityFlushAll */
    void* next_record;        /* cuptiActivityGetNextRecord */
    void* dropped;            /* cuptiActivityGetNumDroppedRecords */
    void* version;            /* cuptiGetVersion */
    void* result_string;      /* cuptiGetResultString (optional) */
    void* error_message;      /* cuptiGetErrorMessage (optional, CUDA 12.5+) */
    void* timestamp;          /* cuptiGetTimestamp (optional) */
} ep_cupti_api;

typedef struct {
    char name[EP_NAME_MAX]; /* NUL-terminated, possibly truncated */
    uint64_t count;
    uint64_t total_ns;
    int truncated;
} ep_kernel_stat;

typedef struct {
    /* Per class (a name containing both "dispatch" and "combine" counts in
     * both, as in ep_bench's substring matching). */
    uint64_t class_count[EP_CLASSES];
    uint64_t class_ns[EP_CLASSES];
    uint64_t records;    /* kernel records seen, complete or not */
    uint64_t incomplete; /* kernel records without a valid end timestamp */
    uint64_t unreadable; /* buffers whose walk stopped on an error */
    uint64_t dropped;    /* records CUPTI reported as dropped */
    uint64_t other_count, other_ns; /* names beyond EP_MAX_KERNELS */
    int kernels;                    /* entries used in the name table */
} ep_cupti_totals;

void ep_cupti_bind(const ep_cupti_api* api);

int ep_cupti_register_callbacks(void);
int ep_cupti_enable(int kind);
int ep_cupti_disable(int kind);
int ep_cupti_flush_all(uint32_t flag);
int ep_cupti_collect_dropped(void);
int ep_cupti_get_version(uint32_t* version);
/* CUPTI's current timestamp, in the time base of its records. */
int ep_cupti_get_timestamp(uint64_t* timestamp);
/* Records of kernels that started before `start` (CUPTI's time base) are
 * left out of the aggregates: those of the warm-up, delivered with the
 * window's when the buffers are flushed at its end. 0 keeps every record. */
void ep_cupti_set_window(uint64_t start);
/* Name and description of a result code, or NULL when the library cannot say. */
const char* ep_cupti_result_name(int code);
const char* ep_cupti_result_message(int code);

void ep_cupti_reset(void);
/* Copies the totals and up to cap name entries; returns the entries copied. */
int ep_cupti_snapshot(ep_cupti_totals* totals, ep_kernel_stat* stats, int cap);

/* Adds one kernel record or dropped records as the buffer parser would; used
 * by the package's tests to exercise aggregation without a GPU. */
void ep_cupti_feed(const char* name, uint64_t start, uint64_t end);
void ep_cupti_feed_dropped(uint64_t n);

/* CUPTI_API_VERSION of the headers abi.h was checked against, 0 if none. */
int ep_cupti_abi_checked(void);

#endif
