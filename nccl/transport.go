package nccl

import (
	"errors"
	"fmt"
	"os"
	"slices"
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
// same peer table as with CUDA IPC. Peers outside the LSA team can be left
// to kernels that put through GIN instead (AllocWith, EnableGIN). It makes
// no CUDA call of its own, so it is tested here against the stand-in
// library.
type Transport struct {
	g     Gatherer
	name  string
	lib   *Lib
	comm  *Comm
	local uint64
	win   Window   // the zero Window until registered
	gin   []int    // peers NCCL reaches only through GIN (AllowGIN)
	dev   *DevComm // nil until EnableGIN
}

// AllocOptions are the choices of AllocWith.
type AllocOptions struct {
	// AllowGIN accepts peers that NCCL reaches only through GIN: their
	// entries in the peer table are 0, and GINPeers lists them. Without it
	// such peers make Alloc fail, as load/store kernels cannot reach them.
	AllowGIN bool
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
	if bad := ranklist.Failed(all, len(mine)); len(bad) > 0 {
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

// Name says which transport this is.
func (t *Transport) Name() string { return t.name }

// Alloc allocates size bytes on every rank (collective) and returns this
// rank's base and every rank's base as mapped here. Every step that NCCL
// makes collective is preceded by an exchange of the ranks' state, so that
// a rank's failure is reported by all instead of leaving the others waiting
// in NCCL; a failure inside the step is bounded by the timeout. A peer that
// NCCL reaches only through GIN is refused; AllocWith can accept it.
func (t *Transport) Alloc(size int64) (uint64, []uint64, error) {
	return t.AllocWith(size, AllocOptions{})
}

// AllocWith is Alloc with the choices of o.
func (t *Transport) AllocWith(size int64, o AllocOptions) (uint64, []uint64, error) {
	if t.local != 0 {
		return 0, nil, errors.New("NCCL transport: already allocated")
	}
	p, err := t.lib.MemAlloc(size)
	if err != nil {
		err = fmt.Errorf("allocating %d bytes of symmetric memory: %w", size, err)
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
	if err == nil && o.AllowGIN {
		t.gin = unreachable
	} else if err == nil && len(unreachable) > 0 {
		// A job set up for load/store peers (one LSA team, no -n) that
		// finds some without an address: say what GIN NCCL found.
		gin := "unknown"
		if p, perr := t.comm.Properties(); perr == nil {
			gin = p.GIN.String()
		}
		err = fmt.Errorf("NCCL reaches %s only through GIN (not by load/store: outside this rank's NVLink domain; "+
			"GIN here: %s), and this set-up reaches peers by load/store only (docs/MULTINODE.md)",
			ranklist.String(unreachable), gin)
	}
	if err := t.agree(err, "address every peer"); err != nil {
		_ = t.Close()
		return 0, nil, err
	}
	return p, peers, nil
}

// OutsideLSA reports whether NCCL groups the ranks in more than one LSA
// team, so that some peers are reachable from this rank only through GIN
// (ranks on other nodes without a multi-node NVLink domain). The same on
// every rank; known once the communicator exists, before Alloc.
func (t *Transport) OutsideLSA() (bool, error) {
	p, err := t.comm.Properties()
	if err != nil {
		return false, fmt.Errorf("NCCL transport: its LSA teams: %w", err)
	}
	return p.LSATeams > 1, nil
}

// Window is the registered window (the zero Window before Alloc).
func (t *Transport) Window() Window { return t.win }

// GINPeers lists the ranks that NCCL reaches from this rank only through
// GIN, whose entries in Alloc's peer table are 0: empty unless AllocWith
// allowed GIN.
func (t *Transport) GINPeers() []int { return slices.Clone(t.gin) }

// EnableGIN makes the device communicator that GIN kernels put through,
// with contexts GIN contexts (see Comm.CreateDevComm). Every rank calls it
// after Alloc (collective, and refused by all when any rank refuses): it
// needs NCCL's proxy GIN, the kind epbench's GIN kernels are built for,
// and a library whose device communicator they read (GINHeadersVersion).
// Close destroys the device communicator.
func (t *Transport) EnableGIN(contexts int) (*DevComm, error) {
	var err error
	switch {
	case t.win == (Window{}):
		err = errors.New("NCCL transport: GIN enabled before Alloc")
	case t.dev != nil:
		err = errors.New("NCCL transport: GIN enabled twice")
	case contexts < 1:
		err = fmt.Errorf("NCCL transport: %d GIN contexts", contexts)
	default:
		err = t.checkGIN()
	}
	if err := t.agree(err, "use NCCL's GIN"); err != nil {
		return nil, err
	}
	dev, err := t.comm.CreateDevComm(contexts)
	if err != nil {
		err = fmt.Errorf("NCCL device communicator with GIN: %w", err)
	}
	if err := t.agree(err, "create its NCCL device communicator"); err != nil {
		if dev != nil {
			err = errors.Join(err, dev.Destroy())
		}
		return nil, err
	}
	t.dev = dev
	t.name = fmt.Sprintf("NCCL %s symmetric window (LSA load/store, proxy GIN)", t.lib.Version)
	return dev, nil
}

// checkGIN refuses a communicator whose GIN the kernels cannot use.
func (t *Transport) checkGIN() error {
	p, err := t.comm.Properties()
	if err != nil {
		return fmt.Errorf("NCCL transport: which GIN NCCL found: %w", err)
	}
	switch p.GIN {
	case GINProxy:
		return checkGINVersion(t.lib)
	case GINNone:
		return fmt.Errorf("%w: NCCL found no GIN backend (GIN type none): a network with GPU-initiated RDMA, or an RMA "+
			"plugin through NCCL_RMA_PLUGIN, is needed (docs/MULTINODE.md)", ErrGINUnsupported)
	}
	return fmt.Errorf("%w: NCCL's GIN here is %s, and epbench's GIN kernels are built for NCCL's proxy GIN only "+
		"(NCCL_GIN_TYPE=2 asks NCCL for it)", ErrGINUnsupported, p.GIN)
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
	if bad := ranklist.Failed(all, 1); len(bad) > 0 {
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
	// The device communicator reaches the window through GIN: it goes
	// first. An aborted communicator took both with it.
	if t.dev != nil {
		errs = append(errs, t.dev.Destroy())
		t.dev = nil
	}
	if t.win != (Window{}) && t.comm.open() == nil {
		errs = append(errs, t.comm.DeregisterWindow(t.win))
	}
	t.win = Window{}
	t.gin = nil
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
