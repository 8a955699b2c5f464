package nccl

// #include "api.h"
import "C"

import (
	"fmt"
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

// RegisterWindow is ncclCommWindowRegister of size bytes at device address
// ptr as a collective symmetric window: every rank of the communicator
// registers its own buffer of the same size, and NCCL wants the base aligned
// to 4096 bytes (MemAlloc's are).
func (c *Comm) RegisterWindow(ptr uint64, size int64) (Window, error) {
	if err := c.open(); err != nil {
		return Window{}, err
	}
	if size <= 0 {
		return Window{}, fmt.Errorf("nccl: ncclCommWindowRegister of %d bytes", size)
	}
	l := c.lib
	var w unsafe.Pointer
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_window_register(&l.api, c.h, C.uint64_t(ptr), C.size_t(size), C.EP_NCCL_WIN_COLL_SYMMETRIC, &w, p, n)
	if err := l.check("ncclCommWindowRegister", rc, &last); err != nil {
		return Window{}, err
	}
	if w == nil {
		return Window{}, ErrNoSymmetricMemory
	}
	return Window{h: w}, nil
}

// DeregisterWindow is ncclCommWindowDeregister, collective like the
// registration.
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
