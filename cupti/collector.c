#include "collector.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Activity buffers handed to CUPTI: 8 MiB holds about 38k kernel records of
 * 216 bytes, far more than one timed loop produces between flushes. */
#define EP_BUFFER_SIZE ((size_t)8 << 20)
#define EP_BUFFER_ALIGN 8

/* Entry points, written by ep_cupti_bind and read by the callbacks on CUPTI's
 * threads, hence the atomic accesses. */
static ep_cupti_api g_api;

#define LOAD_FN(field) __atomic_load_n(&g_api.field, __ATOMIC_ACQUIRE)

/* Aggregates, all guarded by g_mu. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ep_kernel_stat g_table[EP_MAX_KERNELS];
static uint64_t g_hash[EP_MAX_KERNELS];
static ep_cupti_totals g_totals;
static uint64_t g_window_start; /* ep_cupti_set_window */

void ep_cupti_bind(const ep_cupti_api* api) {
    __atomic_store_n(&g_api.register_callbacks, api->register_callbacks, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.enable, api->enable, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.disable, api->disable, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.flush_all, api->flush_all, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.next_record, api->next_record, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.dropped, api->dropped, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.version, api->version, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.result_string, api->result_string, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.error_message, api->error_message, __ATOMIC_RELEASE);
    __atomic_store_n(&g_api.timestamp, api->timestamp, __ATOMIC_RELEASE);
}

/* FNV-1a over the whole name, so names that agree in their first
 * EP_NAME_MAX-1 bytes still get separate entries. */
static uint64_t name_hash(const char* s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s != 0; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static void account_locked(const char* name, uint64_t start, uint64_t end) {
    if (start != 0 && start < g_window_start) return; /* before the window */
    g_totals.records++;
    if (start == 0 || end == 0 || end < start) {
        g_totals.incomplete++;
        return;
    }
    uint64_t ns = end - start;
    if (name == NULL) name = "";

    if (strstr(name, "dispatch") != NULL) {
        g_totals.class_count[EP_CLASS_DISPATCH]++;
        g_totals.class_ns[EP_CLASS_DISPATCH] += ns;
    }
    if (strstr(name, "combine") != NULL) {
        g_totals.class_count[EP_CLASS_COMBINE]++;
        g_totals.class_ns[EP_CLASS_COMBINE] += ns;
    }

    uint64_t h = name_hash(name);
    int n = g_totals.kernels;
    for (int i = 0; i < n; i++) {
        if (g_hash[i] == h && strncmp(g_table[i].name, name, EP_NAME_MAX - 1) == 0) {
            g_table[i].count++;
            g_table[i].total_ns += ns;
            return;
        }
    }
    if (n == EP_MAX_KERNELS) {
        g_totals.other_count++;
        g_totals.other_ns += ns;
        return;
    }
    ep_kernel_stat* e = &g_table[n];
    size_t len = strlen(name);
    e->truncated = len > EP_NAME_MAX - 1;
    if (e->truncated) len = EP_NAME_MAX - 1;
    memcpy(e->name, name, len);
    e->name[len] = 0;
    e->count = 1;
    e->total_ns = ns;
    g_hash[n] = h;
    g_totals.kernels = n + 1;
}

static void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    void* p = NULL;
    if (posix_memalign(&p, EP_BUFFER_ALIGN, EP_BUFFER_SIZE) != 0) p = NULL;
    /* A NULL buffer makes CUPTI drop records, which it then reports. */
    *buffer = (uint8_t*)p;
    *size = p != NULL ? EP_BUFFER_SIZE : 0;
    *max_records = 0;
}

static void add_dropped(void* context, uint32_t stream_id) {
    ep_dropped_fn dropped = (ep_dropped_fn)LOAD_FN(dropped);
    size_t n = 0;
    if (dropped == NULL || dropped(context, stream_id, &n) != EP_CUPTI_SUCCESS || n == 0) return;
    pthread_mutex_lock(&g_mu);
    g_totals.dropped += n;
    pthread_mutex_unlock(&g_mu);
}

/* CUPTI calls are made without g_mu held: CUPTI may hold its own locks while
 * it calls back into buffer_completed. */
static void buffer_completed(void* context, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid_size) {
    (void)size;
    ep_next_record_fn next = (ep_next_record_fn)LOAD_FN(next_record);
    if (buffer != NULL && valid_size > 0 && next != NULL) {
        void* record = NULL;
        for (;;) {
            int r = next(buffer, valid_size, &record);
            if (r == EP_CUPTI_ERROR_MAX_LIMIT_REACHED) break;
            if (r != EP_CUPTI_SUCCESS || record == NULL) {
                pthread_mutex_lock(&g_mu);
                g_totals.unreadable++;
                pthread_mutex_unlock(&g_mu);
                break;
            }
            const uint8_t* rec = (const uint8_t*)record;
            uint32_t kind;
            memcpy(&kind, rec + EP_KREC_KIND, sizeof kind);
            if (kind != EP_CUPTI_KIND_CONCURRENT_KERNEL && kind != EP_CUPTI_KIND_KERNEL) continue;
            uint64_t start, end;
            const char* name;
            memcpy(&start, rec + EP_KREC_START, sizeof start);
            memcpy(&end, rec + EP_KREC_END, sizeof end);
            memcpy(&name, rec + EP_KREC_NAME, sizeof name);
            pthread_mutex_lock(&g_mu);
            account_locked(name, start, end);
            pthread_mutex_unlock(&g_mu);
        }
    }
    add_dropped(context, stream_id);
    free(buffer);
}

int ep_cupti_register_callbacks(void) {
    ep_register_callbacks_fn f = (ep_register_callbacks_fn)LOAD_FN(register_callbacks);
    if (f == NULL) return EP_CUPTI_NOT_BOUND;
    return f(buffer_requested, buffer_completed);
}

int ep_cupti_enable(int kind) {
    ep_kind_fn f = (ep_kind_fn)LOAD_FN(enable);
    return f != NULL ? f(kind) : EP_CUPTI_NOT_BOUND;
}

int ep_cupti_disable(int kind) {
    ep_kind_fn f = (ep_kind_fn)LOAD_FN(disable);
    return f != NULL ? f(kind) : EP_CUPTI_NOT_BOUND;
}

int ep_cupti_flush_all(uint32_t flag) {
    ep_flush_all_fn f = (ep_flush_all_fn)LOAD_FN(flush_all);
    return f != NULL ? f(flag) : EP_CUPTI_NOT_BOUND;
}

int ep_cupti_collect_dropped(void) {
    if (LOAD_FN(dropped) == NULL) return EP_CUPTI_NOT_BOUND;
    add_dropped(NULL, 0);
    return EP_CUPTI_SUCCESS;
}

int ep_cupti_get_version(uint32_t* version) {
    ep_version_fn f = (ep_version_fn)LOAD_FN(version);
    return f != NULL ? f(version) : EP_CUPTI_NOT_BOUND;
}

int ep_cupti_get_timestamp(uint64_t* timestamp) {
    ep_timestamp_fn f = (ep_timestamp_fn)LOAD_FN(timestamp);
    return f != NULL ? f(timestamp) : EP_CUPTI_NOT_BOUND;
}

void ep_cupti_set_window(uint64_t start) {
    pthread_mutex_lock(&g_mu);
    g_window_start = start;
    pthread_mutex_unlock(&g_mu);
}

static const char* describe(void* fn, int code) {
    const char* s = NULL;
    if (fn == NULL || ((ep_result_string_fn)fn)(code, &s) != EP_CUPTI_SUCCESS) return NULL;
    return s;
}

const char* ep_cupti_result_name(int code) { return describe(LOAD_FN(result_string), code); }
const char* ep_cupti_result_message(int code) { return describe(LOAD_FN(error_message), code); }

void ep_cupti_reset(void) {
    pthread_mutex_lock(&g_mu);
    memset(&g_totals, 0, sizeof g_totals);
    memset(g_hash, 0, sizeof g_hash);
    memset(g_table, 0, sizeof g_table);
    pthread_mutex_unlock(&g_mu);
}

int ep_cupti_snapshot(ep_cupti_totals* totals, ep_kernel_stat* stats, int cap) {
    pthread_mutex_lock(&g_mu);
    *totals = g_totals;
    int n = g_totals.kernels < cap ? g_totals.kernels : cap;
    if (n > 0) memcpy(stats, g_table, (size_t)n * sizeof *stats);
    pthread_mutex_unlock(&g_mu);
    return n;
}

void ep_cupti_feed(const char* name, uint64_t start, uint64_t end) {
    pthread_mutex_lock(&g_mu);
    account_locked(name, start, end);
    pthread_mutex_unlock(&g_mu);
}

void ep_cupti_feed_dropped(uint64_t n) {
    pthread_mutex_lock(&g_mu);
    g_totals.dropped += n;
    pthread_mutex_unlock(&g_mu);
}
