/*
 * The part of NCCL's host API that epbench calls, declared here from its
 * documented ABI so that nothing needs NCCL's headers to build and nothing
 * links libnccl: the entry points are resolved with dlsym into ep_nccl_api,
 * and each ep_nccl_* wrapper calls one of them.
 *
 * NCCL keeps the text of its last error per thread, so a wrapper whose call
 * fails copies ncclGetLastError into `last` before returning: Go may run the
 * next call on another thread.
 */
#ifndef EPBENCH_NCCL_API_H
#define EPBENCH_NCCL_API_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ncclResult_t values this package names. */
#define EP_NCCL_SUCCESS 0
#define EP_NCCL_IN_PROGRESS 7

/* ncclUniqueId is 128 opaque bytes, passed by value to ncclCommInitRank. */
#define EP_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[EP_NCCL_UNIQUE_ID_BYTES];
} ep_nccl_unique_id;

/* winFlags of ncclCommWindowRegister: a collective symmetric window. */
#define EP_NCCL_WIN_COLL_SYMMETRIC 0x01

/* NCCL's versioned structs (ncclConfig_t, ncclCommProperties_t) start with
 * size, magic and version: the NCCL version code their layout was written
 * for. Both layouts here are those of 2.30.7; a library reads them as that
 * version, or refuses a version newer than itself. */
#define EP_NCCL_API_MAGIC 0xcafebeefu
#define EP_NCCL_LAYOUT_VERSION 23007

/* ncclConfig_t, the configuration of ncclCommInitRankConfig. A field left
 * "undefined" takes NCCL's default (or its NCCL_* environment variable). */
#define EP_NCCL_CONFIG_UNDEF_INT INT_MIN
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
} ep_nccl_config;

/* The in/out struct of ncclCommQueryProperties: the caller fills size,
 * magic and version, the library the rest for that version. */
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
} ep_nccl_comm_properties;

/* GIN connection types of the device communicator's requirements. */
#define EP_NCCL_GIN_CONNECTION_NONE 0
#define EP_NCCL_GIN_CONNECTION_FULL 1 /* every rank to every rank */
#define EP_NCCL_GIN_CONNECTION_RAIL 2 /* ranks of the same rail only */

/* The NCCL version whose device headers epbench's GIN kernels are compiled
 * against: the version a device communicator's requirements are stamped
 * with, which selects the layout NCCL writes the communicator in. */
#define EP_NCCL_DEVICE_VERSION 23007

/* What a device communicator is to offer (ncclDevCommRequirements_t), in
 * the layout of NCCL 2.30.7. Starts with size, magic and version like the
 * config; the version is EP_NCCL_DEVICE_VERSION. NCCL copies the struct
 * during ncclDevCommCreate. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    void* resourceRequirementsList; /* NULL: no extra device resources */
    void* teamRequirementsList;     /* NULL: no extra teams */
    bool lsaMultimem;
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount;
    int lsaLLA2ASlotCount;
    bool ginForceEnable; /* superseded by ginConnectionType */
    int ginContextCount; /* a hint: NCCL may give more */
    int ginSignalCount;  /* indexed signals per context */
    int ginCounterCount; /* indexed counters per context */
    int ginConnectionType;
    bool ginExclusiveContexts;
    int ginQueueDepth;
    int ginTrafficClass;
    int worldGinBarrierCount;
    bool ginStrongSignalsRequired;
    bool ginVaSignalsRequired; /* signals that add into a window */
} ep_nccl_dev_comm_requirements;

/* The device communicator (ncclDevComm_t) is opaque here: NCCL fills it and
 * the kernels take it by value. For EP_NCCL_DEVICE_VERSION it has this many
 * bytes. The wrappers hand NCCL a zeroed buffer of EP_NCCL_DEV_COMM_SCRATCH
 * bytes, so a library that writes a longer struct cannot overrun it. */
#define EP_NCCL_DEV_COMM_BYTES 240
#define EP_NCCL_DEV_COMM_SCRATCH 4096

/* Resolved entry points, filled from dlsym (void* so Go can store them). */
typedef struct {
    void* get_version;            /* ncclGetVersion */
    void* get_unique_id;          /* ncclGetUniqueId */
    void* comm_init_rank_config;  /* ncclCommInitRankConfig */
    void* comm_get_async_error;   /* ncclCommGetAsyncError */
    void* comm_finalize;          /* ncclCommFinalize */
    void* comm_destroy;           /* ncclCommDestroy */
    void* comm_abort;             /* ncclCommAbort */
    void* mem_alloc;              /* ncclMemAlloc */
    void* mem_free;               /* ncclMemFree */
    void* window_register;        /* ncclCommWindowRegister */
    void* window_deregister;      /* ncclCommWindowDeregister */
    void* peer_device_pointer;    /* ncclGetPeerDevicePointer */
    void* get_error_string;       /* ncclGetErrorString */
    void* get_last_error;         /* ncclGetLastError */
    void* comm_query_properties;  /* ncclCommQueryProperties */
    void* dev_comm_create;        /* ncclDevCommCreate */
    void* dev_comm_destroy;       /* ncclDevCommDestroy */
} ep_nccl_api;

/* ncclGetVersion through a bare entry point: the version is checked before
 * the other symbols are resolved. */
int ep_nccl_get_version(void* fn, int* version);

/* NULL when the library gives no text for code. */
const char* ep_nccl_error_string(const ep_nccl_api* api, int code);

int ep_nccl_get_unique_id(const ep_nccl_api* api, char* id, char* last, size_t last_len);
/* A non-blocking communicator (config.blocking = 0): the call returns
 * EP_NCCL_IN_PROGRESS while NCCL sets it up on a thread of its own, and the
 * caller polls ep_nccl_comm_get_async_error. version is the config layout's
 * version passed to the library, see EP_NCCL_LAYOUT_VERSION. */
int ep_nccl_comm_init_rank_config(const ep_nccl_api* api, void** comm, int nranks, const char* id, int rank,
                                  unsigned int version, char* last, size_t last_len);
/* state receives the result of the communicator's last operation, or
 * EP_NCCL_IN_PROGRESS; when it is a failure, its text goes to last. */
int ep_nccl_comm_get_async_error(const ep_nccl_api* api, void* comm, int* state, char* last, size_t last_len);
int ep_nccl_comm_finalize(const ep_nccl_api* api, void* comm, char* last, size_t last_len);
int ep_nccl_comm_destroy(const ep_nccl_api* api, void* comm, char* last, size_t last_len);
int ep_nccl_comm_abort(const ep_nccl_api* api, void* comm, char* last, size_t last_len);
/* version is the layout version passed to the library, see EP_NCCL_LAYOUT_VERSION. */
int ep_nccl_comm_query_properties(const ep_nccl_api* api, void* comm, unsigned int version,
                                  ep_nccl_comm_properties* out, char* last, size_t last_len);

/* Device addresses travel as uint64_t so Go never holds them as pointers. */
int ep_nccl_mem_alloc(const ep_nccl_api* api, uint64_t* ptr, size_t size, char* last, size_t last_len);
int ep_nccl_mem_free(const ep_nccl_api* api, uint64_t ptr, char* last, size_t last_len);
/* On a non-blocking communicator NCCL registers on a thread of its own and
 * writes *win when done, after this call returns: win must be C memory that
 * outlives the registration (until ep_nccl_comm_get_async_error says it is
 * no longer in progress, or ep_nccl_comm_abort returned). */
int ep_nccl_window_register(const ep_nccl_api* api, void* comm, uint64_t buff, size_t size, int flags,
                            void** win, char* last, size_t last_len);
int ep_nccl_window_deregister(const ep_nccl_api* api, void* comm, void* win, char* last, size_t last_len);
int ep_nccl_peer_device_pointer(const ep_nccl_api* api, void* win, size_t offset, int peer, uint64_t* ptr,
                                char* last, size_t last_len);

/* A device communicator with proxy-style GIN: every rank connected to every
 * rank, contexts GIN contexts, no indexed signals or counters (the kernels
 * signal by adding into a window), strong and window signals required.
 * Like a window registration on a non-blocking communicator, NCCL writes
 * the communicator from its own thread after this call returns: out must be
 * C memory of EP_NCCL_DEV_COMM_SCRATCH bytes that outlives the step. */
int ep_nccl_dev_comm_create(const ep_nccl_api* api, void* comm, int contexts, void* out, char* last, size_t last_len);
/* dev is the EP_NCCL_DEV_COMM_BYTES that ep_nccl_dev_comm_create wrote. */
int ep_nccl_dev_comm_destroy(const ep_nccl_api* api, void* comm, const void* dev, char* last, size_t last_len);

#endif
