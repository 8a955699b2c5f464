package mpi

// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"time"

	"github.com/epbench/epbench/internal/ranklist"
)

// An exchange among the active ranks of a communicator, for elastic EP
// (-T): the ranks marked inactive take no part, and a rank that does not
// answer by the deadline is given up on, which leaves the Exchange usable.

// Cancel cancels a pending request (MPI_Cancel) and waits for the
// cancellation to complete; MPI gives the buffer back. A request that had
// completed meanwhile completes as such. A send that cannot be cancelled
// (already matched) blocks here until it completes, so Cancel is meant for
// receives and for sends small enough to leave eagerly.
func (r *Request) Cancel() error {
	if r == nil || r.done {
		return nil
	}
	if err := ready(); err != nil {
		return err
	}
	if err := check("MPI_Cancel", C.MPI_Cancel(&r.h)); err != nil {
		return fmt.Errorf("%s: %w", r.fn, err)
	}
	_, err := r.settle("MPI_Wait", C.MPI_Wait(&r.h, nil), true)
	return err
}

// ErrGaveUpSend is returned when a send to a rank given up on has not left:
// its request stays with MPI and the Exchange cannot be used again.
var ErrGaveUpSend = errors.New("a send to a rank given up on did not complete")

// AlltoallvActive is Alltoallv among the ranks whose entry in active is
// true (this rank must be one): no message goes to or comes from the
// others, and their blocks of recv are left as they are. When the deadline
// passes first it gives up on the ranks still missing, cancelling the
// receives from them, and returns them, in increasing order, with no
// error: the caller marks them inactive. The sends to them must have left
// (small messages do, eagerly); one that did not is ErrGaveUpSend.
func (x *Exchange) AlltoallvActive(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
	tag int, deadline time.Time, active []bool) (missing []int, err error) {
	c := x.c
	if len(active) != c.size || !active[c.rank] {
		return nil, fmt.Errorf("mpi: AlltoallvActive: %d active flags for %d ranks, this rank's must be set", len(active), c.size)
	}
	missing, err = x.alltoallv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, tag, deadline, active)
	if len(missing) == 0 || !errors.Is(err, ErrDeadlineExceeded) {
		return missing, err
	}
	for _, r := range missing {
		if err := x.reqs[r].Cancel(); err != nil {
			return missing, fmt.Errorf("cancelling the receive from rank %d: %w", r, err)
		}
	}
	// A small send leaves eagerly: give the ones still pending a moment.
	sends := make([]*Request, len(missing))
	for i, r := range missing {
		sends[i] = &x.reqs[c.size+r]
	}
	pending, err := WaitDeadline(sends, time.Now().Add(100*time.Millisecond))
	if err != nil && !errors.Is(err, ErrDeadlineExceeded) {
		return missing, sendErrors(err, missing)
	}
	if len(pending) > 0 {
		stuck := make([]int, len(pending))
		for j, i := range pending {
			stuck[j] = missing[i]
		}
		return missing, fmt.Errorf("%s: %w", ranklist.String(stuck), ErrGaveUpSend)
	}
	return missing, nil
}

// AlltoallvActive is Exchange.AlltoallvActive on the Exchange that c keeps
// for AlltoallvDeadline.
func (c *Comm) AlltoallvActive(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
	tag int, deadline time.Time, active []bool) (missing []int, err error) {
	x, err := c.keptExchange()
	if err != nil {
		return nil, err
	}
	return x.AlltoallvActive(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, tag, deadline, active)
}

// sendErrors is WaitDeadline's err over sends to ranks[i] (request i), each
// failed request named by its rank.
func sendErrors(err error, ranks []int) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	named := make([]error, len(errs))
	for k, e := range errs {
		named[k] = e
		var re *RequestError
		if errors.As(e, &re) && re.Index >= 0 && re.Index < len(ranks) {
			named[k] = fmt.Errorf("the send to rank %d: %w", ranks[re.Index], re.Err)
		}
	}
	return errors.Join(named...)
}
