package gpu

// NVTX ranges for -p/--profile, through the header-only NVTX3 C API: a
// range costs a call through a function table that stays empty (a no-op)
// unless a profiler's injection library is loaded (NVTX_INJECTION64_PATH,
// or nsys). The headers come with the CUDA build headers (scripts/deps.sh).

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include <nvtx3/nvToolsExt.h>
// static int ep_nvtx_push(const char* name) { return nvtxRangePushA(name); }
// static int ep_nvtx_pop(void) { return nvtxRangePop(); }
import "C"

import (
	"sync"
	"unsafe"
)

// nvtxNames holds the C copy of every range name pushed, made once: the
// profiled loop allocates nothing.
var nvtxNames sync.Map // string → *C.char

// RangePush opens the NVTX range `name` on this thread, nested in the open
// ones.
func RangePush(name string) error {
	c, ok := nvtxNames.Load(name)
	if !ok {
		p := C.CString(name)
		var loaded bool
		if c, loaded = nvtxNames.LoadOrStore(name, p); loaded {
			C.free(unsafe.Pointer(p))
		}
	}
	C.ep_nvtx_push(c.(*C.char))
	return nil
}

// RangePop closes the innermost open NVTX range of this thread.
func RangePop() error {
	C.ep_nvtx_pop()
	return nil
}
