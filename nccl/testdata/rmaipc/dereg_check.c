/*
 * A CPU check of the RMA plugin (rmaipc.c) without a GPU: the plugin is built
 * into this program together with a stand-in for the few CUDA driver calls it
 * makes, in which "device memory" is host memory and every copy is done at
 * once. One rank (no peers, so no sockets are exchanged) registers a source
 * and a destination window, queues an unsignalled put between them (the
 * plugin holds such puts back), and deregisters the destination while the put
 * is still queued, as NCCL may on abort or when a device communicator goes
 * first. The plugin must run the put then, while the window is registered;
 * the check then unmaps the window's pages (as its owner would free it) and
 * drives the progress passes that would have run the put later.
 *
 * Prints "ok" and exits 0 when the plugin behaves; otherwise prints what went
 * wrong and exits 1 (a put run into the freed window crashes the program).
 * nccl/rmaipc_test.go builds and runs it.
 */
#include "rmaipc.c"

#include <sys/mman.h>

/* ---- The CUDA driver stand-in ---- */

static int fakeContext;
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
  return CUDA_SUCCESS;
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

int main(void) {
  const size_t bytes = 1 << 16, put = 4096;
  const struct rmaPluginV14* pl = &ncclRmaPlugin_v14;
  void *ctx = NULL, *lc = NULL, *cc = NULL, *rc = NULL, *sreg = NULL, *dreg = NULL, *req = NULL;
  char handle[HANDLE_BYTES] = {0};
  void* handles[1] = {handle};
  if (pl->init(&ctx, 1, NULL) != OK || pl->listen(ctx, 0, handle, &lc) != OK ||
      pl->connect(ctx, handles, 1, 0, lc, &cc) != OK)
    FAIL("set-up of one rank");
  CUdeviceptr src = fakeAlloc(bytes), dst = fakeAlloc(bytes);
  if (!src || !dst) FAIL("allocation");
  for (size_t i = 0; i < bytes; i++) ((unsigned char*)(uintptr_t)src)[i] = (unsigned char)(i * 7 + 1);
  if (pl->regMrSym(cc, (void*)(uintptr_t)src, bytes, PTR_CUDA, 0, &sreg) != OK ||
      pl->regMrSym(cc, (void*)(uintptr_t)dst, bytes, PTR_CUDA, 0, &dreg) != OK)
    FAIL("registration");
  struct rmaConfig cfg = {.nContexts = 1};
  if (pl->createContext(cc, &cfg, &rc) != OK) FAIL("context");

  /* An unsignalled put is held back: not done, nothing written yet. */
  if (pl->iput(rc, 0, 256, sreg, put, 512, dreg, 0, &req) != OK || !req) FAIL("iput");
  int done = -1;
  if (pl->test(cc, req, &done) != OK || done) FAIL("the queued put is done before any progress pass");
  if (((unsigned char*)(uintptr_t)dst)[512] != 0) FAIL("the queued put was written before any progress pass");

  /* Deregistering its window runs it, while the window is still there. */
  if (pl->deregMrSym(cc, dreg) != OK) FAIL("deregMrSym");
  if (memcmp((void*)(uintptr_t)(dst + 512), (void*)(uintptr_t)(src + 256), put) != 0)
    FAIL("deregistration left the put queued against the window unrun");
  if (pl->test(cc, req, &done) != OK || !done) FAIL("the put run at deregistration is not done");

  /* Its owner frees the window; the progress passes that would have run the
   * put later must find nothing to do. */
  if (munmap((void*)(uintptr_t)dst, bytes) != 0) FAIL("munmap");
  for (int i = 0; i < 200; i++)
    if (pl->rmaProgress(rc) != OK) FAIL("progress pass %d", i);

  if (pl->destroyContext(rc) != OK || pl->deregMrSym(cc, sreg) != OK || pl->closeColl(cc) != OK ||
      pl->closeListen(lc) != OK || pl->finalize(ctx) != OK)
    FAIL("teardown");
  printf("ok\n");
  return 0;
}
