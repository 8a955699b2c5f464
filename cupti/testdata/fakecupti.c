/*
 * A stand-in for libcupti with the entry points the collector resolves, for
 * tests on machines without a GPU. On each flush it delivers, through the
 * registered callbacks and from a separate thread as CUPTI may, the kernel
 * records described by the environment:
 *
 *   FAKECUPTI_RECORDS  "name,start,end;name,start,end;..."
 *   FAKECUPTI_REPEAT   times the whole list is delivered (default 1)
 *   FAKECUPTI_DROPPED  records reported dropped after the flush
 *   FAKECUPTI_VERSION  cuptiGetVersion (default 130001)
 *   FAKECUPTI_ENABLE   result code of cuptiActivityEnable (default 0)
 *
 * Records are laid out as CUpti_ActivityKernel10 (216 bytes), each kernel
 * record preceded by a non-kernel record the collector must skip. Records
 * are delivered only if kernel activity was enabled since the last flush.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REC_SIZE 216
#define KIND_MEMCPY 1
#define KIND_CONCURRENT_KERNEL 10
#define RESULT_INVALID_OPERATION 7
#define RESULT_MAX_LIMIT_REACHED 12
#define RESULT_INVALID_KIND 21

typedef void (*requested_fn)(uint8_t**, size_t*, size_t*);
typedef void (*completed_fn)(void*, uint32_t, uint8_t*, size_t, size_t);

static requested_fn g_requested;
static completed_fn g_completed;
static int g_enabled, g_was_enabled;
static size_t g_dropped;

static long env_long(const char* key, long def) {
    const char* v = getenv(key);
    return v != NULL && *v != 0 ? strtol(v, NULL, 10) : def;
}

int cuptiGetVersion(uint32_t* v) {
    *v = (uint32_t)env_long("FAKECUPTI_VERSION", 130001);
    return 0;
}

int cuptiActivityRegisterCallbacks(requested_fn r, completed_fn c) {
    if (r == NULL || c == NULL) return 1;
    g_requested = r;
    g_completed = c;
    return 0;
}

int cuptiActivityEnable(int kind) {
    int rc = (int)env_long("FAKECUPTI_ENABLE", 0);
    if (rc != 0) return rc;
    if (kind != KIND_CONCURRENT_KERNEL) return RESULT_INVALID_KIND;
    g_enabled = g_was_enabled = 1;
    return 0;
}

int cuptiActivityDisable(int kind) {
    if (kind != KIND_CONCURRENT_KERNEL) return RESULT_INVALID_KIND;
    g_enabled = 0;
    return 0;
}

int cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, void** record) {
    uint8_t* p = *record == NULL ? buffer : (uint8_t*)*record + REC_SIZE;
    if (p + REC_SIZE > buffer + valid) return RESULT_MAX_LIMIT_REACHED;
    *record = p;
    return 0;
}

int cuptiActivityGetNumDroppedRecords(void* context, uint32_t stream, size_t* dropped) {
    (void)context;
    (void)stream;
    *dropped = g_dropped;
    g_dropped = 0;
    return 0;
}

int cuptiGetResultString(int result, const char** s) {
    switch (result) {
    case 0: *s = "CUPTI_SUCCESS"; return 0;
    case 39: *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; return 0;
    default: return 1;
    }
}

int cuptiGetErrorMessage(int result, const char** s) {
    if (result != 39) return 1;
    *s = "fake: another subscriber is attached";
    return 0;
}

struct delivery {
    uint8_t* buf;
    size_t size, valid;
};

static void* deliver_thread(void* arg) {
    struct delivery* d = arg;
    g_completed(NULL, 0, d->buf, d->size, d->valid);
    return NULL;
}

/* Hands a buffer back from another thread and waits, as a blocking flush. */
static void deliver(uint8_t* buf, size_t size, size_t valid) {
    struct delivery d = {buf, size, valid};
    pthread_t t;
    if (pthread_create(&t, NULL, deliver_thread, &d) != 0) {
        deliver_thread(&d);
        return;
    }
    pthread_join(t, NULL);
}

/* Names are owned by CUPTI and shared between records: kept for good. */
static const char* intern(const char* s, size_t n) {
    char* p = malloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static void put(uint8_t* rec, uint32_t kind, uint64_t start, uint64_t end, const char* name) {
    memset(rec, 0, REC_SIZE);
    memcpy(rec + 0, &kind, 4);
    memcpy(rec + 16, &start, 8);
    memcpy(rec + 24, &end, 8);
    memcpy(rec + 104, &name, sizeof name);
}

int cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    if (g_requested == NULL) return RESULT_INVALID_OPERATION;
    if (g_was_enabled) {
        const char* spec = getenv("FAKECUPTI_RECORDS");
        long repeat = env_long("FAKECUPTI_REPEAT", 1);
        uint8_t* buf = NULL;
        size_t size = 0, valid = 0, max = 0;
        for (long i = 0; spec != NULL && i < repeat; i++) {
            const char* p = spec;
            while (*p != 0) {
                const char* comma = strchr(p, ',');
                if (comma == NULL) break;
                char* rest;
                uint64_t start = strtoull(comma + 1, &rest, 10);
                uint64_t end = *rest == ',' ? strtoull(rest + 1, &rest, 10) : 0;
                if (buf != NULL && valid + 2 * REC_SIZE > size) {
                    deliver(buf, size, valid);
                    buf = NULL;
                }
                if (buf == NULL) {
                    g_requested(&buf, &size, &max);
                    valid = 0;
                    if (buf == NULL || size < 2 * REC_SIZE) return 8;
                }
                put(buf + valid, KIND_MEMCPY, start, end, NULL);
                put(buf + valid + REC_SIZE, KIND_CONCURRENT_KERNEL, start, end, intern(p, (size_t)(comma - p)));
                valid += 2 * REC_SIZE;
                p = *rest == ';' ? rest + 1 : rest;
            }
        }
        if (buf != NULL) deliver(buf, size, valid);
        g_dropped += (size_t)env_long("FAKECUPTI_DROPPED", 0);
    }
    g_was_enabled = g_enabled;
    return 0;
}
