package nccl

// #include <stdlib.h>
// #include "api.h"
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// GINHeadersVersion is the NCCL release whose device headers epbench's GIN
// kernels are compiled against. Device communicators are requested in its
// layout (the requirements carry its version code), and a library is
// accepted for them only from the same minor release, this patch or later.
var GINHeadersVersion = ParseVersion(C.EP_NCCL_DEVICE_VERSION)

// DevCommBytes is the size of a device communicator in the layout of
// GINHeadersVersion.
const DevCommBytes = C.EP_NCCL_DEV_COMM_BYTES

// ErrGINUnsupported: the communicator's GIN, or the library, cannot carry
// epbench's GIN kernels. The wrapping error says what was found.
var ErrGINUnsupported = errors.New("nccl: epbench's GIN kernels cannot run on this NCCL")

// DevComm is an NCCL device communicator (ncclDevComm_t): what a kernel is
// given, by value, to reach the communicator's ranks from the device, here
// through GIN (GPU-initiated networking).
type DevComm struct {
	comm  *Comm
	bytes [DevCommBytes]byte
	live  bool // false once destroyed
}

// CreateDevComm is ncclDevCommCreate of a device communicator with GIN from
// every rank to every rank and contexts GIN contexts (NCCL may give more).
// It asks for no indexed signals or counters: the kernels signal by adding
// into a window, so window signals are required, and strong ones (a signal
// that also settles the puts before it). A collective call; NCCL completes
// it on its own thread, and it is waited for like the communicator's other
// steps: one that fails, or does not complete within the communicator's
// timeout, aborts the communicator. The library must be of
// GINHeadersVersion's minor release, at its patch or later.
func (c *Comm) CreateDevComm(contexts int) (*DevComm, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if contexts < 1 {
		return nil, fmt.Errorf("nccl: device communicator with %d GIN contexts", contexts)
	}
	l := c.lib
	if err := checkGINVersion(l); err != nil {
		return nil, err
	}
	const call = "ncclDevCommCreate"
	// NCCL writes the device communicator from its own thread, after the
	// call returns (api.h): into C memory, freed once that thread is done
	// or aborted.
	out := C.calloc(1, C.EP_NCCL_DEV_COMM_SCRATCH)
	if out == nil {
		return nil, errors.New("nccl: no memory for the device communicator")
	}
	defer C.free(out)
	start := time.Now()
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_dev_comm_create(&l.api, c.h, C.int(contexts), out, p, n)
	if rc != C.EP_NCCL_SUCCESS && rc != C.EP_NCCL_IN_PROGRESS {
		// Refused within the call, as RegisterWindow can be.
		return nil, l.check(call, rc, &last)
	}
	if err := c.settle(call, rc, &last, start); err != nil {
		return nil, err
	}
	d := &DevComm{comm: c, live: true}
	copy(d.bytes[:], unsafe.Slice((*byte)(out), DevCommBytes))
	// The struct starts with NCCL's magic, as its versioned structs do.
	if binary.NativeEndian.Uint32(d.bytes[:4]) != C.EP_NCCL_API_MAGIC {
		return nil, fmt.Errorf("nccl: %s completed without writing the device communicator", call)
	}
	return d, nil
}

// checkGINVersion refuses a library whose device communicator the GIN
// kernels would misread.
func checkGINVersion(l *Lib) error {
	v, h := l.Version, GINHeadersVersion
	if v.Major == h.Major && v.Minor == h.Minor && !v.Less(h) {
		return nil
	}
	return fmt.Errorf("%w: found NCCL %s at %s; the GIN kernels are compiled against NCCL %s's device headers, so the device "+
		"communicator's layout must match: NCCL %d.%d.%d or a later %d.%d release is needed",
		ErrGINUnsupported, v, l.Path, h, h.Major, h.Minor, h.Patch, h.Major, h.Minor)
}

// Bytes is a copy of the device communicator as NCCL wrote it, DevCommBytes
// long: the kernel parameter.
func (d *DevComm) Bytes() []byte {
	b := make([]byte, DevCommBytes)
	copy(b, d.bytes[:])
	return b
}

// Destroy is ncclDevCommDestroy. NCCL 2.30 releases the device
// communicator within the call, without the other ranks, so there is
// nothing to wait for. Destroying twice is not an error, nor is destroying
// after the communicator itself is gone (its end released this too).
func (d *DevComm) Destroy() error {
	if d == nil || !d.live {
		return nil
	}
	d.live = false
	c := d.comm
	if c.open() != nil {
		return nil
	}
	l := c.lib
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_dev_comm_destroy(&l.api, c.h, unsafe.Pointer(&d.bytes[0]), p, n)
	return l.check("ncclDevCommDestroy", rc, &last)
}
