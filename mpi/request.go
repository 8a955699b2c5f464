package mpi

// #include "epmpi.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Request is an in-flight non-blocking operation.
//
// MPI reads or writes the buffer of an Isend or Irecv after the call that
// started it has returned. Go's cgo rules allow C to keep a Go pointer only
// while it is pinned, so the buffer is pinned with a runtime.Pinner until
// Test or Wait reports completion. Until then the caller must not touch the
// buffer. The package also keeps every incomplete request reachable, so a
// forgotten request keeps its buffer alive (and pinned) until Finalize
// instead of letting the collector reuse memory MPI may still write.
type Request struct {
	h    C.MPI_Request
	pin  runtime.Pinner
	fn   string
	done bool
	err  error
	flag C.int // MPI_Test's flag, kept here so that polling does not allocate
}

// inflight holds the requests MPI still owns. Only the Init thread touches
// it, as MPI_THREAD_FUNNELED requires of all calls into this package.
var inflight = map[*Request]struct{}{}

// releaseInflight drops every incomplete request after MPI is gone and
// returns how many there were.
func releaseInflight() int {
	n := len(inflight)
	for r := range inflight {
		r.finish(ErrFinalized)
	}
	return n
}

// start records a request whose MPI call returned rc.
func (r *Request) start(rc C.int) (*Request, error) {
	if err := check(r.fn, rc); err != nil {
		r.pin.Unpin()
		return nil, err
	}
	inflight[r] = struct{}{}
	return r, nil
}

// finish marks r complete and gives its buffer back to Go.
func (r *Request) finish(err error) {
	r.done, r.err = true, err
	r.pin.Unpin()
	delete(inflight, r)
}

// Isend starts sending buf to rank dest of c with the given tag. See Request
// for the rules on buf.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.startP2P("MPI_Isend", buf, dest, tag)
}

// Irecv starts receiving at most len(buf) bytes from rank src of c with the
// given tag into buf. See Request for the rules on buf.
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	return c.startP2P("MPI_Irecv", buf, src, tag)
}

func (c *Comm) startP2P(fn string, buf []byte, peer, tag int) (*Request, error) {
	r := &Request{}
	if err := c.startP2PInto(r, fn, buf, peer, tag); err != nil {
		return nil, err
	}
	return r, nil
}

// startP2PInto starts a point-to-point message on r, which must not be in
// flight; reusing r lets loops post messages without allocating.
func (c *Comm) startP2PInto(r *Request, fn string, buf []byte, peer, tag int) error {
	if err := c.ready(); err != nil {
		return err
	}
	n, err := cCount(fn, "length", len(buf))
	if err != nil {
		return err
	}
	p, err := cRank(fn, "peer rank", peer)
	if err != nil {
		return err
	}
	t, err := cRank(fn, "tag", tag)
	if err != nil {
		return err
	}
	if _, busy := inflight[r]; busy {
		return fmt.Errorf("mpi: %s: %w", fn, ErrRequestActive)
	}
	r.fn, r.done, r.err = fn, false, nil
	b := ptr(buf)
	if b != nil {
		r.pin.Pin(b)
	}
	dt := C.epmpi_datatype(C.EPMPI_BYTE)
	if fn == "MPI_Isend" {
		_, err = r.start(C.MPI_Isend(b, n, dt, p, t, c.h, &r.h))
	} else {
		_, err = r.start(C.MPI_Irecv(b, n, dt, p, t, c.h, &r.h))
	}
	if err != nil {
		r.done, r.err = true, err
	}
	return err
}

// Ibarrier starts a barrier over c; it completes once every rank has
// started it, so ranks can keep working (or give up at a deadline) while
// waiting for late peers.
func (c *Comm) Ibarrier() (*Request, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	r := &Request{fn: "MPI_Ibarrier"}
	return r.start(C.MPI_Ibarrier(c.h, &r.h))
}

// Test reports whether r has completed, without blocking. Once it has, Test
// keeps returning true and the operation's error. A nil Request counts as
// complete.
func (r *Request) Test() (bool, error) { return r.poll() }

// Wait blocks until r completes and returns the operation's error.
func (r *Request) Wait() error {
	if r == nil {
		return nil
	}
	if r.done {
		return r.err
	}
	if err := ready(); err != nil {
		return err
	}
	_, err := r.settle("MPI_Wait", C.MPI_Wait(&r.h, nil), true)
	return err
}

// settle interprets the result of MPI_Test or MPI_Wait. On failure MPI frees
// the request (the handle becomes MPI_REQUEST_NULL) when the operation is
// over; a handle that is still live means MPI may yet use the buffer.
func (r *Request) settle(fn string, rc C.int, completed bool) (bool, error) {
	err := check(fn, rc)
	if err != nil {
		if r.h != C.epmpi_request_null() {
			return false, err
		}
		completed = true
	}
	if completed {
		if err != nil {
			err = fmt.Errorf("%s: %w", r.fn, err)
		}
		r.finish(err)
	}
	return completed, err
}

// Longest sleep between polls in WaitDeadline: short enough to notice
// completion promptly, long enough not to steal a core from other ranks
// sharing the node.
const maxPollPause = time.Millisecond

// RequestError is the failure of request Index of those WaitDeadline
// waited for.
type RequestError struct {
	Index int
	Err   error
}

func (e *RequestError) Error() string { return fmt.Sprintf("request %d: %v", e.Index, e.Err) }
func (e *RequestError) Unwrap() error { return e.Err }

// WaitDeadline polls reqs with Test until all are complete or the deadline
// passes. It returns the indices into reqs of the requests still pending, so
// a caller can report which peers did not arrive; with pending requests the
// error wraps ErrDeadlineExceeded. A request that fails stops the polling
// and its error is returned, as a *RequestError. Pending requests stay
// valid: the caller may keep waiting on them.
func WaitDeadline(reqs []*Request, deadline time.Time) (pending []int, err error) {
	if err := ready(); err != nil {
		return nil, err
	}
	left := make([]int, len(reqs))
	for i := range left {
		left[i] = i
	}
	var errs []error
	var pause time.Duration
	for {
		next := left[:0]
		for _, i := range left {
			done, err := reqs[i].Test()
			if err != nil {
				errs = append(errs, &RequestError{Index: i, Err: err})
			}
			if !done {
				next = append(next, i)
			}
		}
		left = next
		if len(left) == 0 || len(errs) > 0 {
			break
		}
		now := time.Now()
		if !now.Before(deadline) {
			errs = append(errs, fmt.Errorf("%w: %d of %d", ErrDeadlineExceeded, len(left), len(reqs)))
			break
		}
		pause = min(max(2*pause, 10*time.Microsecond), maxPollPause, deadline.Sub(now))
		time.Sleep(pause)
	}
	if len(left) == 0 {
		left = nil
	}
	return left, errors.Join(errs...)
}
