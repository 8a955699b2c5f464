/*
 * A stand-in for libnccl with the host entry points package nccl resolves,
 * for tests on machines without a GPU. "Device" memory is host memory, and
 * every communicator lives in this process. The environment is read on each
 * call, so one loaded copy serves tests that set it differently:
 *
 *   FAKE_NCCL_VERSION       ncclGetVersion's code (default 23007)
 *   FAKE_NCCL_INIT_RESULT   ncclCommInitRank fails with this result ...
 *   FAKE_NCCL_INIT_ERROR    ... and this last-error text
 *   FAKE_NCCL_LSA_PEERS     "all": every peer is load/store reachable
 *                           (default: only the own rank)
 *   FAKE_NCCL_NO_SYMMETRIC  1: window registration succeeds with no window,
 *                           as NCCL's does without symmetric memory support
 *   FAKE_NCCL_GIN, FAKE_NCCL_RAILED_GIN, FAKE_NCCL_LSA_TEAMS,
 *   FAKE_NCCL_MULTIMEM, FAKE_NCCL_HOST_RMA
 *                           what ncclCommQueryProperties reports
 *
 * Built with -DFAKE_NCCL_NO_PEER_POINTER it lacks ncclGetPeerDevicePointer,
 * as libraries before 2.30 do. Where the real library would only misbehave,
 * this one fails loudly: destroy before finalize, destroy with windows
 * registered, window flags other than the symmetric one, and a properties
 * struct of the wrong size, magic or version.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };

#define ID_BYTES 128
#define ID_TAG "fakenccl-id"
#define WINDOW_ALIGN 4096
#define PROPS_MAGIC 0xcafebeefu

typedef struct {
    char bytes[ID_BYTES];
} unique_id;

struct comm {
    int nranks, rank;
    int finalized;
    int windows;
};

struct window {
    struct comm* comm;
    char* base;
    size_t size;
};

/* The properties layout of version 2.30, written out on its own here so a
 * mismatch with the package's declaration shows up in the tests. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int rank;
    int nRanks;
    int cudaDev;
    int nvmlDev;
    bool deviceApiSupport;
    bool multimemSupport;
    int ginType;
    int nLsaTeams;
    bool hostRmaSupport;
    int railedGinType;
} properties;

static __thread char last_error[512];

static int fail(int code, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(last_error, sizeof last_error, format, ap);
    va_end(ap);
    return code;
}

static long env_long(const char* key, long def) {
    const char* v = getenv(key);
    return v != NULL && *v != 0 ? strtol(v, NULL, 10) : def;
}

static int version(void) { return (int)env_long("FAKE_NCCL_VERSION", 23007); }

int ncclGetVersion(int* v) {
    if (v == NULL) return fail(INVALID_ARGUMENT, "fake: NULL version");
    *v = version();
    return OK;
}

const char* ncclGetErrorString(int code) {
    switch (code) {
    case OK: return "fake: success";
    case 1: return "fake: CUDA failure";
    case SYSTEM_ERROR: return "fake: system error";
    case 3: return "fake: internal error";
    case INVALID_ARGUMENT: return "fake: invalid argument";
    case INVALID_USAGE: return "fake: invalid usage";
    case 6: return "fake: remote error";
    case 7: return "fake: in progress";
    }
    return "fake: unknown result";
}

const char* ncclGetLastError(void* comm) {
    (void)comm;
    return last_error;
}

/* The tag, then a byte pattern, so a mangled id passed to init shows. */
int ncclGetUniqueId(unique_id* id) {
    if (id == NULL) return fail(INVALID_ARGUMENT, "fake: NULL unique id");
    memset(id->bytes, 0, ID_BYTES);
    memcpy(id->bytes, ID_TAG, sizeof ID_TAG);
    for (int i = (int)sizeof ID_TAG; i < ID_BYTES; i++) id->bytes[i] = (char)(i * 7);
    return OK;
}

int ncclCommInitRank(struct comm** out, int nranks, unique_id id, int rank) {
    long rc = env_long("FAKE_NCCL_INIT_RESULT", 0);
    if (rc != 0) {
        const char* msg = getenv("FAKE_NCCL_INIT_ERROR");
        return fail((int)rc, "%s", msg != NULL ? msg : "");
    }
    if (out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    if (nranks < 1 || rank < 0 || rank >= nranks) return fail(INVALID_ARGUMENT, "fake: rank %d of %d ranks", rank, nranks);
    if (memcmp(id.bytes, ID_TAG, sizeof ID_TAG) != 0) return fail(INVALID_ARGUMENT, "fake: unique id not from ncclGetUniqueId");
    for (int i = (int)sizeof ID_TAG; i < ID_BYTES; i++) {
        if (id.bytes[i] != (char)(i * 7)) return fail(INVALID_ARGUMENT, "fake: unique id byte %d changed", i);
    }
    struct comm* c = calloc(1, sizeof *c);
    if (c == NULL) return fail(SYSTEM_ERROR, "fake: out of memory");
    c->nranks = nranks;
    c->rank = rank;
    *out = c;
    return OK;
}

int ncclCommFinalize(struct comm* c) {
    if (c == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    c->finalized = 1;
    return OK;
}

int ncclCommDestroy(struct comm* c) {
    if (c == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    if (!c->finalized) return fail(INVALID_USAGE, "fake: ncclCommDestroy before ncclCommFinalize");
    if (c->windows != 0) return fail(INVALID_USAGE, "fake: %d windows still registered", c->windows);
    free(c);
    return OK;
}

int ncclCommQueryProperties(struct comm* c, properties* p) {
    if (c == NULL || p == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or properties");
    if (p->size != sizeof *p) return fail(INVALID_USAGE, "fake: properties size %zu, want %zu", p->size, sizeof *p);
    if (p->magic != PROPS_MAGIC) return fail(INVALID_USAGE, "fake: properties magic %#x", p->magic);
    if ((int)p->version > version()) return fail(INVALID_USAGE, "fake: properties version %u is newer than the library (%d)", p->version, version());
    if (p->version < 23000) return fail(INVALID_USAGE, "fake: properties version %u predates 2.30", p->version);
    p->rank = c->rank;
    p->nRanks = c->nranks;
    p->cudaDev = c->rank;
    p->nvmlDev = c->rank + 100;
    p->deviceApiSupport = true;
    p->multimemSupport = env_long("FAKE_NCCL_MULTIMEM", 0) != 0;
    p->ginType = (int)env_long("FAKE_NCCL_GIN", 0);
    p->nLsaTeams = (int)env_long("FAKE_NCCL_LSA_TEAMS", 1);
    p->hostRmaSupport = env_long("FAKE_NCCL_HOST_RMA", 0) != 0;
    p->railedGinType = (int)env_long("FAKE_NCCL_RAILED_GIN", 0);
    return OK;
}

int ncclMemAlloc(void** ptr, size_t size) {
    if (ptr == NULL || size == 0) return fail(INVALID_ARGUMENT, "fake: ncclMemAlloc of %zu bytes", size);
    size_t rounded = (size + WINDOW_ALIGN - 1) / WINDOW_ALIGN * WINDOW_ALIGN;
    if (posix_memalign(ptr, WINDOW_ALIGN, rounded) != 0) return fail(SYSTEM_ERROR, "fake: out of memory");
    return OK;
}

int ncclMemFree(void* ptr) {
    free(ptr);
    return OK;
}

int ncclCommWindowRegister(struct comm* c, void* buff, size_t size, struct window** out, int flags) {
    if (c == NULL || out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or window");
    if (flags != 0x01) return fail(INVALID_USAGE, "fake: window flags %#x, want the collective symmetric flag", flags);
    if ((uintptr_t)buff % WINDOW_ALIGN != 0) return fail(INVALID_ARGUMENT, "fake: window base %p is not %d-byte aligned", buff, WINDOW_ALIGN);
    if (size == 0) return fail(INVALID_ARGUMENT, "fake: empty window");
    if (env_long("FAKE_NCCL_NO_SYMMETRIC", 0) != 0) {
        *out = NULL;
        return OK;
    }
    struct window* w = calloc(1, sizeof *w);
    if (w == NULL) return fail(SYSTEM_ERROR, "fake: out of memory");
    w->comm = c;
    w->base = buff;
    w->size = size;
    c->windows++;
    *out = w;
    return OK;
}

int ncclCommWindowDeregister(struct comm* c, struct window* w) {
    if (c == NULL || w == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or window");
    if (w->comm != c) return fail(INVALID_ARGUMENT, "fake: window of another communicator");
    c->windows--;
    free(w);
    return OK;
}

#ifndef FAKE_NCCL_NO_PEER_POINTER
/* Reachable peers' buffers sit at FAKE_PEER_BASE * (peer+1); nothing is
 * mapped there, the address only has to be predictable. */
#define FAKE_PEER_BASE ((uintptr_t)1 << 40)

int ncclGetPeerDevicePointer(struct window* w, size_t offset, int peer, void** out) {
    if (w == NULL || out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL window or pointer");
    if (peer < 0 || peer >= w->comm->nranks) return fail(INVALID_ARGUMENT, "fake: peer %d of %d ranks", peer, w->comm->nranks);
    if (offset >= w->size) return fail(INVALID_ARGUMENT, "fake: offset %zu past the %zu-byte window", offset, w->size);
    const char* lsa = getenv("FAKE_NCCL_LSA_PEERS");
    if (peer == w->comm->rank) {
        *out = w->base + offset;
    } else if (lsa != NULL && strcmp(lsa, "all") == 0) {
        *out = (void*)(FAKE_PEER_BASE * (uintptr_t)(peer + 1) + offset);
    } else {
        *out = NULL;
    }
    return OK;
}
#endif
