/*
 * A CPU check of the RMA plugin (rmaipc.c) without a GPU: the plugin is built
 * into this program together with a stand-in for the few CUDA driver calls it
 * makes, in which "device memory" is host memory and every copy is done at
 * once. One rank (no peers, so no sockets are exchanged; every put goes to
 * itself) checks the plugin's deliberate behaviours, the ones the kernels'
 * ordering is tested against: an unsignalled put is held back for exactly
 * EPBENCH_RMA_DELAY_PASSES progress passes; held puts run newest first; a
 * strong signal, and a signal without data, run the held puts first, a weak
 * signal with its own put does not; deregistering a window runs the held puts
 * into or out of it (NCCL may deregister before it stops polling), so that
 * none runs once its owner has freed it (the check unmaps its pages and
 * drives the passes that would have run the put), and where it cannot run
 * them (no CUDA context) fails them. Two contexts: the second is destroyed
 * first, and the first's held puts are still found at deregistration.
 *
 * Prints "ok" and exits 0 when the plugin behaves; otherwise prints the first
 * check that failed and exits 1 (a put run into the freed window crashes the
 * program). nccl/rmaipc_test.go builds and runs it.
 */
#include "rmaipc.c"

#include <sys/mman.h>

/* ---- The CUDA driver stand-in ---- */

static int fakeContext;
static bool failSetCurrent; /* makes cuCtxSetCurrent fail */
#define MAX_ALLOCS 8
static struct { CUdeviceptr base; size_t size; } allocs[MAX_ALLOCS];

static CUdeviceptr fakeAlloc(size_t size) {
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (!allocs[i].base) {
      allocs[i].base = (CUdeviceptr)(uintptr_t)p;
      allocs[i].size = size;
      return allocs[i].base;
    }
  return 0;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  (void)error;
  *pStr = "stand-in error";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  *pctx = (CUcontext)(void*)&fakeContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  (void)ctx;
  return failSetCurrent ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  (void)dev;
  return cuCtxGetCurrent(pctx);
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  (void)dev;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  (void)attribute, (void)ptr;
  *(int*)data = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].base && dptr >= allocs[i].base && dptr < allocs[i].base + allocs[i].size) {
      *pbase = allocs[i].base;
      *psize = allocs[i].size;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}
/* No exportable handles: a registration is local only, which one rank needs. */
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  (void)handle, (void)addr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags) {
  (void)shareableHandle, (void)handle, (void)handleType, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                CUmemAllocationHandleType shHandleType) {
  (void)handle, (void)osHandle, (void)shHandleType;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  (void)handle;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  (void)ptr, (void)size, (void)alignment, (void)addr, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  (void)ptr, (void)size;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  (void)ptr, (void)size, (void)offset, (void)handle, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  (void)ptr, (void)size;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  (void)ptr, (void)size, (void)desc, (void)count;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void** pp, size_t bytesize) {
  *pp = malloc(bytesize);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void* p) {
  free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  (void)hStream;
  memcpy((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, ByteCount);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  return cuMemcpyAsync((CUdeviceptr)(uintptr_t)dstHost, srcDevice, ByteCount, hStream);
}
CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  (void)Flags;
  *phStream = (CUstream)(void*)&fakeContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  (void)hStream;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  (void)hStream;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI streamWrite64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  (void)stream, (void)flags;
  *(uint64_t*)(uintptr_t)addr = value;
  return CUDA_SUCCESS;
}

/* ---- The check ---- */

#define FAIL(...)                                                                                             \
  do {                                                                                                        \
    printf("FAIL: " __VA_ARGS__);                                                                             \
    printf("\n");                                                                                             \
    return 1;                                                                                                 \
  } while (0)

static const struct rmaPluginV14* pl = &ncclRmaPlugin_v14;
static void *cc, *rc, *rc2;

/* Whether request q is done (false on an error); a done request is freed. */
static bool isDone(void* q) {
  int done = -1;
  return pl->test(cc, q, &done) == OK && done == 1;
}

static unsigned char* at(CUdeviceptr p, size_t off) { return (unsigned char*)(uintptr_t)p + off; }

int main(void) {
  const size_t bytes = 1 << 16, put = 4096;
  void *ctx = NULL, *lc = NULL, *sreg = NULL, *dreg = NULL, *wreg = NULL, *s2reg = NULL, *d3reg = NULL;
  void *q1 = NULL, *q2 = NULL, *qs = NULL;
  /* The plugin's settings at their defaults, whatever the environment. */
  unsetenv("EPBENCH_RMA_DELAY_PASSES");
  unsetenv("EPBENCH_RMA_TRACE");
  unsetenv("EPBENCH_RMA_STALL_AFTER");
  char handle[HANDLE_BYTES] = {0};
  void* handles[1] = {handle};
  if (pl->init(&ctx, 1, NULL) != OK || pl->listen(ctx, 0, handle, &lc) != OK ||
      pl->connect(ctx, handles, 1, 0, lc, &cc) != OK)
    FAIL("set-up of one rank");
  CUdeviceptr src = fakeAlloc(bytes), dst = fakeAlloc(bytes), win = fakeAlloc(bytes), src2 = fakeAlloc(bytes),
              dst3 = fakeAlloc(bytes);
  if (!src || !dst || !win || !src2 || !dst3) FAIL("allocation");
  for (size_t i = 0; i < bytes; i++) *at(src, i) = (unsigned char)(i * 7 + 1), *at(src2, i) = (unsigned char)(i * 5 + 3);
  if (pl->regMrSym(cc, (void*)(uintptr_t)src, bytes, PTR_CUDA, 0, &sreg) != OK ||
      pl->regMrSym(cc, (void*)(uintptr_t)dst, bytes, PTR_CUDA, 0, &dreg) != OK ||
      pl->regMrSym(cc, (void*)(uintptr_t)win, bytes, PTR_CUDA, 0, &wreg) != OK ||
      pl->regMrSym(cc, (void*)(uintptr_t)src2, bytes, PTR_CUDA, 0, &s2reg) != OK ||
      pl->regMrSym(cc, (void*)(uintptr_t)dst3, bytes, PTR_CUDA, 0, &d3reg) != OK)
    FAIL("registration");
  struct rmaConfig cfg = {.nContexts = 1};
  if (pl->createContext(cc, &cfg, &rc) != OK || pl->createContext(cc, &cfg, &rc2) != OK) FAIL("context");
  const uint64_t delay = ((struct rmaCtx*)rc)->delay;
  if (delay != 50) FAIL("the default delay is %llu passes, not 50", (unsigned long long)delay);

  /* Held back for exactly `delay` passes, then done with its data. */
  if (pl->iput(rc, 0, 0, sreg, put, 0, dreg, 0, &q1) != OK || !q1) FAIL("iput");
  for (uint64_t i = 1; i < delay; i++)
    if (pl->rmaProgress(rc) != OK) FAIL("progress pass %llu", (unsigned long long)i);
  if (*at(dst, 0) != 0) FAIL("a held put ran before %llu passes", (unsigned long long)delay);
  if (pl->rmaProgress(rc) != OK || !isDone(q1) || memcmp(at(dst, 0), at(src, 0), put) != 0)
    FAIL("a held put did not run at its %lluth pass", (unsigned long long)delay);

  /* Newest first: two puts into the same place end with the older's data. */
  if (pl->iput(rc, 0, 1000, sreg, put, 8192, dreg, 0, &q1) != OK || pl->iput(rc, 0, 3000, sreg, put, 8192, dreg, 0, &q2) != OK)
    FAIL("iput");
  /* A weak signal with its own put leaves them held. */
  if (pl->iputSignal(rc, 0, 5000, sreg, 64, 20000, dreg, 0, 0, wreg, 5, SIGNAL_ADD, false, &qs) != OK)
    FAIL("iputSignal (weak)");
  if (memcmp(at(dst, 20000), at(src, 5000), 64) != 0 || *(uint64_t*)at(win, 0) != 5)
    FAIL("a weak signal's own put or its signal did not land at once");
  if (*at(dst, 8192) != 0) FAIL("a weak signal with its own put ran the held puts");
  /* A strong one (with its own put) runs them first. */
  if (pl->iputSignal(rc, 0, 6000, sreg, 64, 24000, dreg, 0, 0, wreg, 1, SIGNAL_INC, true, &qs) != OK)
    FAIL("iputSignal (strong)");
  if (!isDone(q1) || !isDone(q2)) FAIL("a strong signal left held puts not done");
  if (memcmp(at(dst, 24000), at(src, 6000), 64) != 0) FAIL("a strong signal's own put did not land at once");
  if (memcmp(at(dst, 8192), at(src, 1000), put) != 0) FAIL("held puts did not run newest first");
  if (*(uint64_t*)at(win, 0) != 6) FAIL("the strong signal did not add one");
  /* A signal without data (how NCCL sends a window signal after its put) runs them too. */
  if (pl->iput(rc, 0, 2000, sreg, put, 16384, dreg, 0, &q1) != OK) FAIL("iput");
  if (pl->iputSignal(rc, 0, 0, NULL, 0, 0, NULL, 0, 8, wreg, 3, SIGNAL_ADD, false, &qs) != OK)
    FAIL("iputSignal (no data)");
  if (!isDone(q1) || memcmp(at(dst, 16384), at(src, 2000), put) != 0 || *(uint64_t*)at(win, 8) != 3)
    FAIL("a signal without data did not run the held put before it");

  /* Deregistering a window runs the puts held against it, while it is there:
   * a source window (the second context, the list's head, gone first)... */
  if (pl->destroyContext(rc2) != OK) FAIL("destroyContext");
  if (pl->iput(rc, 0, 100, s2reg, put, 40000, dreg, 0, &q1) != OK || isDone(q1)) FAIL("iput");
  if (pl->deregMrSym(cc, s2reg) != OK) FAIL("deregMrSym of a source window");
  if (!isDone(q1) || memcmp(at(dst, 40000), at(src2, 100), put) != 0)
    FAIL("deregistration left the put queued from the window unrun");
  if (munmap((void*)(uintptr_t)src2, bytes) != 0) FAIL("munmap");
  /* ...and a destination window. */
  if (pl->iput(rc, 0, 256, sreg, put, 512 + 32768, dreg, 0, &q1) != OK || isDone(q1)) FAIL("iput");
  if (pl->deregMrSym(cc, dreg) != OK) FAIL("deregMrSym");
  if (memcmp(at(dst, 512 + 32768), at(src, 256), put) != 0)
    FAIL("deregistration left the put queued against the window unrun");
  if (!isDone(q1)) FAIL("the put run at deregistration is not done");
  /* Its owner frees the window; the passes that would have run the put must
   * find nothing to do. */
  if (munmap((void*)(uintptr_t)dst, bytes) != 0) FAIL("munmap");
  for (uint64_t i = 0; i < 2 * delay; i++)
    if (pl->rmaProgress(rc) != OK) FAIL("progress pass %llu after deregistration", (unsigned long long)i);

  /* Where the puts cannot run (no CUDA context), they fail, none is left. */
  if (pl->iput(rc, 0, 0, sreg, put, 0, d3reg, 0, &q1) != OK || isDone(q1)) FAIL("iput");
  failSetCurrent = true;
  bool hasError = false;
  int done = 0;
  if (pl->deregMrSym(cc, d3reg) != OK) FAIL("deregMrSym without a CUDA context");
  failSetCurrent = false;
  if (pl->test(cc, q1, &done) != ERR_CUDA || !done) FAIL("a held put that could not run did not fail");
  if (pl->queryLastError(rc, &hasError) != OK || !hasError) FAIL("queryLastError after a failed put");
  if (munmap((void*)(uintptr_t)dst3, bytes) != 0) FAIL("munmap");
  for (uint64_t i = 0; i < 2 * delay; i++)
    if (pl->rmaProgress(rc) != OK) FAIL("progress pass %llu after a failed deregistration", (unsigned long long)i);

  if (pl->destroyContext(rc) != OK || pl->deregMrSym(cc, sreg) != OK || pl->deregMrSym(cc, wreg) != OK ||
      pl->closeColl(cc) != OK || pl->closeListen(lc) != OK || pl->finalize(ctx) != OK)
    FAIL("teardown");
  printf("ok\n");
  return 0;
}
