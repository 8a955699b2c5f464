package cupti

// #include <stdlib.h>
// #include "collector.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Values of abi.h, for the Go side.
const (
	kindConcurrentKernel = int(C.EP_CUPTI_KIND_CONCURRENT_KERNEL)
	kindKernel           = int(C.EP_CUPTI_KIND_KERNEL)
	flushForced          = uint32(C.EP_CUPTI_FLUSH_FORCED)
	minVersion           = uint32(C.EP_CUPTI_MIN_VERSION)
	maxKernels           = int(C.EP_MAX_KERNELS)
	nameMax              = int(C.EP_NAME_MAX)
)

// activityAPI is the part of CUPTI the collector drives, behind an interface
// so the collector's logic is tested without a GPU. Records always arrive
// through the C callbacks into the C aggregates, whichever implementation
// is used.
type activityAPI interface {
	version() (uint32, error)
	registerCallbacks() error
	enable(kind int) error
	disable(kind int) error
	flush(flag uint32) error
	// collectDropped adds CUPTI's dropped-record count to the aggregates
	// (and so resets CUPTI's count).
	collectDropped() error
	// timestamp is CUPTI's current time, in the time base of its records.
	timestamp() (uint64, error)
}

// boundAPI calls the library bound with bind.
type boundAPI struct{}

// bind hands the entry points to the C side. Binding again (a later Open)
// replaces them.
func bind(ep entryPoints) {
	api := C.ep_cupti_api{
		register_callbacks: ep.registerCallbacks,
		enable:             ep.enable,
		disable:            ep.disable,
		flush_all:          ep.flushAll,
		next_record:        ep.nextRecord,
		dropped:            ep.dropped,
		version:            ep.version,
		result_string:      ep.resultString,
		error_message:      ep.errorMessage,
		timestamp:          ep.timestamp,
	}
	C.ep_cupti_bind(&api)
}

func check(call string, rc C.int) error {
	if rc == C.EP_CUPTI_SUCCESS {
		return nil
	}
	if rc == C.EP_CUPTI_NOT_BOUND {
		return fmt.Errorf("%w: %s: no CUPTI library bound", ErrClosed, call)
	}
	var name, msg string
	if s := C.ep_cupti_result_name(rc); s != nil {
		name = C.GoString(s)
	}
	if s := C.ep_cupti_result_message(rc); s != nil {
		msg = C.GoString(s)
	}
	return newError(call, int(rc), name, msg)
}

func (boundAPI) version() (uint32, error) {
	var v C.uint32_t
	if err := check("cuptiGetVersion", C.ep_cupti_get_version(&v)); err != nil {
		return 0, err
	}
	return uint32(v), nil
}

func (boundAPI) registerCallbacks() error {
	return check("cuptiActivityRegisterCallbacks", C.ep_cupti_register_callbacks())
}

func (boundAPI) enable(kind int) error {
	return check("cuptiActivityEnable", C.ep_cupti_enable(C.int(kind)))
}

func (boundAPI) disable(kind int) error {
	return check("cuptiActivityDisable", C.ep_cupti_disable(C.int(kind)))
}

func (boundAPI) flush(flag uint32) error {
	return check("cuptiActivityFlushAll", C.ep_cupti_flush_all(C.uint32_t(flag)))
}

func (boundAPI) collectDropped() error {
	return check("cuptiActivityGetNumDroppedRecords", C.ep_cupti_collect_dropped())
}

func (boundAPI) timestamp() (uint64, error) {
	var ts C.uint64_t
	if err := check("cuptiGetTimestamp", C.ep_cupti_get_timestamp(&ts)); err != nil {
		return 0, err
	}
	return uint64(ts), nil
}

// setWindow leaves records of kernels that started before start out of the
// aggregates (0: none left out).
func setWindow(start uint64) { C.ep_cupti_set_window(C.uint64_t(start)) }

// totals mirrors ep_cupti_totals.
type totals struct {
	dispatchCount, combineCount uint64
	dispatchNs, combineNs       uint64
	records, incomplete         uint64
	unreadable, dropped         uint64
	otherCount, otherNs         uint64
}

// otherKernels names the bucket of kernels beyond the name table.
const otherKernels = "(other kernels)"

func resetAggregates() { C.ep_cupti_reset() }

// snapshot copies the C aggregates.
func snapshot() (totals, []KernelStat) {
	var t C.ep_cupti_totals
	stats := make([]C.ep_kernel_stat, maxKernels)
	n := int(C.ep_cupti_snapshot(&t, &stats[0], C.int(len(stats))))
	out := totals{
		dispatchCount: uint64(t.class_count[C.EP_CLASS_DISPATCH]),
		combineCount:  uint64(t.class_count[C.EP_CLASS_COMBINE]),
		dispatchNs:    uint64(t.class_ns[C.EP_CLASS_DISPATCH]),
		combineNs:     uint64(t.class_ns[C.EP_CLASS_COMBINE]),
		records:       uint64(t.records),
		incomplete:    uint64(t.incomplete),
		unreadable:    uint64(t.unreadable),
		dropped:       uint64(t.dropped),
		otherCount:    uint64(t.other_count),
		otherNs:       uint64(t.other_ns),
	}
	ks := make([]KernelStat, 0, n+1)
	for i := 0; i < n; i++ {
		s := &stats[i]
		name := C.GoString((*C.char)(unsafe.Pointer(&s.name[0])))
		if s.truncated != 0 {
			name += truncatedMark
		}
		ks = append(ks, KernelStat{Name: name, Count: int(s.count), TotalNs: uint64(s.total_ns)})
	}
	if out.otherCount > 0 {
		ks = append(ks, KernelStat{Name: otherKernels, Count: int(out.otherCount), TotalNs: out.otherNs})
	}
	return out, ks
}

// truncatedMark ends the Name of a kernel whose name was longer than the
// C table keeps.
const truncatedMark = "..."
