package cupti

// #include <stdlib.h>
// #include "collector.h"
import "C"

import "unsafe"

// The functions below feed the C aggregates the way the buffer callback
// does, so the package's tests can exercise aggregation without a GPU. They
// are internal and unused by the package itself.

// feedForTest adds one kernel record.
func feedForTest(name string, start, end uint64) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	C.ep_cupti_feed(cname, C.uint64_t(start), C.uint64_t(end))
}

// feedDroppedForTest adds n dropped records.
func feedDroppedForTest(n uint64) { C.ep_cupti_feed_dropped(C.uint64_t(n)) }

// abiCheckedVersion is the CUPTI_API_VERSION of the headers abi.h was
// compared with at build time, or 0 when no complete headers were found.
func abiCheckedVersion() int { return int(C.ep_cupti_abi_checked()) }
