package gpu

// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/epbench/epbench/internal/ranklist"
	"gorgonia.org/cu"
)

// IPC is the CUDA IPC transport: cuMemAlloc on every rank, handles
// all-gathered, each peer's allocation opened with cuIpcOpenMemHandle.
type IPC struct {
	g      Gatherer
	local  cu.DevicePtr
	peers  []uint64
	opened []bool
}

// NewIPC returns the IPC transport; worldSize and localSize are the job's and
// this node's rank counts, which must be equal.
func NewIPC(g Gatherer, worldSize, localSize int) (*IPC, error) {
	if worldSize != localSize {
		return nil, fmt.Errorf("%w (%d ranks, %d on this host)", ErrMultiNode, worldSize, localSize)
	}
	return &IPC{g: g}, nil
}

// Name implements Transport.
func (t *IPC) Name() string { return "CUDA IPC (NVLink P2P)" }

// Alloc implements Transport. On any error everything acquired so far is
// released before it returns.
func (t *IPC) Alloc(size int64) (uint64, []uint64, error) {
	if t.local != 0 {
		return 0, nil, errors.New("IPC transport: already allocated")
	}
	p, err := cu.MemAlloc(size)
	// Every rank takes part in the exchange below even when its allocation
	// failed, so that no peer waits for it; a failed rank sends a zero handle.
	hsize := IPCHandleSize()
	mine := make([]byte, hsize+1)
	if err == nil {
		var h []byte
		if h, err = IPCHandle(uint64(p)); err == nil {
			copy(mine, h)
			mine[hsize] = 1
		}
	}
	if err != nil && p != 0 {
		_ = cu.MemFree(p)
		p = 0
	}
	all, gerr := t.g.AllgatherBytes(mine)
	if err != nil {
		return 0, nil, fmt.Errorf("allocating %d bytes of symmetric memory: %w", size, err)
	}
	if gerr != nil {
		_ = cu.MemFree(p)
		return 0, nil, fmt.Errorf("exchanging IPC handles: %w", gerr)
	}
	t.local = p
	if bad := ranklist.Failed(all, hsize+1); len(bad) > 0 {
		_ = t.Close()
		return 0, nil, fmt.Errorf("%s could not allocate its symmetric memory", ranklist.String(bad))
	}
	n := t.g.Size()
	t.peers = make([]uint64, n)
	t.opened = make([]bool, n)
	me := t.g.Rank()
	for r := 0; r < n; r++ {
		rec := all[r*(hsize+1) : (r+1)*(hsize+1)]
		if r == me {
			t.peers[r] = uint64(p)
			continue
		}
		addr, err := IPCOpen(rec[:hsize])
		if err != nil {
			_ = t.Close()
			return 0, nil, fmt.Errorf("mapping rank %d's memory: %w", r, err)
		}
		t.peers[r], t.opened[r] = addr, true
	}
	return uint64(p), t.peers, nil
}

// Close implements Transport.
func (t *IPC) Close() error {
	var errs []error
	for r, ok := range t.opened {
		if ok {
			errs = append(errs, IPCClose(t.peers[r]))
			t.opened[r] = false
		}
	}
	if t.local != 0 {
		errs = append(errs, cu.MemFree(t.local))
		t.local = 0
	}
	return errors.Join(errs...)
}

// IPCHandleSize is the size of a CUDA IPC memory handle.
func IPCHandleSize() int { return int(C.ep_ipc_handle_size()) }

// IPCHandle exports the allocation at dptr for other processes.
func IPCHandle(dptr uint64) ([]byte, error) {
	h := make([]byte, IPCHandleSize())
	buf := C.malloc(C.size_t(len(h)))
	defer C.free(buf)
	if err := check("cuIpcGetMemHandle", C.ep_ipc_get(C.uint64_t(dptr), buf)); err != nil {
		return nil, err
	}
	copy(h, unsafe.Slice((*byte)(buf), len(h)))
	return h, nil
}

// IPCOpen maps a peer's exported allocation into this context.
func IPCOpen(handle []byte) (uint64, error) {
	if len(handle) != IPCHandleSize() {
		return 0, fmt.Errorf("IPC handle of %d bytes, want %d", len(handle), IPCHandleSize())
	}
	buf := C.CBytes(handle)
	defer C.free(buf)
	var p C.uint64_t
	if err := check("cuIpcOpenMemHandle", C.ep_ipc_open(buf, &p)); err != nil {
		return 0, err
	}
	return uint64(p), nil
}

// IPCClose unmaps a peer allocation opened with IPCOpen.
func IPCClose(dptr uint64) error {
	return check("cuIpcCloseMemHandle", C.ep_ipc_close(C.uint64_t(dptr)))
}
