package nccl

// #include "api.h"
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// UniqueID is ncclUniqueId: made by one rank with GetUniqueID and handed to
// every rank (over MPI) for CommInitRank.
type UniqueID [C.EP_NCCL_UNIQUE_ID_BYTES]byte

// GetUniqueID is ncclGetUniqueId.
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := l.open(); err != nil {
		return id, err
	}
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_get_unique_id(&l.api, (*C.char)(unsafe.Pointer(&id[0])), p, n)
	return id, l.check("ncclGetUniqueId", rc, &last)
}

// Comm is an NCCL communicator, non-blocking: NCCL runs its collective steps
// (creation, window registration, finalization) on a thread of its own, and
// the calling thread polls for them, each for at most the communicator's
// timeout. A step that fails or does not complete in time aborts the
// communicator (ncclCommAbort), so that no rank waits in NCCL for a rank
// that failed or stalled there.
type Comm struct {
	lib     *Lib
	h       unsafe.Pointer // ncclComm_t; nil once destroyed or aborted
	timeout time.Duration  // bound of each step; 0: none
}

// pollInterval is how long a wait for an NCCL step sleeps between polls.
const pollInterval = time.Millisecond

// CommInitRank is ncclCommInitRankConfig with a non-blocking config: a
// collective call of all nranks ranks, each with the same id, waited for
// until timeout has passed (0: without bound). It binds the communicator to
// the CUDA device current on the calling thread. A communicator that fails
// or is not ready in time is aborted: the error is NCCL's *Error or a
// *TimeoutError.
func (l *Lib) CommInitRank(nranks int, id UniqueID, rank int, timeout time.Duration) (*Comm, error) {
	if err := l.open(); err != nil {
		return nil, err
	}
	const call = "ncclCommInitRankConfig"
	start := time.Now()
	var h unsafe.Pointer
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_comm_init_rank_config(&l.api, &h, C.int(nranks), (*C.char)(unsafe.Pointer(&id[0])), C.int(rank),
		l.layoutVersion(), p, n)
	if h == nil {
		if err := l.check(call, rc, &last); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("nccl: %s returned no communicator", call)
	}
	l.comms++
	c := &Comm{lib: l, h: h, timeout: timeout}
	if err := c.settle(call, rc, &last, start); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Comm) open() error {
	if c == nil || c.h == nil {
		return ErrDestroyed
	}
	return nil
}

// settle finishes the step call that returned rc (its text in last) at
// start: it waits for the step while it is in progress, then reports its
// result. A step that failed, or did not complete within c's timeout,
// aborts c.
func (c *Comm) settle(call string, rc C.int, last *lastError, start time.Time) error {
	l := c.lib
	for rc == C.EP_NCCL_IN_PROGRESS || rc == C.EP_NCCL_SUCCESS {
		var state C.int
		p, n := last.buf()
		if prc := C.ep_nccl_comm_get_async_error(&l.api, c.h, &state, p, n); prc != C.EP_NCCL_SUCCESS {
			return c.abortAfter(l.check("ncclCommGetAsyncError", prc, last))
		}
		if state == C.EP_NCCL_SUCCESS {
			return nil
		}
		if rc = state; rc != C.EP_NCCL_IN_PROGRESS {
			break
		}
		if c.timeout > 0 && time.Since(start) >= c.timeout {
			return c.abortAfter(&TimeoutError{Call: call, After: c.timeout})
		}
		time.Sleep(pollInterval)
	}
	return c.abortAfter(l.check(call, rc, last))
}

// abortAfter aborts c after the failure err, and returns err with the
// abort's own failure, if any.
func (c *Comm) abortAfter(err error) error {
	if aerr := c.abort(); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// abort is ncclCommAbort: it stops what NCCL still runs for c, waits for
// NCCL's thread and frees the communicator without waiting for the other
// ranks. c is gone afterwards, whatever NCCL returns.
func (c *Comm) abort() error {
	l := c.lib
	var last lastError
	p, n := last.buf()
	err := l.check("ncclCommAbort", C.ep_nccl_comm_abort(&l.api, c.h, p, n), &last)
	c.h = nil
	l.comms--
	return err
}

// Destroy is ncclCommFinalize, waited for like the other steps, then
// ncclCommDestroy. A finalize that fails or does not complete in time aborts
// the communicator instead, so that teardown cannot hang. Either way the
// communicator is gone afterwards; a second Destroy, or one after a step
// aborted it, returns nil.
func (c *Comm) Destroy() error {
	if c == nil || c.h == nil {
		return nil
	}
	l := c.lib
	start := time.Now()
	var last lastError
	p, n := last.buf()
	if err := c.settle("ncclCommFinalize", C.ep_nccl_comm_finalize(&l.api, c.h, p, n), &last, start); err != nil {
		return err
	}
	err := l.check("ncclCommDestroy", C.ep_nccl_comm_destroy(&l.api, c.h, p, n), &last)
	c.h = nil
	l.comms--
	return err
}

// GINType is how a communicator reaches ranks outside its NVLink domain
// from the device (GPU-initiated networking).
type GINType int

// ncclGinType_t values.
const (
	GINNone  GINType = 0
	GINProxy GINType = 2 // through a CPU proxy thread
	GINGDAKI GINType = 3 // the GPU drives the NIC directly
	GINGPI   GINType = 4
)

func (g GINType) String() string {
	switch g {
	case GINNone:
		return "none"
	case GINProxy:
		return "proxy"
	case GINGDAKI:
		return "GDAKI"
	case GINGPI:
		return "GPI"
	}
	return fmt.Sprintf("GINType(%d)", int(g))
}

// Properties are what ncclCommQueryProperties reports of a communicator.
type Properties struct {
	Rank, NRanks int
	CUDADev      int  // CUDA device ordinal the communicator runs on
	NVMLDev      int  // the same device's NVML index
	DeviceAPI    bool // symmetric windows and device-initiated communication
	Multimem     bool // NVLink SHARP multicast across the LSA team
	GIN          GINType
	RailedGIN    GINType // GIN between ranks of the same rail
	LSATeams     int     // load/store-accessible (NVLink) teams in the communicator
	HostRMA      bool
}

// Properties is ncclCommQueryProperties. The struct is passed in the layout
// of NCCL 2.30.7, or of the library's own version when that is older (NCCL
// refuses a layout newer than itself).
func (c *Comm) Properties() (Properties, error) {
	if err := c.open(); err != nil {
		return Properties{}, err
	}
	l := c.lib
	var props C.ep_nccl_comm_properties
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_comm_query_properties(&l.api, c.h, l.layoutVersion(), &props, p, n)
	if err := l.check("ncclCommQueryProperties", rc, &last); err != nil {
		return Properties{}, err
	}
	return Properties{
		Rank:      int(props.rank),
		NRanks:    int(props.nRanks),
		CUDADev:   int(props.cudaDev),
		NVMLDev:   int(props.nvmlDev),
		DeviceAPI: bool(props.deviceApiSupport),
		Multimem:  bool(props.multimemSupport),
		GIN:       GINType(props.ginType),
		RailedGIN: GINType(props.railedGinType),
		LSATeams:  int(props.nLsaTeams),
		HostRMA:   bool(props.hostRmaSupport),
	}, nil
}
