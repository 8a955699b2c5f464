/*
 * rmaipc: a test-only RMA plugin that lets NCCL's proxy GIN run between the
 * ranks of ONE node, with no RDMA NIC.
 *
 * What it is for. epbench's -n path sends to every peer through NCCL's
 * GPU-initiated networking (GIN). On a node without an RDMA NIC, NCCL 2.30
 * can still offer its proxy GIN when an external RMA plugin is loaded: the
 * kernels post put/signal descriptors to host memory, and NCCL's GIN progress
 * thread hands each one to this plugin. The plugin moves the bytes with CUDA
 * copies into the peers' memory, mapped here through CUDA VMM IPC (POSIX file
 * descriptors passed over Unix sockets). Ranks may be separate processes on
 * one GPU (under MPS) or on different GPUs of the node.
 *
 * How it is loaded (build with scripts/rma-plugin.sh OUT.so):
 *   NCCL_RMA_PLUGIN=/abs/path/OUT.so   NCCL opens it and takes ncclRmaPlugin_v14
 *   NCCL_GIN_TYPE=2                    asks NCCL for the proxy GIN
 *   NCCL_MULTI_RANK_GPU_ENABLE=1       only when several ranks share a GPU
 *   EPBENCH_RMA_DELAY_PASSES=N         see below (default 50; 0: no delay)
 *   EPBENCH_RMA_TRACE=N                log the first N puts and signals
 *   EPBENCH_RMA_STALL_AFTER=N          after N puts, stop: no later put or
 *                                      signal ever completes (a backend that
 *                                      stopped making progress, for the test
 *                                      that the host does not wait for ever)
 *   (a value of these three that is not a count makes the context fail)
 *
 * Deliberate test behaviours (the point of the plugin is to exercise the
 * ordering rules the kernels rely on, not to be fast; every copy is staged
 * through pinned host memory, see copyData):
 *  - A put without a signal is not executed when it is issued: it waits in a
 *    queue per (context, target rank) and its request stays not done. The
 *    queue is executed NEWEST FIRST, either once its oldest put has waited N
 *    progress passes, or when a signalled put to the same (context, rank)
 *    needs it: a strong signal (all earlier puts of the context to that peer
 *    must be visible before it) and a signal-only call, which is how NCCL
 *    sends a VA signal after its put (the plugin cannot tell which queued put
 *    such a signal is bundled with, so it runs them all).
 *  - A weak signal that carries its own put leaves the queue alone.
 *  - Deregistering a window first runs every queue holding a put into or
 *    out of it, so no queued put outlives its window (NCCL may deregister
 *    before it stops polling, on abort).
 *  - Only signals into windows (VA signals) work across ranks: NCCL allocates
 *    its indexed-signal buffer without an exportable handle, so a peer's one
 *    cannot be mapped here; such a signal fails with a warning (so does
 *    NCCL's device-side GIN barrier, which signals by index).
 *  - The signal is a read-add-write done by the sender, exact only because
 *    each epbench signal word has a single writer (its source rank).
 * plugin_check.c checks the queue's behaviours on the CPU (make test).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- The plugin interface: RMA version 14 as NCCL 2.30 loads it. ---- */

typedef int rmaResult; /* NCCL's result codes */
enum { OK = 0, ERR_CUDA = 1, ERR_SYSTEM = 2, ERR_INTERNAL = 3, ERR_ARGUMENT = 4, ERR_USAGE = 5 };

typedef void (*rmaLogger)(int level, unsigned long subsystem, const char* file, int line, const char* fmt, ...);
enum { LOG_WARN = 2, LOG_INFO = 3 };
#define LOG_SUBSYS_NET 0x10UL

enum { PTR_HOST = 1, PTR_CUDA = 2 };            /* memory kinds in ptrSupport and regMrSym */
enum { SIGNAL_INC = 1, SIGNAL_ADD = 2 };        /* signal operations */
enum { DEVICE_GIN_PROXY = 2 };                  /* netDeviceType of a proxy-GIN backend */
#define HANDLE_BYTES 128                        /* room NCCL gives listen() for its handle */

struct rmaProperties { /* the network properties record, version 12 layout */
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, forceFlush, speed, port;
  float latency;
  int maxComms, maxRecvs;
  int netDeviceType, netDeviceVersion;
  struct {
    int ndevs;
    int devs[8];
  } vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId, planeId;
};
_Static_assert(offsetof(struct rmaProperties, maxP2pBytes) == 104 && sizeof(struct rmaProperties) == 128,
               "properties layout");

struct rmaConfig {
  int nContexts, trafficClass, rankStride;
};

struct rmaPluginV14 { /* the table NCCL looks up as ncclRmaPlugin_v14; order is the ABI */
  const char* name;
  rmaResult (*init)(void** ctx, uint64_t commId, rmaLogger log);
  rmaResult (*devices)(int* ndev);
  rmaResult (*getProperties)(int dev, struct rmaProperties* props);
  rmaResult (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  rmaResult (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  rmaResult (*createContext)(void* collComm, struct rmaConfig* config, void** rmaCtx);
  rmaResult (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle);
  rmaResult (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                              uint64_t mrFlags, void** mhandle);
  rmaResult (*deregMrSym)(void* collComm, void* mhandle);
  rmaResult (*destroyContext)(void* rmaCtx);
  rmaResult (*closeColl)(void* collComm);
  rmaResult (*closeListen)(void* listenComm);
  rmaResult (*iput)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                    void* dstMhandle, uint32_t rank, void** request);
  rmaResult (*iputSignal)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                          void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                          uint64_t signalValue, uint32_t signalOp, bool isStrongSignal, void** request);
  rmaResult (*iget)(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size,
                    uint64_t localOff, void* localMhandle, uint32_t rank, void** request);
  rmaResult (*iflush)(void* rmaCtx, int context, void* mhandle, uint32_t rank, void** request);
  rmaResult (*test)(void* collComm, void* request, int* done);
  rmaResult (*rmaProgress)(void* rmaCtx);
  rmaResult (*queryLastError)(void* rmaCtx, bool* hasError);
  rmaResult (*finalize)(void* ctx);
};

/* ---- Logging and error checks ---- */

static rmaLogger logFn;

/* Through NCCL's logger (NCCL_DEBUG=WARN/INFO, subsystem NET); warnings go to stderr before init. */
#define LOG_AT(level, file, line, ...)                                                                      \
  do {                                                                                                      \
    if (logFn) logFn(level, LOG_SUBSYS_NET, file, line, __VA_ARGS__);                                       \
    else if ((level) == LOG_WARN) fprintf(stderr, __VA_ARGS__), fputc('\n', stderr);                        \
  } while (0)
#define WARN(...) LOG_AT(LOG_WARN, __FILE__, __LINE__, "rmaipc: " __VA_ARGS__)
#define INFO(...) LOG_AT(LOG_INFO, __FILE__, __LINE__, "rmaipc: " __VA_ARGS__)

/* OK, or ERR_CUDA after a warning naming the call, where it is and CUDA's text. */
static rmaResult cuCheck(CUresult e, const char* call, const char* file, int line) {
  const char* text = NULL;
  if (e == CUDA_SUCCESS) return OK;
  if (cuGetErrorString(e, &text) != CUDA_SUCCESS || text == NULL) text = "unknown error";
  LOG_AT(LOG_WARN, file, line, "rmaipc: %s failed: %s (%d)", call, text, (int)e);
  return ERR_CUDA;
}
#define CUCALL(call) cuCheck((call), #call, __FILE__, __LINE__)
#define CU(call)                                                                                              \
  do {                                                                                                        \
    if (CUCALL(call) != OK) return ERR_CUDA;                                                                  \
  } while (0)

/* The stream write whose support flag is ..._64_BIT_STREAM_MEM_OPS_V2: CUDA 12
 * headers give it the plain name, older ones only the _v2 name. */
#if CUDA_VERSION >= 12000
#define streamWrite64 cuStreamWriteValue64
#else
#define streamWrite64 cuStreamWriteValue64_v2
#endif

/* ---- State ---- */

#define WAIT_SECONDS 60          /* bound on every socket wait (set-up and registration exchanges) */
#define HANDLE_MAGIC 0x6570626e6368524dULL /* "epbnchRM": marks this plugin's handles and hellos */

struct initCtx { uint64_t commId; };
struct listenComm { int fd; };
struct handle { /* what listen() publishes; NCCL gathers it from every rank */
  uint64_t magic;
  int32_t pid;
  char name[64]; /* abstract Unix socket name (without the leading NUL) */
};
_Static_assert(sizeof(struct handle) <= HANDLE_BYTES, "handle too large");

struct peerMap { CUdeviceptr base, va; size_t vaSize; }; /* a peer's region as mapped here (base 0: none) */

struct reg { /* one symmetric registration: the mhandle NCCL stores (and gives kernels) */
  int index;   /* registration order, the same on every rank */
  int type;    /* PTR_HOST or PTR_CUDA */
  char* local; /* the address registered on this rank */
  size_t size;
  struct peerMap* peer; /* [nranks]; peer[self].base = local */
  struct reg *prev, *next;
};

struct coll { /* the connected group */
  int rank, nranks;
  int* sock; /* [nranks]: socket to each peer, -1 for self */
  CUcontext cuctx;
  CUdevice dev;
  int retained; /* cuctx is a primary context this plugin retained */
  int nregs;
  struct reg* regs;
  struct rmaCtx* ctxs; /* the live contexts, whose queued puts deregistration runs first */
  pthread_mutex_t lock; /* data path (progress thread) against the user thread */
};

struct rmaCtx;
struct request { /* a queued put; test() frees it once done */
  int done;
  rmaResult result;
  struct rmaCtx* owner;
  struct request *prev, *next; /* the owner's live requests, freed by destroyContext */
};
static struct request completed = {1, OK, NULL, NULL, NULL}; /* returned by calls that finish at once */

struct pendingPut {
  struct pendingPut* older;
  CUdeviceptr dst, src;
  size_t size;
  struct reg *dreg, *sreg; /* the registrations dst and src lie in */
  struct request* req;
};

struct queue { struct pendingPut* newest; uint64_t since; }; /* since: pass count when the oldest was queued */

struct context { /* one GIN context: its own stream, a pinned word for signal reads, a queue per peer */
  CUstream s;
  uint64_t* word;
  void* stage; /* pinned, STAGE_BYTES: every copy passes through it (copyData) */
  struct queue* q; /* [nranks] */
};

/* Every copy goes device to host to device through a pinned buffer, on the
 * copy engines: a copy between two addresses of one GPU may otherwise run
 * as a kernel, which cannot start while the ranks' kernels, spinning until
 * the data arrives, hold every SM (ranks sharing a GPU). */
#define STAGE_BYTES (8u << 20)

struct rmaCtx {
  struct coll* cc;
  int nContexts;
  struct context* context; /* [nContexts] */
  uint64_t passes;
  uint64_t delay;
  int failed; /* sticky: a data-path CUDA call failed */
  uint64_t trace, traced; /* EPBENCH_RMA_TRACE: log the first `trace` data-path calls */
  uint64_t stallAfter, calls; /* EPBENCH_RMA_STALL_AFTER: puts before the plugin stops */
  struct request* live;
  struct rmaCtx *prevCtx, *nextCtx; /* the coll's live contexts (cc->ctxs); a failed creation is never linked */
};

/* ---- Sockets ---- */

static void socketTimeouts(int fd, int seconds) {
  struct timeval tv = {seconds, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* name: NUL-terminated, shorter than struct handle's field (well inside sun_path). */
static socklen_t abstractAddr(struct sockaddr_un* a, const char* name) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace, nothing on disk */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Sends one message with an optional file descriptor attached. */
static rmaResult sendMsg(int fd, const void* buf, size_t len, int passFd) {
  struct iovec iov = {(void*)buf, len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
  if (passFd >= 0) {
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof ctl.buf;
    struct cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &passFd, sizeof(int));
  }
  ssize_t n;
  do n = sendmsg(fd, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)len) {
    WARN("send to a peer failed: %s", n < 0 ? strerror(errno) : "short message");
    return ERR_SYSTEM;
  }
  return OK;
}

/* Receives one message of exactly len bytes; *gotFd is the attached descriptor or -1. */
static rmaResult recvMsg(int fd, void* buf, size_t len, int* gotFd) {
  struct iovec iov = {buf, len};
  union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  ssize_t n;
  do n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  int err = errno, got = -1;
  for (struct cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(&got, CMSG_DATA(c), sizeof got);
  if (n != (ssize_t)len || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (got >= 0 && !gotFd)) {
    WARN("receive from a peer failed: %s", n < 0 ? (err == EAGAIN ? "no message within the time limit" : strerror(err))
                                                 : "unexpected message");
    if (got >= 0) close(got);
    return ERR_SYSTEM;
  }
  if (gotFd) *gotFd = got;
  return OK;
}

/* ---- Set-up: init, properties, listen, connect ---- */

static rmaResult rmaInit(void** ctx, uint64_t commId, rmaLogger log) {
  if (log) logFn = log;
  struct initCtx* c = calloc(1, sizeof *c);
  if (!c) return ERR_SYSTEM;
  c->commId = commId;
  *ctx = c;
  return OK;
}

static rmaResult rmaDevices(int* ndev) {
  *ndev = 1;
  return OK;
}

static rmaResult rmaGetProperties(int dev, struct rmaProperties* p) {
  if (dev != 0) return ERR_ARGUMENT;
  memset(p, 0, sizeof *p);
  p->name = "epbench-rma-ipc";
  p->pciPath = NULL; /* NCCL then attaches the "NIC" to the first CPU */
  p->guid = 0x6570626e6368ULL;
  p->ptrSupport = PTR_HOST | PTR_CUDA; /* no DMA-BUF: NCCL registers with regMrSym only */
  p->speed = 100000;
  p->port = 1;
  p->maxComms = 65536;
  p->maxRecvs = 1; /* NCCL sizes its descriptor ring from it: a power of two */
  p->netDeviceType = DEVICE_GIN_PROXY;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 0;
  p->maxP2pBytes = p->maxCollBytes = (size_t)1 << 40;
  p->maxMultiRequestSize = 1;
  p->railId = p->planeId = -1;
  return OK;
}

static rmaResult rmaListen(void* ctx, int dev, void* handle, void** listenComm) {
  static unsigned counter;
  (void)dev;
  struct handle h = {.magic = HANDLE_MAGIC, .pid = getpid()};
  snprintf(h.name, sizeof h.name, "epbench-rma-%016llx-%d-%u", (unsigned long long)((struct initCtx*)ctx)->commId,
           (int)h.pid, __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
  struct sockaddr_un a;
  socklen_t alen = abstractAddr(&a, h.name);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, alen) != 0 || listen(fd, 4096) != 0) {
    WARN("listen on @%s: %s", h.name, strerror(errno));
    if (fd >= 0) close(fd);
    return ERR_SYSTEM;
  }
  struct listenComm* l = malloc(sizeof *l);
  if (!l) return close(fd), ERR_SYSTEM;
  l->fd = fd;
  memset(handle, 0, HANDLE_BYTES);
  memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return OK;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct hello { uint64_t magic; int32_t rank; };

/* Connects to a peer's listening socket, retrying until the deadline. */
static int connectTo(const char* name, double deadline) {
  struct sockaddr_un a;
  socklen_t alen = abstractAddr(&a, name);
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    socketTimeouts(fd, WAIT_SECONDS);
    if (connect(fd, (struct sockaddr*)&a, alen) == 0) return fd;
    int err = errno;
    close(fd);
    errno = err;
    if ((err != ECONNREFUSED && err != EAGAIN && err != EINTR) || now() > deadline) return -1;
    usleep(10000);
  }
}

/* Full mesh, one socket per peer: connect to every lower rank, then accept
 * every higher one. Connects finish without the peer accepting (listen
 * backlog), so the order cannot deadlock. */
static rmaResult rmaConnect(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  (void)ctx;
  struct listenComm* l = listenComm;
  struct coll* cc = calloc(1, sizeof *cc);
  if (!cc || !(cc->sock = malloc(sizeof(int) * (size_t)nranks))) return free(cc), ERR_SYSTEM;
  cc->rank = rank;
  cc->nranks = nranks;
  pthread_mutex_init(&cc->lock, NULL);
  for (int p = 0; p < nranks; p++) cc->sock[p] = -1;
  double deadline = now() + WAIT_SECONDS;
  struct hello mine = {HANDLE_MAGIC, rank};
  rmaResult res = OK;
  for (int p = 0; p < rank && res == OK; p++) {
    struct handle h;
    memcpy(&h, handles[p], sizeof h);
    h.name[sizeof h.name - 1] = 0;
    if (h.magic != HANDLE_MAGIC) {
      WARN("rank %d's handle is not from this plugin", p);
      res = ERR_INTERNAL;
    } else if ((cc->sock[p] = connectTo(h.name, deadline)) < 0) {
      WARN("rank %d: connect to rank %d (@%s): %s", rank, p, h.name, strerror(errno));
      res = ERR_SYSTEM;
    } else {
      res = sendMsg(cc->sock[p], &mine, sizeof mine, -1);
    }
  }
  for (int accepted = 0; res == OK && accepted < nranks - 1 - rank;) {
    struct pollfd pf = {l->fd, POLLIN, 0};
    int left = (int)((deadline - now()) * 1000);
    int n = left > 0 ? poll(&pf, 1, left) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      WARN("rank %d: %d higher ranks did not connect within %d s", rank, nranks - 1 - rank - accepted, WAIT_SECONDS);
      res = ERR_SYSTEM;
      break;
    }
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    socketTimeouts(fd, WAIT_SECONDS);
    struct hello h = {0, -1};
    if (recvMsg(fd, &h, sizeof h, NULL) != OK || h.magic != HANDLE_MAGIC || h.rank <= rank || h.rank >= nranks ||
        cc->sock[h.rank] >= 0) {
      WARN("rank %d: unexpected connection (rank %d)", rank, (int)h.rank);
      close(fd);
      res = ERR_SYSTEM;
      break;
    }
    cc->sock[h.rank] = fd;
    accepted++;
  }
  if (res != OK) {
    for (int p = 0; p < nranks; p++) if (cc->sock[p] >= 0) close(cc->sock[p]);
    pthread_mutex_destroy(&cc->lock);
    free(cc->sock);
    free(cc);
    return res;
  }
  *collComm = cc;
  return OK;
}

static rmaResult rmaCloseListen(void* listenComm) {
  struct listenComm* l = listenComm;
  close(l->fd);
  free(l);
  return OK;
}

/* ---- CUDA context ----
 * NCCL's GIN progress thread, which makes the data-path calls, has no current
 * CUDA context. Take the user thread's one at the first registration or
 * context creation and make it current at the top of every data-path call. */

static rmaResult captureCuda(struct coll* cc, const void* devPtr) {
  if (cc->cuctx) return OK;
  CUcontext cur = NULL;
  CU(cuCtxGetCurrent(&cur));
  if (!cur) {
    int ordinal;
    if (!devPtr) { WARN("no current CUDA context on the calling thread"); return ERR_USAGE; }
    CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)devPtr));
    CU(cuDeviceGet(&cc->dev, ordinal));
    CU(cuDevicePrimaryCtxRetain(&cur, cc->dev));
    cc->retained = 1;
    CU(cuCtxSetCurrent(cur));
  }
  CU(cuCtxGetDevice(&cc->dev));
  cc->cuctx = cur;
  return OK;
}

static rmaResult enterCuda(struct coll* cc) {
  if (!cc->cuctx) { WARN("data-path call before any registration"); return ERR_USAGE; }
  CU(cuCtxSetCurrent(cc->cuctx));
  return OK;
}

/* ---- Registration ---- */

struct regInfo { int32_t index, exportable; uint64_t allocSize, offset, size; };

static void unmapPeers(struct reg* r, int nranks, int self) {
  for (int p = 0; p < nranks; p++) {
    if (p == self || !r->peer[p].va) continue;
    (void)CUCALL(cuMemUnmap(r->peer[p].va, r->peer[p].vaSize));
    (void)CUCALL(cuMemAddressFree(r->peer[p].va, r->peer[p].vaSize));
    r->peer[p].va = r->peer[p].base = 0;
  }
}

/* Maps peer memory exported as a POSIX file descriptor; takes ownership of fd. */
static rmaResult mapPeer(struct coll* cc, struct peerMap* pm, const struct regInfo* in, int fd) {
  CUmemGenericAllocationHandle h;
  rmaResult res = CUCALL(cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  if (res != OK) return res;
  CUdeviceptr va = 0;
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, (int)cc->dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  res = CUCALL(cuMemAddressReserve(&va, in->allocSize, 0, 0, 0));
  if (res == OK && (res = CUCALL(cuMemMap(va, in->allocSize, 0, h, 0))) == OK &&
      (res = CUCALL(cuMemSetAccess(va, in->allocSize, &acc, 1))) != OK)
    (void)CUCALL(cuMemUnmap(va, in->allocSize));
  if (res != OK && va) (void)CUCALL(cuMemAddressFree(va, in->allocSize));
  (void)CUCALL(cuMemRelease(h)); /* the mapping keeps the memory alive */
  if (res != OK) return res;
  pm->va = va;
  pm->vaSize = in->allocSize;
  pm->base = va + in->offset;
  return OK;
}

/* Collective: every rank registers the same regions in the same order. Each
 * rank exports its allocation (when it can), sends the descriptor to every
 * peer, then receives theirs and maps them. A local failure is reported only
 * after the exchange, so the peers' sockets stay in step. */
static rmaResult rmaRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle) {
  (void)mrFlags;
  struct coll* cc = collComm;
  struct reg* r = calloc(1, sizeof *r);
  struct peerMap* pm = calloc((size_t)cc->nranks, sizeof *pm);
  int* fds = malloc(sizeof(int) * (size_t)cc->nranks);
  struct regInfo* info = calloc((size_t)cc->nranks, sizeof *info);
  if (!r || !pm || !fds || !info) return free(r), free(pm), free(fds), free(info), ERR_SYSTEM;
  *r = (struct reg){.index = cc->nregs++, .type = type, .local = data, .size = size, .peer = pm};
  pm[cc->rank].base = (CUdeviceptr)(uintptr_t)data;
  for (int p = 0; p < cc->nranks; p++) fds[p] = -1;

  struct regInfo mine = {.index = r->index, .size = size};
  rmaResult local = OK, res = OK;
  int myFd = -1;
  if (type == PTR_CUDA && (local = captureCuda(cc, data)) == OK) {
    CUdeviceptr base = 0;
    CUmemGenericAllocationHandle h;
    if ((local = CUCALL(cuMemGetAddressRange(&base, &mine.allocSize, (CUdeviceptr)(uintptr_t)data))) == OK) {
      mine.offset = (uint64_t)((CUdeviceptr)(uintptr_t)data - base);
      /* Memory allocated without an exportable handle (NCCL's indexed
       * signals) or without VMM is simply not mapped at the peers. */
      if (cuMemRetainAllocationHandle(&h, data) == CUDA_SUCCESS) {
        if (cuMemExportToShareableHandle(&myFd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS)
          mine.exportable = 1;
        else myFd = -1;
        (void)CUCALL(cuMemRelease(h));
      }
    }
  }
  if (local != OK) mine.exportable = 0;
  for (int p = 0; p < cc->nranks && res == OK; p++)
    if (p != cc->rank) res = sendMsg(cc->sock[p], &mine, sizeof mine, mine.exportable ? myFd : -1);
  if (myFd >= 0) close(myFd);
  for (int p = 0; p < cc->nranks && res == OK; p++) {
    if (p == cc->rank) continue;
    res = recvMsg(cc->sock[p], &info[p], sizeof info[p], &fds[p]);
    if (res == OK && info[p].index != r->index) {
      WARN("registration %d met rank %d's registration %d: the ranks' registrations are out of step", r->index, p,
           (int)info[p].index);
      res = ERR_INTERNAL;
    }
  }
  if (res == OK) res = local;
  for (int p = 0; p < cc->nranks; p++) {
    if (fds[p] < 0) continue;
    if (res == OK && info[p].exportable) res = mapPeer(cc, &pm[p], &info[p], fds[p]);
    else close(fds[p]);
  }
  free(fds);
  free(info);
  if (res != OK) {
    unmapPeers(r, cc->nranks, cc->rank);
    free(pm);
    free(r);
    return res;
  }
  INFO("rank %d: registration %d: %zu bytes (%s), %s", cc->rank, r->index, size, type == PTR_CUDA ? "device" : "host",
       mine.exportable ? "mapped at the peers" : "not exportable: local only");
  pthread_mutex_lock(&cc->lock);
  r->next = cc->regs;
  if (cc->regs) cc->regs->prev = r;
  cc->regs = r;
  pthread_mutex_unlock(&cc->lock);
  *mhandle = r;
  return OK;
}

static rmaResult rmaRegMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   uint64_t mrFlags, void** mhandle) {
  (void)collComm, (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mrFlags, (void)mhandle;
  WARN("DMA-BUF registration is not supported (not advertised in ptrSupport)");
  return ERR_USAGE;
}

static rmaResult runQueue(struct rmaCtx* rc, int c, uint32_t rank);
static void completeQueue(struct queue* q, rmaResult res);

/* Whether a put queued in q reads or writes registration r. */
static bool queueUses(const struct queue* q, const struct reg* r) {
  for (const struct pendingPut* p = q->newest; p; p = p->older)
    if (p->dreg == r || p->sreg == r) return true;
  return false;
}

/* Local only: drops this rank's mappings of the peers' regions. A put still
 * queued against the registration runs first (with the rest of its queue),
 * while the memory it names is mapped and registered: NCCL may deregister a
 * window (and then free it) before it stops polling the requests, on abort.
 * If that cannot be done, those puts fail instead; either way none is left
 * to run later. A failure reaches NCCL through the puts' requests and
 * queryLastError: the deregistration itself always succeeds (NCCL would
 * stop its teardown at a failed one). */
static rmaResult rmaDeregMrSym(void* collComm, void* mhandle) {
  struct coll* cc = collComm;
  struct reg* r = mhandle;
  if (!r) return OK;
  CUcontext prev = NULL;
  (void)cuCtxGetCurrent(&prev);
  pthread_mutex_lock(&cc->lock);
  if (r->prev) r->prev->next = r->next;
  else cc->regs = r->next;
  if (r->next) r->next->prev = r->prev;
  const bool entered = cc->cuctx && CUCALL(cuCtxSetCurrent(cc->cuctx)) == OK;
  for (struct rmaCtx* rc = cc->ctxs; rc; rc = rc->nextCtx)
    for (int c = 0; c < rc->nContexts; c++)
      for (int p = 0; p < cc->nranks; p++) {
        struct queue* q = &rc->context[c].q[p];
        if (!queueUses(q, r)) continue;
        rmaResult res = entered ? runQueue(rc, c, (uint32_t)p) : ERR_CUDA;
        if (!entered) completeQueue(q, res);
        if (res != OK) rc->failed = 1;
      }
  if (entered) unmapPeers(r, cc->nranks, cc->rank);
  pthread_mutex_unlock(&cc->lock);
  (void)cuCtxSetCurrent(prev);
  free(r->peer);
  free(r);
  return OK;
}

/* ---- Contexts and requests ---- */

static rmaResult rmaDestroyContext(void* rmaCtx);

/* A count from the environment into *v (left as it is when unset); anything
 * but a decimal count is refused. */
static rmaResult envCount(const char* name, uint64_t* v) {
  const char* env = getenv(name);
  if (!env || !*env) return OK;
  char* end;
  errno = 0;
  unsigned long long n = strtoull(env, &end, 10);
  if (*end || errno || *env == '-') {
    WARN("%s=%s is not a count", name, env);
    return ERR_USAGE;
  }
  *v = n;
  return OK;
}

static rmaResult rmaCreateContext(void* collComm, struct rmaConfig* cfg, void** rmaCtx) {
  struct coll* cc = collComm;
  if (cfg->nContexts <= 0) return ERR_ARGUMENT;
  rmaResult res = captureCuda(cc, NULL);
  if (res != OK) return res;
  struct rmaCtx* rc = calloc(1, sizeof *rc);
  if (!rc || !(rc->context = calloc((size_t)cfg->nContexts, sizeof *rc->context))) return free(rc), ERR_SYSTEM;
  rc->cc = cc;
  rc->nContexts = cfg->nContexts;
  rc->delay = 50;
  if ((res = envCount("EPBENCH_RMA_DELAY_PASSES", &rc->delay)) != OK || (res = envCount("EPBENCH_RMA_TRACE", &rc->trace)) != OK ||
      (res = envCount("EPBENCH_RMA_STALL_AFTER", &rc->stallAfter)) != OK)
    return rmaDestroyContext(rc), res;
  for (int c = 0; c < rc->nContexts && res == OK; c++) {
    /* Non-blocking streams: the kernel that posted the puts is still running. */
    res = CUCALL(cuStreamCreate(&rc->context[c].s, CU_STREAM_NON_BLOCKING));
    if (res == OK) res = CUCALL(cuMemAllocHost((void**)&rc->context[c].word, sizeof(uint64_t)));
    if (res == OK) res = CUCALL(cuMemAllocHost(&rc->context[c].stage, STAGE_BYTES));
    if (res == OK && !(rc->context[c].q = calloc((size_t)cc->nranks, sizeof(struct queue)))) res = ERR_SYSTEM;
  }
  if (res != OK) return rmaDestroyContext(rc), res;
  pthread_mutex_lock(&cc->lock);
  rc->nextCtx = cc->ctxs;
  if (cc->ctxs) cc->ctxs->prevCtx = rc;
  cc->ctxs = rc;
  pthread_mutex_unlock(&cc->lock);
  INFO("rank %d: %d contexts; puts without a signal wait %llu progress passes and run newest first", cc->rank,
       rc->nContexts, (unsigned long long)rc->delay);
  *rmaCtx = rc;
  return OK;
}

static struct request* newRequest(struct rmaCtx* rc) {
  struct request* q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->owner = rc;
  q->next = rc->live;
  if (rc->live) rc->live->prev = q;
  rc->live = q;
  return q;
}

static void freeRequest(struct rmaCtx* rc, struct request* q) {
  if (q->prev) q->prev->next = q->next;
  else rc->live = q->next;
  if (q->next) q->next->prev = q->prev;
  free(q);
}

/* ---- Data path (NCCL's GIN progress thread) ---- */

static rmaResult lockData(struct rmaCtx* rc, int context, uint32_t rank) {
  pthread_mutex_lock(&rc->cc->lock);
  if (context < 0 || context >= rc->nContexts || rank >= (uint32_t)rc->cc->nranks) {
    WARN("context %d or rank %u out of range", context, rank);
    return ERR_ARGUMENT;
  }
  return enterCuda(rc->cc);
}

static rmaResult unlockData(struct rmaCtx* rc, rmaResult res) {
  if (res == ERR_CUDA) rc->failed = 1;
  pthread_mutex_unlock(&rc->cc->lock);
  return res;
}

/* The address, as seen here, of [off, off+size) of registration r on rank. */
static rmaResult span(struct reg* r, uint32_t rank, uint64_t off, size_t size, CUdeviceptr* addr) {
  if (!r || off + size < off || off + size > r->size) {
    WARN("%zu bytes at offset %llu lie outside the registration", size, (unsigned long long)off);
    return ERR_USAGE;
  }
  if (!r->peer[rank].base) {
    WARN("registration %d of rank %u is not mapped here (its memory has no exportable handle)", r->index, rank);
    return ERR_USAGE;
  }
  *addr = r->peer[rank].base + off;
  return OK;
}

/* Copies size bytes from src to dst (device or host addresses) on context c's
 * stream through its pinned buffer; the caller synchronizes. */
static rmaResult copyData(struct rmaCtx* rc, int c, CUdeviceptr dst, CUdeviceptr src, size_t size) {
  struct context* x = &rc->context[c];
  for (size_t o = 0; o < size; o += STAGE_BYTES) {
    size_t n = size - o < STAGE_BYTES ? size - o : STAGE_BYTES;
    CU(cuMemcpyAsync((CUdeviceptr)(uintptr_t)x->stage, src + o, n, x->s));
    CU(cuMemcpyAsync(dst + o, (CUdeviceptr)(uintptr_t)x->stage, n, x->s));
  }
  return OK;
}

/* Runs every queued put of (context, rank), newest first, and completes their requests. */
static rmaResult runQueue(struct rmaCtx* rc, int c, uint32_t rank) {
  struct queue* q = &rc->context[c].q[rank];
  if (!q->newest) return OK;
  rmaResult res = OK;
  for (struct pendingPut* p = q->newest; p && res == OK; p = p->older)
    res = copyData(rc, c, p->dst, p->src, p->size);
  if (res == OK) res = CUCALL(cuStreamSynchronize(rc->context[c].s));
  completeQueue(q, res);
  return res;
}

/* Completes every put of q with result res and empties it. */
static void completeQueue(struct queue* q, rmaResult res) {
  for (struct pendingPut *p = q->newest, *older; p; p = older) {
    older = p->older;
    p->req->done = 1;
    p->req->result = res;
    free(p);
  }
  q->newest = NULL;
}

/* Read-add-write of the signal word at the target, after everything already
 * on the stream. Exact only because each epbench signal word has a single
 * writer (its source rank): no other rank updates it concurrently. */
static rmaResult applySignal(struct rmaCtx* rc, int c, uint32_t rank, uint64_t off, struct reg* sig, uint64_t value,
                             uint32_t op) {
  CUdeviceptr addr;
  if (op != SIGNAL_INC && op != SIGNAL_ADD) {
    WARN("unknown signal operation %u", op);
    return ERR_USAGE;
  }
  if (!sig || sig->type != PTR_CUDA || !sig->peer[rank].base) {
    WARN("signal to rank %u: this test plugin supports signals into windows only (VA signals), not into NCCL's "
         "indexed-signal buffer of another rank", rank);
    return ERR_USAGE;
  }
  rmaResult res = span(sig, rank, off, sizeof(uint64_t), &addr);
  if (res != OK) return res;
  CUstream s = rc->context[c].s;
  CU(cuMemcpyDtoHAsync(rc->context[c].word, addr, sizeof(uint64_t), s));
  CU(cuStreamSynchronize(s));
  uint64_t v = *rc->context[c].word + (op == SIGNAL_INC ? 1 : value);
  if (rc->traced < rc->trace) {
    rc->traced++;
    INFO("rank %d: signal to rank %u at +%llu: %llu -> %llu", rc->cc->rank, rank, (unsigned long long)off,
         (unsigned long long)*rc->context[c].word, (unsigned long long)v);
  }
  CU(streamWrite64(s, addr, v, CU_STREAM_WRITE_VALUE_DEFAULT));
  CU(cuStreamSynchronize(s));
  return OK;
}

/* EPBENCH_RMA_TRACE: logs the first `trace` puts. */
static void tracePut(struct rmaCtx* rc, uint32_t rank, const char* how, size_t size, uint64_t srcOff, uint64_t dstOff) {
  if (rc->traced >= rc->trace) return;
  rc->traced++;
  INFO("rank %d: put to rank %u%s: %zu bytes from +%llu to +%llu", rc->cc->rank, rank, how, size,
       (unsigned long long)srcOff, (unsigned long long)dstOff);
}

/* EPBENCH_RMA_STALL_AFTER: true for every put after the first stallAfter;
 * the caller then hands NCCL a request that is never done. */
static bool stalled(struct rmaCtx* rc) {
  if (!rc->stallAfter || ++rc->calls <= rc->stallAfter) return false;
  if (rc->calls == rc->stallAfter + 1) WARN("rank %d: stalling after %llu puts (EPBENCH_RMA_STALL_AFTER)", rc->cc->rank,
                                            (unsigned long long)rc->stallAfter);
  return true;
}

static rmaResult rmaIput(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                         void* dstMhandle, uint32_t rank, void** request) {
  struct rmaCtx* rc = rmaCtx;
  CUdeviceptr from, to;
  *request = &completed;
  rmaResult res = lockData(rc, context, rank);
  if (res == OK && stalled(rc)) return unlockData(rc, (*request = newRequest(rc)) ? OK : ERR_SYSTEM);
  if (res == OK) tracePut(rc, rank, "", size, srcOff, dstOff);
  if (res != OK || size == 0) return unlockData(rc, res);
  if ((res = span(srcMhandle, (uint32_t)rc->cc->rank, srcOff, size, &from)) != OK ||
      (res = span(dstMhandle, rank, dstOff, size, &to)) != OK)
    return unlockData(rc, res);
  if (rc->delay == 0) {
    if ((res = copyData(rc, context, to, from, size)) == OK)
      res = CUCALL(cuStreamSynchronize(rc->context[context].s));
    return unlockData(rc, res);
  }
  struct queue* q = &rc->context[context].q[rank];
  struct pendingPut* p = malloc(sizeof *p);
  struct request* req = p ? newRequest(rc) : NULL;
  if (!req) return free(p), unlockData(rc, ERR_SYSTEM);
  *p = (struct pendingPut){.older = q->newest, .dst = to, .src = from, .size = size, .dreg = dstMhandle,
                           .sreg = srcMhandle, .req = req};
  if (!q->newest) q->since = rc->passes;
  q->newest = p;
  *request = p->req;
  return unlockData(rc, OK);
}

static rmaResult rmaIputSignal(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size,
                               uint64_t dstOff, void* dstMhandle, uint32_t rank, uint64_t signalOff,
                               void* signalMhandle, uint64_t signalValue, uint32_t signalOp, bool isStrongSignal,
                               void** request) {
  struct rmaCtx* rc = rmaCtx;
  CUdeviceptr from, to;
  *request = &completed;
  rmaResult res = lockData(rc, context, rank);
  if (res == OK && stalled(rc)) return unlockData(rc, (*request = newRequest(rc)) ? OK : ERR_SYSTEM);
  if (res == OK) tracePut(rc, rank, isStrongSignal ? " with a strong signal" : " with a weak signal", size, srcOff, dstOff);
  if (res == OK && size && (res = span(srcMhandle, (uint32_t)rc->cc->rank, srcOff, size, &from)) == OK)
    res = span(dstMhandle, rank, dstOff, size, &to);
  /* A strong signal covers every earlier put of the context to this peer. A
   * signal-only call is how NCCL sends a VA signal, after its put: that put
   * waits here among others, so all of them must run first. */
  if (res == OK && (isStrongSignal || size == 0)) res = runQueue(rc, context, rank);
  if (res == OK && size) res = copyData(rc, context, to, from, size);
  if (res == OK) res = applySignal(rc, context, rank, signalOff, signalMhandle, signalValue, signalOp);
  return unlockData(rc, res);
}

/* Gets are not held back: executed and complete before returning. */
static rmaResult rmaIget(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size,
                         uint64_t localOff, void* localMhandle, uint32_t rank, void** request) {
  struct rmaCtx* rc = rmaCtx;
  CUdeviceptr from, to;
  *request = &completed;
  rmaResult res = lockData(rc, context, rank);
  if (res == OK && size && (res = span(remoteMhandle, rank, remoteOff, size, &from)) == OK &&
      (res = span(localMhandle, (uint32_t)rc->cc->rank, localOff, size, &to)) == OK &&
      (res = copyData(rc, context, to, from, size)) == OK)
    res = CUCALL(cuStreamSynchronize(rc->context[context].s));
  return unlockData(rc, res);
}

static rmaResult rmaIflush(void* rmaCtx, int context, void* mhandle, uint32_t rank, void** request) {
  (void)rmaCtx, (void)context, (void)mhandle, (void)rank;
  *request = NULL; /* nothing to flush: gets complete inside iget */
  return OK;
}

static rmaResult rmaTest(void* collComm, void* request, int* done) {
  struct coll* cc = collComm;
  struct request* q = request;
  if (!q || q == &completed) {
    *done = 1;
    return OK;
  }
  pthread_mutex_lock(&cc->lock);
  *done = q->done;
  rmaResult res = q->result;
  if (q->done) freeRequest(q->owner, q);
  pthread_mutex_unlock(&cc->lock);
  return res;
}

/* Counts progress passes and runs the queues whose oldest put has waited long enough. */
static rmaResult rmaProgress(void* rmaCtx) {
  struct rmaCtx* rc = rmaCtx;
  pthread_mutex_lock(&rc->cc->lock);
  rc->passes++;
  rmaResult res = OK;
  for (int c = 0; c < rc->nContexts && res == OK; c++)
    for (int p = 0; p < rc->cc->nranks && res == OK; p++) {
      struct queue* q = &rc->context[c].q[p];
      if (!q->newest || rc->passes - q->since < rc->delay) continue;
      if ((res = enterCuda(rc->cc)) == OK) res = runQueue(rc, c, (uint32_t)p);
    }
  /* NCCL ignores this result: a failure reaches it through test and queryLastError. */
  return unlockData(rc, res);
}

static rmaResult rmaQueryLastError(void* rmaCtx, bool* hasError) {
  struct rmaCtx* rc = rmaCtx;
  pthread_mutex_lock(&rc->cc->lock);
  *hasError = rc->failed != 0;
  pthread_mutex_unlock(&rc->cc->lock);
  return OK;
}

/* ---- Teardown ---- */

/* Runs what is still queued, then frees the context's streams and requests. */
static rmaResult rmaDestroyContext(void* rmaCtx) {
  struct rmaCtx* rc = rmaCtx;
  if (!rc) return OK;
  struct coll* cc = rc->cc;
  CUcontext prev = NULL;
  (void)cuCtxGetCurrent(&prev);
  pthread_mutex_lock(&cc->lock);
  if (rc->prevCtx || cc->ctxs == rc) { /* linked: its creation succeeded */
    if (rc->prevCtx) rc->prevCtx->nextCtx = rc->nextCtx;
    else cc->ctxs = rc->nextCtx;
    if (rc->nextCtx) rc->nextCtx->prevCtx = rc->prevCtx;
  }
  rmaResult res = enterCuda(cc);
  for (int c = 0; c < rc->nContexts; c++) {
    struct context* x = &rc->context[c];
    for (int p = 0; x->q && p < cc->nranks; p++) {
      if (res == OK) res = runQueue(rc, c, (uint32_t)p);
      else completeQueue(&x->q[p], res);
    }
    if (x->s) (void)CUCALL(cuStreamDestroy(x->s));
    if (x->word) (void)CUCALL(cuMemFreeHost(x->word));
    if (x->stage) (void)CUCALL(cuMemFreeHost(x->stage));
    free(x->q);
  }
  while (rc->live) freeRequest(rc, rc->live); /* NCCL does not test them after this */
  pthread_mutex_unlock(&cc->lock);
  (void)cuCtxSetCurrent(prev);
  free(rc->context);
  free(rc);
  return res;
}

/* Drops every registration still held, the sockets and the retained context. */
static rmaResult rmaCloseColl(void* collComm) {
  struct coll* cc = collComm;
  if (!cc) return OK;
  while (cc->regs) rmaDeregMrSym(cc, cc->regs);
  for (int p = 0; p < cc->nranks; p++)
    if (cc->sock[p] >= 0) close(cc->sock[p]);
  if (cc->retained) (void)CUCALL(cuDevicePrimaryCtxRelease(cc->dev));
  pthread_mutex_destroy(&cc->lock);
  free(cc->sock);
  free(cc);
  return OK;
}

static rmaResult rmaFinalize(void* ctx) {
  free(ctx);
  return OK;
}

const struct rmaPluginV14 ncclRmaPlugin_v14 = {
  .name = "epbench-rma-ipc",
  .init = rmaInit,
  .devices = rmaDevices,
  .getProperties = rmaGetProperties,
  .listen = rmaListen,
  .connect = rmaConnect,
  .createContext = rmaCreateContext,
  .regMrSym = rmaRegMrSym,
  .regMrSymDmaBuf = rmaRegMrSymDmaBuf,
  .deregMrSym = rmaDeregMrSym,
  .destroyContext = rmaDestroyContext,
  .closeColl = rmaCloseColl,
  .closeListen = rmaCloseListen,
  .iput = rmaIput,
  .iputSignal = rmaIputSignal,
  .iget = rmaIget,
  .iflush = rmaIflush,
  .test = rmaTest,
  .rmaProgress = rmaProgress,
  .queryLastError = rmaQueryLastError,
  .finalize = rmaFinalize,
};
