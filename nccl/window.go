package nccl

// #include <stdlib.h>
// #include "api.h"
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// MemAlloc is ncclMemAlloc: device memory on the calling thread's current
// CUDA device, suitable for RegisterWindow. It returns the device address.
func (l *Lib) MemAlloc(size int64) (uint64, error) {
	if err := l.open(); err != nil {
		return 0, err
	}
	if size <= 0 {
		return 0, fmt.Errorf("nccl: ncclMemAlloc of %d bytes", size)
	}
	var ptr C.uint64_t
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_mem_alloc(&l.api, &ptr, C.size_t(size), p, n)
	if err := l.check("ncclMemAlloc", rc, &last); err != nil {
		return 0, err
	}
	return uint64(ptr), nil
}

// MemFree is ncclMemFree of an address MemAlloc returned.
func (l *Lib) MemFree(ptr uint64) error {
	if err := l.open(); err != nil {
		return err
	}
	var last lastError
	p, n := last.buf()
	return l.check("ncclMemFree", C.ep_nccl_mem_free(&l.api, C.uint64_t(ptr), p, n), &last)
}

// Window is a registered NCCL window (ncclWindow_t); its zero value is none.
type Window struct {
	h unsafe.Pointer
}

// Handle is the window's ncclWindow_t: the device address of NCCL's
// description of the window, which GIN kernels take to put into it.
func (w Window) Handle() uint64 { return uint64(uintptr(w.h)) }

// RegisterWindow is ncclCommWindowRegister of size bytes at device address
// ptr as a collective symmetric window: every rank of the communicator
// registers its own buffer of the same size, and NCCL wants the base aligned
// to 4096 bytes (MemAlloc's are). The registration is waited for like the
// communicator's creation: one that fails after NCCL accepted it, or does
// not complete within the communicator's timeout, aborts the communicator.
func (c *Comm) RegisterWindow(ptr uint64, size int64) (Window, error) {
	if err := c.open(); err != nil {
		return Window{}, err
	}
	if size <= 0 {
		return Window{}, fmt.Errorf("nccl: ncclCommWindowRegister of %d bytes", size)
	}
	const call = "ncclCommWindowRegister"
	l := c.lib
	// NCCL writes the window from its own thread, after the call returns
	// (api.h): into C memory, freed once that thread is done or aborted.
	slot := (*unsafe.Pointer)(C.calloc(1, C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
	if slot == nil {
		return Window{}, fmt.Errorf("nccl: no memory for the window handle")
	}
	defer C.free(unsafe.Pointer(slot))
	start := time.Now()
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_window_register(&l.api, c.h, C.uint64_t(ptr), C.size_t(size), C.EP_NCCL_WIN_COLL_SYMMETRIC, slot, p, n)
	if rc != C.EP_NCCL_SUCCESS && rc != C.EP_NCCL_IN_PROGRESS {
		// Refused within the call: nothing runs on to wait for. Should the
		// refusal leave the communicator failed, its finalize fails too,
		// and Destroy aborts it.
		return Window{}, l.check(call, rc, &last)
	}
	if err := c.settle(call, rc, &last, start); err != nil {
		return Window{}, err
	}
	if *slot == nil {
		return Window{}, ErrNoSymmetricMemory
	}
	return Window{h: *slot}, nil
}

// DeregisterWindow is ncclCommWindowDeregister. Unlike the registration,
// NCCL 2.30 deregisters within the call, without the other ranks, so there
// is nothing to wait for.
func (c *Comm) DeregisterWindow(w Window) error {
	if err := c.open(); err != nil {
		return err
	}
	if w.h == nil {
		return ErrNoWindow
	}
	l := c.lib
	var last lastError
	p, n := last.buf()
	return l.check("ncclCommWindowDeregister", C.ep_nccl_window_deregister(&l.api, c.h, w.h, p, n), &last)
}

// PeerPointer is ncclGetPeerDevicePointer: the device address at which the
// calling rank reaches offset bytes into peer's buffer of window w by
// load/store, or 0 when peer is outside its NVLink (LSA) team.
func (l *Lib) PeerPointer(w Window, offset int64, peer int) (uint64, error) {
	if err := l.open(); err != nil {
		return 0, err
	}
	if w.h == nil {
		return 0, ErrNoWindow
	}
	if offset < 0 {
		return 0, fmt.Errorf("nccl: ncclGetPeerDevicePointer at offset %d", offset)
	}
	var ptr C.uint64_t
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_peer_device_pointer(&l.api, w.h, C.size_t(offset), C.int(peer), &ptr, p, n)
	if err := l.check("ncclGetPeerDevicePointer", rc, &last); err != nil {
		return 0, err
	}
	return uint64(ptr), nil
}
