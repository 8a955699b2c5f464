// Package localcomm is an in-process communicator for tests: the ranks are
// goroutines that meet in every collective (stats.Comm).
package localcomm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/epbench/epbench/stats"
)

// NewGroup returns n communicators, one per rank, that meet in process:
// each rank is expected to run on its own goroutine, and every collective
// blocks until all n ranks have entered it. Ranks that enter the same
// collective with different operations or lengths all get stats.ErrMismatch.
func NewGroup(n int) ([]stats.Comm, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: local group of %d ranks", stats.ErrBadComm, n)
	}
	rv := &rendezvous{n: n, slots: make([]contribution, n)}
	rv.cond = sync.NewCond(&rv.mu)
	comms := make([]stats.Comm, n)
	for r := range n {
		comms[r] = &localComm{rank: r, rv: rv}
	}
	return comms, nil
}

// Run runs fn once per rank of a fresh local group, each on its own
// goroutine, and returns the ranks' errors joined.
func Run(n int, fn func(c stats.Comm) error) error {
	comms, err := NewGroup(n)
	if err != nil {
		return err
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// contribution is what one rank brings to a collective.
type contribution struct {
	kind string // "sum", "min", "max", "minloc", "maxloc"
	f    []float64
	vr   []stats.ValueRank
}

// rendezvous is a reusable meeting point: the last rank to arrive publishes
// everyone's contributions and opens the next round.
type rendezvous struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	round   uint64
	slots   []contribution
	done    []contribution
}

// exchange deposits c for rank and returns all ranks' contributions of this
// round. A finished round cannot be overwritten before every rank has read it,
// because the next round needs every rank to arrive again.
func (rv *rendezvous) exchange(rank int, c contribution) []contribution {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	round := rv.round
	rv.slots[rank] = c
	rv.arrived++
	if rv.arrived == rv.n {
		rv.done = rv.slots
		rv.slots = make([]contribution, rv.n)
		rv.arrived = 0
		rv.round++
		rv.cond.Broadcast()
		return rv.done
	}
	for rv.round == round {
		rv.cond.Wait()
	}
	return rv.done
}

type localComm struct {
	rank int
	rv   *rendezvous
}

func (c *localComm) Rank() int { return c.rank }
func (c *localComm) Size() int { return c.rv.n }

func (c *localComm) AllreduceFloat64(in []float64, op stats.Op) ([]float64, error) {
	if op != stats.Sum && op != stats.Min && op != stats.Max {
		// Still take part, so the other ranks are not left waiting.
		c.rv.exchange(c.rank, contribution{kind: "invalid"})
		return nil, fmt.Errorf("stats: unknown reduction op %d", int(op))
	}
	all := c.rv.exchange(c.rank, contribution{kind: op.String(), f: append([]float64(nil), in...)})
	if err := agree(all, op.String(), len(in)); err != nil {
		return nil, err
	}
	out := append([]float64(nil), all[0].f...)
	for _, a := range all[1:] {
		for i, v := range a.f {
			switch op {
			case stats.Sum:
				out[i] += v
			case stats.Min:
				if v < out[i] {
					out[i] = v
				}
			case stats.Max:
				if v > out[i] {
					out[i] = v
				}
			}
		}
	}
	return out, nil
}

func (c *localComm) AllreduceMinLoc(in []stats.ValueRank) ([]stats.ValueRank, error) {
	return c.allreduceLoc(in, "minloc", func(a, b float64) bool { return a < b })
}

func (c *localComm) AllreduceMaxLoc(in []stats.ValueRank) ([]stats.ValueRank, error) {
	return c.allreduceLoc(in, "maxloc", func(a, b float64) bool { return a > b })
}

// allreduceLoc keeps, per element, the value that wins under better; on equal
// values the lower rank wins, as MPI_MINLOC and MPI_MAXLOC define.
func (c *localComm) allreduceLoc(in []stats.ValueRank, kind string, better func(a, b float64) bool) ([]stats.ValueRank, error) {
	all := c.rv.exchange(c.rank, contribution{kind: kind, vr: append([]stats.ValueRank(nil), in...)})
	if err := agree(all, kind, len(in)); err != nil {
		return nil, err
	}
	out := append([]stats.ValueRank(nil), all[0].vr...)
	for _, a := range all[1:] {
		for i, v := range a.vr {
			if better(v.Value, out[i].Value) || (v.Value == out[i].Value && v.Rank < out[i].Rank) {
				out[i] = v
			}
		}
	}
	return out, nil
}

// agree checks that every rank entered the same collective with the same length.
func agree(all []contribution, kind string, n int) error {
	for r, a := range all {
		if a.kind != kind || len(a.f)+len(a.vr) != n {
			return fmt.Errorf("%w: rank %d called %s with %d values, this rank %s with %d",
				stats.ErrMismatch, r, a.kind, len(a.f)+len(a.vr), kind, n)
		}
	}
	return nil
}
