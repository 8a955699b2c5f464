package nccl

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/epbench/epbench/internal/ranklist"
)

// Gatherer is the collective the transport exchanges its ranks' state and
// NCCL's unique id with (*mpi.Comm satisfies it).
type Gatherer interface {
	Rank() int
	Size() int
	AllgatherBytes(send []byte) ([]byte, error)
}

// Transport is epbench's transport over NCCL's symmetric memory (the
// CUDA backend's Transport): one ncclMemAlloc buffer per rank registered
// as a collective window, every peer's part of it addressed through the
// pointer NCCL gives for its LSA team (the ranks it reaches by load/store:
// NVLink within a node or a multi-node NVLink domain). The kernels see the
// same peer table as with CUDA IPC. It makes no CUDA call of its own, so
// it is tested here against the stand-in library.
type Transport struct {
	g     Gatherer
	name  string
	lib   *Lib
	comm  *Comm
	local uint64
	win   Window // the zero Window until registered
}

// MultiRankGPUEnv is NCCL's switch for several ranks on one GPU, which it
// refuses otherwise; NewTransport sets it to 1 where ranks share a GPU (they do
// because the job was launched so).
const MultiRankGPUEnv = "NCCL_MULTI_RANK_GPU_ENABLE"

// NewTransport loads libnccl on every rank, broadcasts rank 0's unique id and
// creates the communicator (collective: every rank learns of any rank's
// failure to get that far, so none waits in NCCL for a rank that gave up).
// sharedGPU says this rank's GPU runs other ranks too. timeout bounds each of
// NCCL's collective steps, here and in Alloc and Close (0: no bound): a rank
// that fails or stalls inside NCCL leaves the others with a *TimeoutError
// rather than waiting forever.
func NewTransport(g Gatherer, sharedGPU bool, timeout time.Duration) (*Transport, error) {
	lib, err := Load()
	var id UniqueID
	if err == nil && g.Rank() == 0 {
		if id, err = lib.GetUniqueID(); err != nil {
			err = fmt.Errorf("NCCL unique id: %w", err)
		}
	}
	mine := make([]byte, len(id)+1)
	copy(mine, id[:])
	if err == nil {
		mine[len(id)] = 1
	}
	all, gerr := g.AllgatherBytes(mine)
	fail := func(e error) (*Transport, error) {
		if lib != nil {
			_ = lib.Close()
		}
		return nil, e
	}
	if err != nil {
		return fail(err)
	}
	if gerr != nil {
		return fail(fmt.Errorf("exchanging the NCCL unique id: %w", gerr))
	}
	if bad := failedRanks(all, len(mine)); len(bad) > 0 {
		return fail(fmt.Errorf("NCCL transport: %s could not load NCCL or make its unique id", ranklist.String(bad)))
	}
	copy(id[:], all[:len(id)])
	if sharedGPU {
		// NCCL refuses two ranks on one GPU unless told they are meant.
		if err := os.Setenv(MultiRankGPUEnv, "1"); err != nil {
			return fail(err)
		}
	}
	comm, err := lib.CommInitRank(g.Size(), id, g.Rank(), timeout)
	if err != nil {
		return fail(fmt.Errorf("NCCL communicator of %d ranks: %w", g.Size(), err))
	}
	name := fmt.Sprintf("NCCL %s symmetric window (LSA load/store)", lib.Version)
	return &Transport{g: g, name: name, lib: lib, comm: comm}, nil
}

// failedRanks lists the ranks whose record (of size n, last byte 1 for
// success) in all says they failed.
func failedRanks(all []byte, n int) []int {
	var bad []int
	for r := 0; r < len(all)/n; r++ {
		if all[(r+1)*n-1] != 1 {
			bad = append(bad, r)
		}
	}
	return bad
}

// Name says which transport this is.
func (t *Transport) Name() string { return t.name }

// Alloc allocates size bytes on every rank (collective) and returns this
// rank's base and every rank's base as mapped here. Every step that NCCL
// makes collective is preceded by an exchange of the ranks' state, so that
// a rank's failure is reported by all instead of leaving the others waiting
// in NCCL; a failure inside the step is bounded by the timeout.
func (t *Transport) Alloc(size int64) (uint64, []uint64, error) {
	if t.local != 0 {
		return 0, nil, errors.New("NCCL transport: already allocated")
	}
	p, err := t.lib.MemAlloc(size)
	if err != nil {
		err = fmt.Errorf("ncclMemAlloc of %d bytes: %w", size, err)
	}
	if err := t.agree(err, "allocate its symmetric memory"); err != nil {
		if p != 0 {
			_ = t.lib.MemFree(p)
		}
		return 0, nil, err
	}
	t.local = p
	win, err := t.comm.RegisterWindow(p, size)
	if err != nil {
		_ = t.Close()
		return 0, nil, fmt.Errorf("registering the symmetric window: %w", err)
	}
	t.win = win
	n := t.g.Size()
	peers := make([]uint64, n)
	var unreachable []int
	for r := 0; r < n && err == nil; r++ {
		peers[r], err = t.lib.PeerPointer(win, 0, r)
		if err == nil && peers[r] == 0 {
			unreachable = append(unreachable, r)
		}
	}
	if err == nil && len(unreachable) > 0 {
		// What GIN NCCL found here, so the user knows whether the system
		// would carry such a job once kernels put through GIN.
		gin := "unknown"
		if p, perr := t.comm.Properties(); perr == nil {
			gin = p.GIN.String()
		}
		err = fmt.Errorf("NCCL reaches %s only through GIN (not by load/store: outside this rank's NVLink domain; "+
			"GIN here: %s), and epbench's kernels reach peers by load/store only (docs/MULTINODE.md)",
			ranklist.String(unreachable), gin)
	}
	if err := t.agree(err, "address every peer"); err != nil {
		_ = t.Close()
		return 0, nil, err
	}
	return p, peers, nil
}

// agree shares whether each rank's step succeeded: this rank's error, else
// one naming the ranks that failed to do what.
func (t *Transport) agree(mine error, what string) error {
	rec := []byte{0}
	if mine == nil {
		rec[0] = 1
	}
	all, gerr := t.g.AllgatherBytes(rec)
	if mine != nil {
		return mine
	}
	if gerr != nil {
		return fmt.Errorf("NCCL transport: exchanging state: %w", gerr)
	}
	if bad := failedRanks(all, 1); len(bad) > 0 {
		return fmt.Errorf("NCCL transport: %s could not %s", ranklist.String(bad), what)
	}
	return nil
}

// Close releases the window, the memory, the communicator and the library,
// each once; closing again is not an error. A communicator that a failed or
// timed-out step aborted is gone already, and one whose finalize fails or
// times out is aborted, so Close does not hang in NCCL either.
func (t *Transport) Close() error {
	var errs []error
	if t.win != (Window{}) {
		errs = append(errs, t.comm.DeregisterWindow(t.win))
		t.win = Window{}
	}
	if t.local != 0 {
		errs = append(errs, t.lib.MemFree(t.local))
		t.local = 0
	}
	if t.comm != nil {
		errs = append(errs, t.comm.Destroy())
		t.comm = nil
	}
	if t.lib != nil {
		errs = append(errs, t.lib.Close())
		t.lib = nil
	}
	return errors.Join(errs...)
}
