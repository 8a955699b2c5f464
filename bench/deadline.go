package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/epbench/epbench/internal/ranklist"
	"github.com/epbench/epbench/mpi"
)

// TimeoutError says that ranks did not arrive in time, and where.
type TimeoutError struct {
	Phase string        // e.g. "dispatch exchange", "barrier after the iteration"
	Ranks []int         // the ranks that did not arrive, in increasing order
	After time.Duration // the bound that passed
	// Indirect: this rank only knows that Ranks (rank 0) did not release it
	// from a barrier; they may themselves be waiting for another rank.
	Indirect bool
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("%s: timed out after %d ms waiting for %s", e.Phase, e.After.Milliseconds(), ranklist.String(e.Ranks))
	if e.Indirect {
		msg += " (or a rank it waits for)"
	}
	return msg
}

// PeerTimeout marks the error as a peer that did not arrive (exit code 4).
func (e *TimeoutError) PeerTimeout() bool { return true }

// ReleaseGrace is how much longer than the timeout a rank waits for rank 0 to
// release it from a Barrier: rank 0 gives up first and tells every rank
// that arrived which ranks did not.
const ReleaseGrace = time.Second

// HostWorkTimeout is the least bound of the barriers that follow host work
// whose length differs between ranks (set-up, checking outputs): a rank that
// is still computing there has not failed.
const HostWorkTimeout = time.Minute

// Message tags of the Barrier, apart from the backends' tags.
const (
	tagArrive  = 7001
	tagRelease = 7002
)

// What a rank says of itself on arrival, and what rank 0's release says of
// each rank.
const (
	voteOK      byte = 1
	voteFailed  byte = 2
	voteMissing byte = 3 // release only: the rank did not arrive in time
)

// Barrier is an MPI barrier bounded by a timeout that names the ranks that
// did not arrive. Every rank sends rank 0 a vote; rank 0 waits for them until
// its deadline, then sends each rank that arrived the fate of every rank.
// So every rank that arrived learns who did not, and Agree reduces a verdict
// on the way. Requests and buffers are allocated once: a steady loop of
// barriers does not allocate.
type Barrier struct {
	comm    *mpi.Comm
	timeout time.Duration
	poll    mpi.Poller

	vote    []byte // this rank's arrival (non-root)
	release []byte // one byte per rank: rank 0's verdict
	votes   []byte // root: one byte per rank
	reqs    []mpi.Request
	ptrs    []*mpi.Request
	failed  []int
}

// NewBarrier returns a bounded barrier over comm; every rank of comm must
// create one and call its methods in the same order.
func NewBarrier(comm *mpi.Comm, timeout time.Duration) *Barrier {
	n := max(comm.Size(), 1)
	b := &Barrier{
		comm: comm, timeout: timeout,
		vote: make([]byte, 1), release: make([]byte, n), votes: make([]byte, n),
		reqs: make([]mpi.Request, n), ptrs: make([]*mpi.Request, 0, n), failed: make([]int, 0, n),
	}
	return b
}

// Wait returns when every rank has called Wait, or a *TimeoutError naming
// the ranks that did not within the timeout.
func (b *Barrier) Wait(phase string) error {
	_, err := b.Agree(phase, true)
	return err
}

// Agree is Wait with a vote: it returns the ranks, in increasing order, that
// passed ok = false (valid until the next call), the same on every rank.
func (b *Barrier) Agree(phase string, ok bool) (failed []int, err error) {
	n, me := b.comm.Size(), b.comm.Rank()
	mine := voteOK
	if !ok {
		mine = voteFailed
	}
	if n <= 1 {
		b.release[0] = mine
		return b.verdict(phase)
	}
	start := time.Now()
	if me != 0 {
		b.vote[0] = mine
		recv, send := &b.reqs[0], &b.reqs[1]
		if err := b.comm.StartIrecv(recv, b.release, 0, tagRelease); err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		if err := b.comm.StartIsend(send, b.vote, 0, tagArrive); err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		b.ptrs = append(b.ptrs[:0], recv, send)
		pending, err := b.poll.Wait(b.ptrs, start.Add(b.timeout+ReleaseGrace))
		if len(pending) > 0 {
			return nil, &TimeoutError{Phase: phase, Ranks: []int{0}, After: b.timeout, Indirect: true}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		return b.verdict(phase)
	}

	// Rank 0: collect the votes until the deadline.
	b.ptrs = b.ptrs[:0]
	for r := 1; r < n; r++ {
		if err := b.comm.StartIrecv(&b.reqs[r], b.votes[r:r+1], r, tagArrive); err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		b.ptrs = append(b.ptrs, &b.reqs[r])
	}
	pending, err := b.poll.Wait(b.ptrs, start.Add(b.timeout))
	if err != nil && !errors.Is(err, mpi.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("%s: %w", phase, err)
	}
	b.release[0] = mine
	copy(b.release[1:], b.votes[1:])
	for _, i := range pending {
		b.release[i+1] = voteMissing
	}
	// Release every rank that arrived, telling it who did not.
	b.ptrs = b.ptrs[:0]
	for r := 1; r < n; r++ {
		if b.release[r] == voteMissing {
			continue
		}
		if err := b.comm.StartIsend(&b.reqs[r], b.release, r, tagRelease); err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		b.ptrs = append(b.ptrs, &b.reqs[r])
	}
	if len(b.ptrs) > 0 {
		pending, err := b.poll.Wait(b.ptrs, time.Now().Add(b.timeout))
		if len(pending) > 0 {
			missing := make([]int, 0, len(pending))
			for _, i := range pending {
				missing = append(missing, i+1)
			}
			return nil, &TimeoutError{Phase: phase + " (release)", Ranks: missing, After: b.timeout}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
	}
	return b.verdict(phase)
}

// verdict reads rank 0's release: the ranks that were missing make a
// *TimeoutError, the ranks that voted no are returned.
func (b *Barrier) verdict(phase string) ([]int, error) {
	var missing []int
	b.failed = b.failed[:0]
	for r, v := range b.release {
		switch v {
		case voteOK:
		case voteFailed:
			b.failed = append(b.failed, r)
		case voteMissing:
			missing = append(missing, r)
		default:
			return nil, fmt.Errorf("%s: rank 0 sent state %d for rank %d", phase, v, r)
		}
	}
	if len(missing) > 0 {
		return nil, &TimeoutError{Phase: phase, Ranks: missing, After: b.timeout}
	}
	return b.failed, nil
}
