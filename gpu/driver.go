package gpu

// #cgo LDFLAGS: -lcuda
// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Error is a failed CUDA driver call.
type Error struct {
	Call string
	Code int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Call, C.GoString(C.ep_error_string(C.int(e.Code))), C.GoString(C.ep_error_name(C.int(e.Code))))
}

func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r)}
}

// Stream is a CUDA stream handle.
type Stream uint64

// NewStream creates a non-blocking stream.
func NewStream() (Stream, error) {
	var s C.uint64_t
	err := check("cuStreamCreate", C.ep_stream_create(&s))
	return Stream(s), err
}

// Destroy releases the stream.
func (s Stream) Destroy() error { return check("cuStreamDestroy", C.ep_stream_destroy(C.uint64_t(s))) }

// Sync waits for everything enqueued on the stream.
func (s Stream) Sync() error { return check("cuStreamSynchronize", C.ep_stream_sync(C.uint64_t(s))) }

// Event is a CUDA event with timing enabled.
type Event uint64

// NewEvent creates a timing event.
func NewEvent() (Event, error) {
	var e C.uint64_t
	err := check("cuEventCreate", C.ep_event_create(&e))
	return Event(e), err
}

// Destroy releases the event.
func (e Event) Destroy() error { return check("cuEventDestroy", C.ep_event_destroy(C.uint64_t(e))) }

// Record enqueues the event on s.
func (e Event) Record(s Stream) error {
	return check("cuEventRecord", C.ep_event_record(C.uint64_t(e), C.uint64_t(s)))
}

// ElapsedUs is the time from start to end in microseconds.
func ElapsedUs(start, end Event) (float64, error) {
	var ms C.float
	if err := check("cuEventElapsedTime", C.ep_event_elapsed_ms(C.uint64_t(start), C.uint64_t(end), &ms)); err != nil {
		return 0, err
	}
	return float64(ms) * 1000, nil
}

// MemsetD32Async fills n 32-bit words at dptr with v.
func MemsetD32Async(dptr uint64, v uint32, n int, s Stream) error {
	return check("cuMemsetD32Async", C.ep_memset_d32_async(C.uint64_t(dptr), C.uint(v), C.size_t(n), C.uint64_t(s)))
}

// CopyToDevice copies host bytes to dptr and waits for the copy.
func CopyToDevice(dptr uint64, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	buf := C.CBytes(src)
	defer C.free(buf)
	if err := check("cuMemcpyHtoDAsync", C.ep_memcpy_htod_async(C.uint64_t(dptr), buf, C.size_t(len(src)), C.uint64_t(s))); err != nil {
		return err
	}
	return s.Sync()
}

// CopyFromDevice copies device bytes at src into dst (synchronous).
func CopyFromDevice(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	buf := C.malloc(C.size_t(len(dst)))
	defer C.free(buf)
	if err := check("cuMemcpyDtoH", C.ep_memcpy_dtoh(buf, C.uint64_t(src), C.size_t(len(dst)))); err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*byte)(buf), len(dst)))
	return nil
}

// ProfilerStart and ProfilerStop bracket the region an external profiler
// captures (nsys --capture-range=cudaProfilerApi).
func ProfilerStart() error { return check("cuProfilerStart", C.ep_profiler_start()) }

// ProfilerStop ends the captured region.
func ProfilerStop() error { return check("cuProfilerStop", C.ep_profiler_stop()) }

// MappedWord is one 32-bit word of page-locked host memory that kernels
// write through Dev and the host reads without a copy.
type MappedWord struct {
	host unsafe.Pointer
	Dev  uint64
}

// NewMappedWord allocates a zeroed mapped word.
func NewMappedWord() (*MappedWord, error) {
	var h unsafe.Pointer
	var d C.uint64_t
	if err := check("cuMemHostAlloc", C.ep_host_alloc_mapped(4, &h, &d)); err != nil {
		return nil, err
	}
	return &MappedWord{host: h, Dev: uint64(d)}, nil
}

// Load reads the word (acquire).
func (w *MappedWord) Load() uint32 { return uint32(C.ep_load_u32(w.host)) }

// Store writes the word (release).
func (w *MappedWord) Store(v uint32) { C.ep_store_u32(w.host, C.uint(v)) }

// Free releases the word.
func (w *MappedWord) Free() error {
	if w == nil || w.host == nil {
		return nil
	}
	err := check("cuMemFreeHost", C.ep_host_free(w.host))
	w.host = nil
	return err
}
