package gpu

import (
	"errors"

	"github.com/epbench/epbench/nccl"
)

// Gatherer is the collective a transport needs to exchange handles
// (*mpi.Comm satisfies it): the NCCL transport's.
type Gatherer = nccl.Gatherer

// Transport makes one device allocation of every rank addressable by this
// rank's kernels: CUDA IPC within a node (IPC), or NCCL's symmetric windows
// (nccl.Transport, a GINTransport) wherever NCCL reaches a peer by
// load/store. The runner never sees which one is in use.
type Transport interface {
	// Name says which transport this is.
	Name() string
	// Alloc allocates size bytes on every rank (collective) and returns this
	// rank's base and every rank's base as mapped here (own included).
	Alloc(size int64) (local uint64, peers []uint64, err error)
	// Close unmaps the peers and frees the allocation.
	Close() error
}

// ErrMultiNode means the ranks span hosts, which CUDA IPC cannot reach.
var ErrMultiNode = errors.New("ranks span more than one host, which CUDA IPC cannot reach (--transport nccl or auto; docs/MULTINODE.md)")
