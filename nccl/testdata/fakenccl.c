/*
 * A stand-in for libnccl with the host entry points package nccl resolves,
 * for tests on machines without a GPU. "Device" memory is host memory, and
 * every communicator lives in this process. The environment is read on each
 * call, so one loaded copy serves tests that set it differently:
 *
 *   FAKE_NCCL_VERSION       ncclGetVersion's code (default 23007)
 *   FAKE_NCCL_INIT_RESULT   ncclCommInitRankConfig fails at once with this
 *                           result, FAKE_NCCL_INIT_ERROR its last-error text
 *   FAKE_NCCL_<STEP>_POLLS  a step of a non-blocking communicator (INIT,
 *                           REGISTER: a window registration, DEVCOMM: a
 *                           device communicator's creation, FINALIZE) stays
 *                           in progress for this many ncclCommGetAsyncError
 *                           polls (default 0), or "forever": a peer that
 *                           never joins the step
 *   FAKE_NCCL_<STEP>_ASYNC  ... and then fails with this result ...
 *   FAKE_NCCL_<STEP>_ERROR  ... and this last-error text
 *   FAKE_NCCL_LOG           a file that every call creating or releasing a
 *                           communicator, window, device communicator or
 *                           buffer appends its name to, one a line
 *   FAKE_NCCL_DEVCOMM_LOG   a file that ncclDevCommCreate appends the
 *                           requirements it got to, one line of name=value
 *   FAKE_NCCL_DEVCOMM_SIZE  how many bytes of device communicator the
 *                           library writes (default 240, NCCL 2.30.7's; at
 *                           most 4096), as a later library may write more
 *   FAKE_NCCL_LSA_PEERS     "all": every peer is load/store reachable
 *                           (default: only the own rank)
 *   FAKE_NCCL_NO_SYMMETRIC  1: window registration succeeds with no window,
 *                           as NCCL's does without symmetric memory support
 *   FAKE_NCCL_GIN, FAKE_NCCL_RAILED_GIN, FAKE_NCCL_LSA_TEAMS,
 *   FAKE_NCCL_MULTIMEM, FAKE_NCCL_HOST_RMA
 *                           what ncclCommQueryProperties reports
 *
 * Communicators are non-blocking (blocking = 0 in the config), and as NCCL
 * 2.30 does with those, init returns in progress unless it is done at once, finalize
 * returns in progress, and a window registration returns success while it is
 * still in progress, writing the window only when done; so does the creation
 * of a device communicator. A step completes on
 * the poll after its last in-progress one (an init with no polls to wait
 * for, within the call). ncclCommAbort ends a communicator in any state.
 *
 * Built with -DFAKE_NCCL_NO_PEER_POINTER it lacks ncclGetPeerDevicePointer,
 * as libraries before 2.30 do. Where the real library would only misbehave,
 * this one fails loudly: destroy before finalize, destroy with windows
 * registered or device communicators left, window flags other than the
 * symmetric one, a communicator used
 * before its step completed, a config or properties struct of the wrong
 * size, magic or version, a blocking config, a config field other than
 * blocking set, device communicator requirements of the wrong size, magic or
 * version, and the destruction of a device communicator this library did
 * not make for the communicator.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, IN_PROGRESS = 7 };

#define ID_BYTES 128
#define ID_TAG "fakenccl-id"
#define WINDOW_ALIGN 4096
#define API_MAGIC 0xcafebeefu
#define UNDEF_INT INT_MIN

typedef struct {
    char bytes[ID_BYTES];
} unique_id;

/* The steps of a non-blocking communicator, by their environment names. */
enum step { STEP_NONE, STEP_INIT, STEP_REGISTER, STEP_DEVCOMM, STEP_FINALIZE };
static const char* const step_names[] = {"", "INIT", "REGISTER", "DEVCOMM", "FINALIZE"};

struct window;

struct comm {
    int nranks, rank;
    int finalized;
    int windows;
    int state;      /* what ncclCommGetAsyncError says: OK, IN_PROGRESS or a step's failure */
    enum step step; /* the step in progress */
    long polls;     /* in-progress polls left; -1: forever */
    int result;     /* what the step ends with */
    /* A registration in progress. */
    void* buff;
    size_t size;
    struct window** out;
    /* Device communicators made and not destroyed, and a creation in
     * progress: where it goes, its version and contexts. */
    int devcomms;
    unsigned char* dev_out;
    unsigned int dev_version;
    int dev_contexts;
};

struct window {
    struct comm* comm;
    char* base;
    size_t size;
};

/* The config layout of version 2.30, written out on its own like the
 * properties below. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
    int splitShare;
    int trafficClass;
    const char* commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
    int graphUsageMode;
    int numRmaCtx;
    int maxP2pPeers;
    int graphStreamOrdering;
} config;

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

/* The device communicator requirements of version 2.30.7, written out on
 * their own like the config. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    void* resourceRequirementsList;
    void* teamRequirementsList;
    bool lsaMultimem;
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount;
    int lsaLLA2ASlotCount;
    bool ginForceEnable;
    int ginContextCount;
    int ginSignalCount;
    int ginCounterCount;
    int ginConnectionType;
    bool ginExclusiveContexts;
    int ginQueueDepth;
    int ginTrafficClass;
    int worldGinBarrierCount;
    bool ginStrongSignalsRequired;
    bool ginVaSignalsRequired;
} dev_requirements;

/* Where the 2.30.7 device communicator keeps what this library writes and
 * reads of it; the rest stays zero. The GIN handle slot holds the
 * communicator it was made for. */
#define DEV_COMM_BYTES 240
#define DEV_COMM_MAX 4096
#define DEV_MAGIC 0
#define DEV_VERSION 4
#define DEV_RANK 8
#define DEV_NRANKS 12
#define DEV_GIN_HANDLE 152
#define DEV_GIN_CONTEXTS 200

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

static void log_call(const char* name) {
    const char* path = getenv("FAKE_NCCL_LOG");
    if (path == NULL || *path == 0) return;
    FILE* f = fopen(path, "a");
    if (f == NULL) return;
    fprintf(f, "%s\n", name);
    fclose(f);
}

static const char* step_env(enum step step, const char* what, char* key, size_t len) {
    snprintf(key, len, "FAKE_NCCL_%s_%s", step_names[step], what);
    return getenv(key);
}

/* finish_step ends c's step with its result: on success the step's effect
 * happens now, on failure the error text is set. */
static void finish_step(struct comm* c) {
    enum step step = c->step;
    c->step = STEP_NONE;
    c->state = c->result;
    if (c->result != OK) {
        char key[64];
        const char* msg = step_env(step, "ERROR", key, sizeof key);
        fail(c->result, "%s", msg != NULL ? msg : "");
        return;
    }
    switch (step) {
    case STEP_REGISTER:
        if (env_long("FAKE_NCCL_NO_SYMMETRIC", 0) != 0) {
            *c->out = NULL;
            break;
        }
        struct window* w = calloc(1, sizeof *w);
        if (w == NULL) {
            c->state = fail(SYSTEM_ERROR, "fake: out of memory");
            break;
        }
        w->comm = c;
        w->base = c->buff;
        w->size = c->size;
        c->windows++;
        *c->out = w;
        break;
    case STEP_DEVCOMM: {
        long n = env_long("FAKE_NCCL_DEVCOMM_SIZE", DEV_COMM_BYTES);
        if (n < DEV_COMM_BYTES || n > DEV_COMM_MAX) n = DEV_COMM_BYTES;
        unsigned char* d = c->dev_out;
        memset(d, 0, DEV_COMM_BYTES);
        memset(d + DEV_COMM_BYTES, 0xab, (size_t)n - DEV_COMM_BYTES);
        unsigned int magic = API_MAGIC;
        uintptr_t handle = (uintptr_t)c;
        memcpy(d + DEV_MAGIC, &magic, sizeof magic);
        memcpy(d + DEV_VERSION, &c->dev_version, sizeof c->dev_version);
        memcpy(d + DEV_RANK, &c->rank, sizeof c->rank);
        memcpy(d + DEV_NRANKS, &c->nranks, sizeof c->nranks);
        memcpy(d + DEV_GIN_HANDLE, &handle, sizeof handle);
        memcpy(d + DEV_GIN_CONTEXTS, &c->dev_contexts, sizeof c->dev_contexts);
        c->devcomms++;
        break;
    }
    case STEP_FINALIZE:
        c->finalized = 1;
        break;
    default:
        break;
    }
}

/* start_step begins step on c as its environment says. */
static void start_step(struct comm* c, enum step step) {
    char key[64];
    const char* polls = step_env(step, "POLLS", key, sizeof key);
    const char* result = step_env(step, "ASYNC", key, sizeof key);
    c->step = step;
    c->polls = polls != NULL && strcmp(polls, "forever") == 0 ? -1 : (polls != NULL && *polls != 0 ? strtol(polls, NULL, 10) : 0);
    c->result = result != NULL && *result != 0 ? (int)strtol(result, NULL, 10) : OK;
    c->state = IN_PROGRESS;
}

/* ready is NCCL's check that a communicator's last step completed. */
static int ready(struct comm* c) {
    if (c->state == IN_PROGRESS) return fail(INVALID_ARGUMENT, "fake: communicator used before its %s step completed", step_names[c->step]);
    if (c->state != OK) return fail(c->state, "fake: communicator failed before");
    return OK;
}

int ncclCommGetAsyncError(struct comm* c, int* state) {
    if (c == NULL || state == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or state");
    if (c->state == IN_PROGRESS) {
        if (c->polls == 0) {
            finish_step(c);
        } else if (c->polls > 0) {
            c->polls--;
        }
    }
    *state = c->state;
    return OK;
}

int ncclCommAbort(struct comm* c) {
    log_call("ncclCommAbort");
    free(c);
    return OK;
}

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

/* check_header fails loudly on a versioned struct (what) that NCCL 2.30
 * would refuse or read in another layout: its size, magic and version,
 * which NCCL's versioned structs start with. */
static int check_header(const char* what, size_t size, size_t want, unsigned int magic, unsigned int v) {
    if (size != want) return fail(INVALID_USAGE, "fake: %s size %zu, want %zu", what, size, want);
    if (magic != API_MAGIC) return fail(INVALID_USAGE, "fake: %s magic %#x", what, magic);
    if ((int)v > version()) return fail(INVALID_USAGE, "fake: %s version %u is newer than the library (%d)", what, v, version());
    if (v < 23000) return fail(INVALID_USAGE, "fake: %s version %u predates 2.30", what, v);
    return OK;
}

/* check_config fails loudly on a config that NCCL 2.30.7 would read
 * differently from what the caller meant. */
static int check_config(const config* cfg) {
    int rc = check_header("config", cfg->size, sizeof *cfg, cfg->magic, cfg->version);
    if (rc != OK) return rc;
    if (cfg->blocking != 0) return fail(INVALID_USAGE, "fake: config blocking %d, want a non-blocking communicator", cfg->blocking);
    const int ints[] = {cfg->cgaClusterSize, cfg->minCTAs, cfg->maxCTAs, cfg->splitShare, cfg->trafficClass,
                        cfg->collnetEnable, cfg->CTAPolicy, cfg->shrinkShare, cfg->nvlsCTAs, cfg->nChannelsPerNetPeer,
                        cfg->nvlinkCentricSched, cfg->graphUsageMode, cfg->numRmaCtx, cfg->maxP2pPeers,
                        cfg->graphStreamOrdering};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i] != UNDEF_INT) return fail(INVALID_USAGE, "fake: config int field %zu after blocking set to %d", i + 1, ints[i]);
    }
    if (cfg->netName != NULL || cfg->commName != NULL) return fail(INVALID_USAGE, "fake: config netName or commName set");
    return OK;
}

int ncclCommInitRankConfig(struct comm** out, int nranks, unique_id id, int rank, config* cfg) {
    log_call("ncclCommInitRankConfig");
    long rc = env_long("FAKE_NCCL_INIT_RESULT", 0);
    if (rc != 0) {
        const char* msg = getenv("FAKE_NCCL_INIT_ERROR");
        return fail((int)rc, "%s", msg != NULL ? msg : "");
    }
    if (out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) return fail(INVALID_ARGUMENT, "fake: rank %d of %d ranks", rank, nranks);
    if (memcmp(id.bytes, ID_TAG, sizeof ID_TAG) != 0) return fail(INVALID_ARGUMENT, "fake: unique id not from ncclGetUniqueId");
    for (int i = (int)sizeof ID_TAG; i < ID_BYTES; i++) {
        if (id.bytes[i] != (char)(i * 7)) return fail(INVALID_ARGUMENT, "fake: unique id byte %d changed", i);
    }
    if (cfg == NULL) return fail(INVALID_USAGE, "fake: no config, want a non-blocking communicator");
    int crc = check_config(cfg);
    if (crc != OK) return crc;
    struct comm* c = calloc(1, sizeof *c);
    if (c == NULL) return fail(SYSTEM_ERROR, "fake: out of memory");
    c->nranks = nranks;
    c->rank = rank;
    *out = c;
    /* Like NCCL, answer with the communicator's state at return. */
    start_step(c, STEP_INIT);
    if (c->polls == 0) finish_step(c);
    return c->state;
}

int ncclCommFinalize(struct comm* c) {
    log_call("ncclCommFinalize");
    if (c == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    int rc = ready(c);
    if (rc != OK) return rc;
    if (c->finalized) return fail(INVALID_ARGUMENT, "fake: finalized twice");
    start_step(c, STEP_FINALIZE);
    return c->state;
}

int ncclCommDestroy(struct comm* c) {
    log_call("ncclCommDestroy");
    if (c == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm");
    int rc = ready(c);
    if (rc != OK) return rc;
    if (!c->finalized) return fail(INVALID_USAGE, "fake: ncclCommDestroy before ncclCommFinalize");
    if (c->windows != 0) return fail(INVALID_USAGE, "fake: %d windows still registered", c->windows);
    if (c->devcomms != 0) return fail(INVALID_USAGE, "fake: %d device communicators left", c->devcomms);
    free(c);
    return OK;
}

int ncclCommQueryProperties(struct comm* c, properties* p) {
    if (c == NULL || p == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or properties");
    int rc = check_header("properties", p->size, sizeof *p, p->magic, p->version);
    if (rc != OK) return rc;
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
    log_call("ncclMemAlloc");
    if (ptr == NULL || size == 0) return fail(INVALID_ARGUMENT, "fake: ncclMemAlloc of %zu bytes", size);
    size_t rounded = (size + WINDOW_ALIGN - 1) / WINDOW_ALIGN * WINDOW_ALIGN;
    if (posix_memalign(ptr, WINDOW_ALIGN, rounded) != 0) return fail(SYSTEM_ERROR, "fake: out of memory");
    return OK;
}

int ncclMemFree(void* ptr) {
    log_call("ncclMemFree");
    free(ptr);
    return OK;
}

int ncclCommWindowRegister(struct comm* c, void* buff, size_t size, struct window** out, int flags) {
    log_call("ncclCommWindowRegister");
    if (c == NULL || out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or window");
    *out = NULL;
    if (flags != 0x01) return fail(INVALID_USAGE, "fake: window flags %#x, want the collective symmetric flag", flags);
    if ((uintptr_t)buff % WINDOW_ALIGN != 0) return fail(INVALID_ARGUMENT, "fake: window base %p is not %d-byte aligned", buff, WINDOW_ALIGN);
    if (size == 0) return fail(INVALID_ARGUMENT, "fake: empty window");
    int rc = ready(c);
    if (rc != OK) return rc;
    c->buff = buff;
    c->size = size;
    c->out = out;
    start_step(c, STEP_REGISTER);
    /* NCCL's answer even while the registration is in progress. */
    return OK;
}

int ncclCommWindowDeregister(struct comm* c, struct window* w) {
    log_call("ncclCommWindowDeregister");
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

static void log_requirements(const dev_requirements* r) {
    const char* path = getenv("FAKE_NCCL_DEVCOMM_LOG");
    if (path == NULL || *path == 0) return;
    FILE* f = fopen(path, "a");
    if (f == NULL) return;
    fprintf(f,
            "size=%zu magic=%#x version=%u resourceRequirementsList=%#lx teamRequirementsList=%#lx lsaMultimem=%d "
            "barrierCount=%d lsaBarrierCount=%d railGinBarrierCount=%d lsaLLA2ABlockCount=%d lsaLLA2ASlotCount=%d "
            "ginForceEnable=%d ginContextCount=%d ginSignalCount=%d ginCounterCount=%d ginConnectionType=%d "
            "ginExclusiveContexts=%d ginQueueDepth=%d ginTrafficClass=%d worldGinBarrierCount=%d "
            "ginStrongSignalsRequired=%d ginVaSignalsRequired=%d\n",
            r->size, r->magic, r->version, (unsigned long)(uintptr_t)r->resourceRequirementsList,
            (unsigned long)(uintptr_t)r->teamRequirementsList, r->lsaMultimem,
            r->barrierCount, r->lsaBarrierCount, r->railGinBarrierCount, r->lsaLLA2ABlockCount, r->lsaLLA2ASlotCount,
            r->ginForceEnable, r->ginContextCount, r->ginSignalCount, r->ginCounterCount, r->ginConnectionType,
            r->ginExclusiveContexts, r->ginQueueDepth, r->ginTrafficClass, r->worldGinBarrierCount,
            r->ginStrongSignalsRequired, r->ginVaSignalsRequired);
    fclose(f);
}

int ncclDevCommCreate(struct comm* c, const dev_requirements* r, unsigned char* out) {
    log_call("ncclDevCommCreate");
    if (c == NULL || r == NULL || out == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm, requirements or device communicator");
    int rc = check_header("requirements", r->size, sizeof *r, r->magic, r->version);
    if (rc == OK) rc = ready(c);
    if (rc != OK) return rc;
    log_requirements(r);
    c->dev_out = out;
    c->dev_version = r->version;
    c->dev_contexts = r->ginContextCount;
    start_step(c, STEP_DEVCOMM);
    /* NCCL's answer even while the creation is in progress. */
    return OK;
}

int ncclDevCommDestroy(struct comm* c, const unsigned char* d) {
    log_call("ncclDevCommDestroy");
    if (c == NULL || d == NULL) return fail(INVALID_ARGUMENT, "fake: NULL comm or device communicator");
    unsigned int magic;
    uintptr_t handle;
    memcpy(&magic, d + DEV_MAGIC, sizeof magic);
    memcpy(&handle, d + DEV_GIN_HANDLE, sizeof handle);
    if (magic != API_MAGIC) return fail(INVALID_USAGE, "fake: device communicator magic %#x", magic);
    if (handle != (uintptr_t)c) return fail(INVALID_ARGUMENT, "fake: device communicator of another communicator");
    if (c->devcomms == 0) return fail(INVALID_USAGE, "fake: no device communicator left to destroy");
    c->devcomms--;
    return OK;
}
