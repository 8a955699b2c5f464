package gpu

// #cgo LDFLAGS: -lcuda
// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"gorgonia.org/cu"
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

// Streams, events, memsets and copies go through gorgonia.org/cu: it has
// the calls and, measured on an H200, costs nothing over a wrapper of our
// own (docs/DESIGN.md, "gorgonia/cu and our wrappers"). Launches, graphs,
// modules, IPC, mapped host memory, the profiler and the polled stream and
// event queries (gorgonia/cu's "not ready" is an error value, allocated per
// poll) go through ours.

// Stream is a non-blocking CUDA stream.
type Stream struct{ s cu.Stream }

// NewStream creates a non-blocking stream.
func NewStream() (Stream, error) {
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return Stream{}, fmt.Errorf("cuStreamCreate: %w", err)
	}
	return Stream{s}, nil
}

// Live reports whether s was created and not destroyed.
func (s Stream) Live() bool { return s != Stream{} }

// Destroy releases the stream.
func (s *Stream) Destroy() error {
	if err := s.s.Destroy(); err != nil {
		return fmt.Errorf("cuStreamDestroy: %w", err)
	}
	return nil
}

// Sync waits for everything enqueued on the stream.
func (s Stream) Sync() error {
	if err := s.s.Synchronize(); err != nil {
		return fmt.Errorf("cuStreamSynchronize: %w", err)
	}
	return nil
}

// SyncWithin waits for everything enqueued on the stream, at most d: false
// (and no error) when the work is still running then. It polls without
// sleeping, as cuStreamSynchronize spins by default: a sleep would add its
// own latency to the timed loop's host times. A poll allocates nothing
// (the timed loop runs with the collector off): the query's result is an
// int until it is an error.
func (s Stream) SyncWithin(d time.Duration) (bool, error) {
	return pollWithin(d, "cuStreamQuery", func() C.int { return C.ep_stream_query(s.handle()) })
}

// pollWithin calls query until it returns CUDA_SUCCESS (true), another
// error than CUDA_ERROR_NOT_READY (that error), or d has passed (false).
func pollWithin(d time.Duration, call string, query func() C.int) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		switch r := query(); r {
		case C.CUDA_SUCCESS:
			return true, nil
		case C.CUDA_ERROR_NOT_READY:
		default:
			return false, check(call, r)
		}
		if time.Now().After(deadline) {
			return false, nil
		}
	}
}

// handle is the stream as our C wrappers take it.
func (s Stream) handle() C.uint64_t { return C.uint64_t(uintptr(unsafe.Pointer(s.s.C()))) }

// Event is a CUDA event with timing enabled.
type Event struct{ e cu.Event }

// NewEvent creates a timing event.
func NewEvent() (Event, error) {
	e, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return Event{}, fmt.Errorf("cuEventCreate: %w", err)
	}
	return Event{e}, nil
}

// Live reports whether e was created and not destroyed.
func (e Event) Live() bool { return e != Event{} }

// Destroy releases the event.
func (e *Event) Destroy() error {
	if err := cu.DestroyEvent(&e.e); err != nil {
		return fmt.Errorf("cuEventDestroy: %w", err)
	}
	return nil
}

// Record enqueues the event on s.
func (e Event) Record(s Stream) error {
	if err := e.e.Record(s.s); err != nil {
		return fmt.Errorf("cuEventRecord: %w", err)
	}
	return nil
}

// ElapsedUs is the time from start to end in microseconds.
func ElapsedUs(start, end Event) (float64, error) {
	ms, err := start.e.Elapsed(end.e)
	if err != nil {
		return 0, fmt.Errorf("cuEventElapsedTime: %w", err)
	}
	return ms * 1000, nil
}

// MemsetD32Async fills n 32-bit words at dptr with v.
func MemsetD32Async(dptr uint64, v uint32, n int, s Stream) error {
	if err := cu.MemsetD32Async(cu.DevicePtr(dptr), uint(v), int64(n), s.s); err != nil {
		return fmt.Errorf("cuMemsetD32Async: %w", err)
	}
	return nil
}

// CopyToDevice copies host bytes to dptr and waits for the copy.
func CopyToDevice(dptr uint64, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	buf := C.CBytes(src) // an asynchronous copy reads after the call returns
	defer C.free(buf)
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dptr), buf, int64(len(src)), s.s); err != nil {
		return fmt.Errorf("cuMemcpyHtoDAsync: %w", err)
	}
	return s.Sync()
}

// CopyFromDevice copies device bytes at src into dst (synchronous).
func CopyFromDevice(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), cu.DevicePtr(src), int64(len(dst))); err != nil {
		return fmt.Errorf("cuMemcpyDtoH: %w", err)
	}
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

// HostBuffer is page-locked host memory, the end of asynchronous copies.
type HostBuffer struct {
	p    unsafe.Pointer
	size int
}

// NewHostBuffer allocates n bytes of page-locked host memory.
func NewHostBuffer(n int) (*HostBuffer, error) {
	var h unsafe.Pointer
	var d C.uint64_t
	if err := check("cuMemHostAlloc", C.ep_host_alloc_mapped(C.size_t(max(n, 4)), &h, &d)); err != nil {
		return nil, err
	}
	return &HostBuffer{p: h, size: n}, nil
}

// Bytes is the buffer as a Go slice over the page-locked memory.
func (b *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(b.p), b.size) }

// Free releases the buffer.
func (b *HostBuffer) Free() error {
	if b == nil || b.p == nil {
		return nil
	}
	err := check("cuMemFreeHost", C.ep_host_free(b.p))
	b.p = nil
	return err
}

// CopyToDeviceAsync copies n bytes of the host buffer from offset off to
// dptr in stream order; the host memory must not change before the copy has
// run (an event recorded after it says when).
func CopyToDeviceAsync(dptr uint64, src *HostBuffer, off, n int, s Stream) error {
	if n == 0 {
		return nil
	}
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dptr), unsafe.Add(src.p, off), int64(n), s.s); err != nil {
		return fmt.Errorf("cuMemcpyHtoDAsync: %w", err)
	}
	return nil
}

// CopyFromDeviceAsync copies n bytes at src into the host buffer at offset
// off, in stream order.
func CopyFromDeviceAsync(dst *HostBuffer, off int, src uint64, n int, s Stream) error {
	if n == 0 {
		return nil
	}
	if err := cu.MemcpyDtoHAsync(unsafe.Add(dst.p, off), cu.DevicePtr(src), int64(n), s.s); err != nil {
		return fmt.Errorf("cuMemcpyDtoHAsync: %w", err)
	}
	return nil
}

// Wait blocks until the work recorded before the event has run.
func (e Event) Wait() error {
	if err := e.e.Synchronize(); err != nil {
		return fmt.Errorf("cuEventSynchronize: %w", err)
	}
	return nil
}

// WaitWithin waits until the work recorded before the event has run, at
// most d: false (and no error) when it is still running then. It polls
// as SyncWithin does.
func (e Event) WaitWithin(d time.Duration) (bool, error) {
	h := e.handle()
	return pollWithin(d, "cuEventQuery", func() C.int { return C.ep_event_query(h) })
}

// handle is the event as our C wrappers take it. gorgonia.org/cu keeps
// the CUevent as an Event's only field and has no accessor for it; the
// two array types below stop the build if that layout changes in size.
func (e Event) handle() C.uint64_t {
	return C.uint64_t(uintptr(*(*unsafe.Pointer)(unsafe.Pointer(&e.e))))
}

var (
	_ [unsafe.Sizeof(cu.Event{}) - unsafe.Sizeof(uintptr(0))]struct{}
	_ [unsafe.Sizeof(uintptr(0)) - unsafe.Sizeof(cu.Event{})]struct{}
)
