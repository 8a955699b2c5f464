package mpi

// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"time"
)

// Bounded waits for loops that must neither allocate nor hang: requests the
// caller owns and reuses, a poller that keeps its scratch space, and an
// Alltoallv made of point-to-point messages whose wait has a deadline and
// names the ranks that did not arrive.

// ErrRequestActive is returned when a request that MPI still owns is reused.
var ErrRequestActive = errors.New("request still in flight")

// poll is Test without allocating: MPI writes its flag into r.
func (r *Request) poll() (bool, error) {
	if r == nil {
		return true, nil
	}
	if r.done {
		return true, r.err
	}
	if err := ready(); err != nil {
		return false, err
	}
	r.flag = 0
	rc := C.MPI_Test(&r.h, &r.flag, nil)
	return r.settle("MPI_Test", rc, r.flag != 0)
}

// StartIsend starts sending buf to rank dest on r, a Request the caller owns
// and may reuse once it has completed (a zero Request is ready for use). See
// Request for the rules on buf.
func (c *Comm) StartIsend(r *Request, buf []byte, dest, tag int) error {
	if r == nil {
		return errors.New("mpi: StartIsend: nil request")
	}
	return c.startP2PInto(r, "MPI_Isend", buf, dest, tag)
}

// StartIrecv starts receiving at most len(buf) bytes from rank src on r, as
// StartIsend does for sends.
func (c *Comm) StartIrecv(r *Request, buf []byte, src, tag int) error {
	if r == nil {
		return errors.New("mpi: StartIrecv: nil request")
	}
	return c.startP2PInto(r, "MPI_Irecv", buf, src, tag)
}

// Default pacing of a Poller: it polls without sleeping for DefaultSpin, so
// ranks leave a barrier together, then sleeps between polls, doubling the
// pause up to maxSpinPause, so waiting ranks leave the cores to the ranks
// they wait for.
const (
	DefaultSpin  = 5 * time.Millisecond
	maxSpinPause = 200 * time.Microsecond
)

// exchangeSpin is how long an Exchange polls without sleeping.
const exchangeSpin = time.Second

// Poller waits for requests until a deadline, like WaitDeadline, keeping its
// scratch space between calls so that a steady loop does not allocate.
type Poller struct {
	Spin time.Duration // poll without sleeping this long; 0 means DefaultSpin
	left []int
}

// Wait tests reqs until all are complete or the deadline passes, and returns
// the indices into reqs of the requests still pending; the slice is valid
// until the next Wait. With pending requests the error wraps
// ErrDeadlineExceeded. A failed request ends the wait with its error.
// Pending requests stay valid.
func (p *Poller) Wait(reqs []*Request, deadline time.Time) (pending []int, err error) {
	if err := ready(); err != nil {
		return nil, err
	}
	spin := p.Spin
	if spin <= 0 {
		spin = DefaultSpin
	}
	left := p.left[:0]
	for i := range reqs {
		left = append(left, i)
	}
	start := time.Now()
	var pause time.Duration
	for {
		next := left[:0]
		for _, i := range left {
			done, err := reqs[i].poll()
			if err != nil {
				p.left = left
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
			if !done {
				next = append(next, i)
			}
		}
		left = next
		p.left = left
		if len(left) == 0 {
			return nil, nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return left, fmt.Errorf("%w: %d of %d", ErrDeadlineExceeded, len(left), len(reqs))
		}
		if now.Sub(start) >= spin {
			pause = min(max(2*pause, 10*time.Microsecond), maxSpinPause, deadline.Sub(now))
			time.Sleep(pause)
		}
	}
}

// Exchange is an Alltoallv with a deadline, made of one Irecv and one Isend
// per rank of its communicator (empty messages included, so a peer that
// never takes part is always noticed). Its requests are reused from call to
// call: a steady loop of exchanges does not allocate.
type Exchange struct {
	c       *Comm
	reqs    []Request // receives from rank r at r, sends to rank r at size+r
	ptrs    []*Request
	poll    Poller
	missing []int
}

// NewExchange returns an Exchange over c.
func (c *Comm) NewExchange() (*Exchange, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	x := &Exchange{c: c, reqs: make([]Request, 2*c.size), ptrs: make([]*Request, 2*c.size), missing: make([]int, 0, c.size)}
	// Polling is what moves large messages along (MPI has no progress
	// thread): keep at it for as long as a healthy exchange may take.
	x.poll.Spin = exchangeSpin
	for i := range x.reqs {
		x.ptrs[i] = &x.reqs[i]
	}
	return x, nil
}

// Alltoallv is Comm.Alltoallv with messages of the given tag, waiting at most
// until deadline. When the deadline passes first it returns the ranks, in
// increasing order, whose message to this rank did not arrive or whose
// message from this rank was not taken, and an error wrapping
// ErrDeadlineExceeded; the slice is valid until the next call. The requests
// of a timed-out exchange stay with MPI, and the Exchange cannot be used
// again until they complete.
func (x *Exchange) Alltoallv(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
	tag int, deadline time.Time) (missing []int, err error) {
	return x.alltoallv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, tag, deadline, nil)
}

// alltoallv is Alltoallv with the ranks whose entry in active is false (nil:
// none) left out.
func (x *Exchange) alltoallv(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
	tag int, deadline time.Time, active []bool) (missing []int, err error) {
	c := x.c
	out := func(r int) bool { return active != nil && !active[r] }
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := checkBlocks("send", len(send), sendCounts, sendDispls, c.size); err != nil {
		return nil, err
	}
	if err := checkBlocks("recv", len(recv), recvCounts, recvDispls, c.size); err != nil {
		return nil, err
	}
	for i := range x.reqs {
		if _, busy := inflight[&x.reqs[i]]; busy {
			return nil, fmt.Errorf("mpi: Exchange: %w (an earlier exchange timed out)", ErrRequestActive)
		}
	}
	me := c.rank
	if sendCounts[me] > recvCounts[me] {
		return nil, fmt.Errorf("mpi: Exchange: %d bytes for this rank itself, room for %d", sendCounts[me], recvCounts[me])
	}
	for r := range c.size {
		if r == me || out(r) {
			x.reqs[r].done, x.reqs[r].err = true, nil
			continue
		}
		if err := c.StartIrecv(&x.reqs[r], recv[recvDispls[r]:recvDispls[r]+recvCounts[r]], r, tag); err != nil {
			return nil, err
		}
	}
	for r := range c.size {
		if r == me || out(r) {
			x.reqs[c.size+r].done, x.reqs[c.size+r].err = true, nil
			continue
		}
		if err := c.StartIsend(&x.reqs[c.size+r], send[sendDispls[r]:sendDispls[r]+sendCounts[r]], r, tag); err != nil {
			return nil, err
		}
	}
	// This rank's own block is copied, as MPI_Alltoallv does, while the
	// messages travel.
	copy(recv[recvDispls[me]:recvDispls[me]+sendCounts[me]], send[sendDispls[me]:sendDispls[me]+sendCounts[me]])
	x.reqs[me].done, x.reqs[me].err = true, nil
	x.reqs[c.size+me].done, x.reqs[c.size+me].err = true, nil
	return x.Wait(deadline)
}

// Wait keeps waiting, until deadline, for the messages of the last Alltoallv
// (one that timed out), with Alltoallv's results.
func (x *Exchange) Wait(deadline time.Time) (missing []int, err error) {
	pending, err := x.poll.Wait(x.ptrs, deadline)
	if len(pending) == 0 {
		return nil, err
	}
	// A peer is missing when its message did not come or ours was not taken.
	missing = x.missing[:0]
	for _, i := range pending {
		if r := i % x.c.size; !containsInt(missing, r) {
			missing = append(missing, r)
		}
	}
	sortInts(missing)
	x.missing = missing
	return missing, err
}

// AlltoallvDeadline is Exchange.Alltoallv on an Exchange that c keeps for
// it, made on the first call.
func (c *Comm) AlltoallvDeadline(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
	tag int, deadline time.Time) (missing []int, err error) {
	x, err := c.keptExchange()
	if err != nil {
		return nil, err
	}
	return x.Alltoallv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, tag, deadline)
}

// keptExchange is the Exchange c keeps for AlltoallvDeadline and
// AlltoallvActive, made on the first call.
func (c *Comm) keptExchange() (*Exchange, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if c.exchange == nil {
		x, err := c.NewExchange()
		if err != nil {
			return nil, err
		}
		c.exchange = x
	}
	return c.exchange, nil
}

// checkBlocks validates one side of an Alltoallv without allocating.
func checkBlocks(side string, bufLen int, counts, displs []int, size int) error {
	if len(counts) != size || len(displs) != size {
		_, _, err := blockLayout(side, bufLen, counts, displs, size)
		return err
	}
	for r := range size {
		n, d := counts[r], displs[r]
		if n < 0 || d < 0 || n > bufLen || d > bufLen-n {
			_, _, err := blockLayout(side, bufLen, counts, displs, size)
			return err
		}
	}
	return nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// sortInts is an insertion sort: the lists are short and sort.Ints would
// allocate through its interface.
func sortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
