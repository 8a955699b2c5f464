package nccl

// #include "api.h"
import "C"

import (
	"errors"
	"fmt"
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

// Comm is an NCCL communicator.
type Comm struct {
	lib *Lib
	h   unsafe.Pointer // ncclComm_t; nil once destroyed
}

// CommInitRank is ncclCommInitRank: a blocking, collective call of all
// nranks ranks, each with the same id. It binds the communicator to the
// CUDA device current on the calling thread.
func (l *Lib) CommInitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if err := l.open(); err != nil {
		return nil, err
	}
	var h unsafe.Pointer
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_comm_init_rank(&l.api, &h, C.int(nranks), (*C.char)(unsafe.Pointer(&id[0])), C.int(rank), p, n)
	if err := l.check("ncclCommInitRank", rc, &last); err != nil {
		return nil, err
	}
	l.comms++
	return &Comm{lib: l, h: h}, nil
}

func (c *Comm) open() error {
	if c == nil || c.h == nil {
		return ErrDestroyed
	}
	return nil
}

// Destroy is ncclCommFinalize, then ncclCommDestroy, which runs even when
// the finalize fails. Either way the communicator is gone afterwards; a
// second Destroy returns nil.
func (c *Comm) Destroy() error {
	if c == nil || c.h == nil {
		return nil
	}
	l := c.lib
	var last lastError
	p, n := last.buf()
	ferr := l.check("ncclCommFinalize", C.ep_nccl_comm_finalize(&l.api, c.h, p, n), &last)
	derr := l.check("ncclCommDestroy", C.ep_nccl_comm_destroy(&l.api, c.h, p, n), &last)
	c.h = nil
	l.comms--
	return errors.Join(ferr, derr)
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
	version := C.uint(C.EP_NCCL_PROPS_VERSION)
	if l.code < C.EP_NCCL_PROPS_VERSION {
		version = C.uint(l.code)
	}
	var props C.ep_nccl_comm_properties
	var last lastError
	p, n := last.buf()
	rc := C.ep_nccl_comm_query_properties(&l.api, c.h, version, &props, p, n)
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
