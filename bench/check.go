package bench

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/epbench/epbench/internal/ranklist"
	"github.com/epbench/epbench/ll"
)

// Check is one validation of a dispatch/combine pair.
type Check struct {
	DispatchOK, CombineOK bool
	CalcDiff              float64
	Detail                string // the first failure, naming rank and expert/row or token/column
}

// Validator checks a backend's outputs of a pair of routing j on the token
// rows of generation gen against the reference. active is nil, or -T's
// mask of active ranks the pair ran with (false for a masked rank): the
// combine output is then checked with the masked ranks' terms left out,
// and the dispatch not at all.
type Validator func(o *ll.Outputs, j, gen int, active []bool) (Check, error)

// ValidationError is a check that failed during the timed loop
// (--validate-every); every rank returns one, naming the same ranks.
type ValidationError struct {
	// After is the timed iterations done before the check; 0 where this
	// rank does not know (--back-to-back, where its own checks passed).
	After  int
	Ranks  []int  // the ranks whose outputs were wrong
	Detail string // this rank's first failure; empty where it passed
}

func (e *ValidationError) Error() string {
	msg := "validation of the timed pairs"
	if e.After > 0 {
		msg = fmt.Sprintf("validation after %d timed iterations", e.After)
	}
	msg += " failed on " + ranklist.String(e.Ranks)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// soakCheck validates one pair of routing j between timed iterations
// (--validate-every): outside the marks and the kernel timing windows, with
// the garbage collector on (the outputs are copied to the host). The verdict
// is agreed on across ranks before anyone acts on it, so all stop together.
func (r *Run) soakCheck(j, after int) error {
	r.kernel.stop()
	debug.SetGCPercent(r.gcPercent)
	c, err := r.checkPair(j)
	if err != nil {
		return fmt.Errorf("validation after %d timed iterations: %w", after, err)
	}
	runtime.GC()
	debug.SetGCPercent(-1)
	if after < r.Cfg.Iters { // timed pairs follow
		r.kernel.start() // a failure leaves the kernel timing unusable, not the run
	}
	// Agreeing is a barrier too: the ranks leave it together for the next
	// timed pair, the kernel timer already started (starting it takes each
	// rank a different time).
	failed, err := r.hostBarrier.Agree("agreeing on the validation", c.DispatchOK && c.CombineOK)
	if err != nil {
		return fmt.Errorf("validation after %d timed iterations: %w", after, err)
	}
	if len(failed) > 0 {
		return &ValidationError{After: after, Ranks: append([]int(nil), failed...), Detail: c.Detail}
	}
	return nil
}

// checkPair runs one dispatch/combine pair of routing j on token rows of a
// generation of its own, with every output and symmetric receive area
// poisoned, and checks this rank's outputs.
func (r *Run) checkPair(j int) (Check, error) {
	// Peers write into this rank's symmetric areas: every rank is between
	// pairs (and has checked its last outputs, which takes each its own
	// time) before any poisons them, and all have before any starts the pair.
	if err := r.hostBarrier.Wait("barrier before poisoning"); err != nil {
		return Check{}, err
	}
	if err := r.poisonForPair(); err != nil {
		return Check{}, err
	}
	if err := r.hostBarrier.Wait("barrier before a validated pair"); err != nil {
		return Check{}, err
	}
	if err := r.pair(j); err != nil {
		return Check{}, fmt.Errorf("validated pair: %w", err)
	}
	if err := r.barrier.Wait("barrier after a validated pair"); err != nil {
		return Check{}, err
	}
	snap, err := r.endValidated()
	if err != nil {
		return Check{}, err
	}
	return r.check(snap, j, r.gen, nil)
}

// poisonForPair puts the next pair on token rows of a generation of its own
// and poisons its outputs, waiting until that is done; every rank must be
// between operations (peers write into this rank's areas).
func (r *Run) poisonForPair() error {
	r.gen++
	b := r.Backend
	if err := errors.Join(b.Generation(r.gen), b.Poison(true), b.Sync()); err != nil {
		return fmt.Errorf("poisoning outputs: %w", err)
	}
	return nil
}

// check validates the outputs a snapshot holds: those of a pair of routing
// j on generation gen (active: Validator's).
func (r *Run) check(snap func() (*ll.Outputs, error), j, gen int, active []bool) (Check, error) {
	out, err := snap()
	if err != nil {
		return Check{}, fmt.Errorf("reading outputs: %w", err)
	}
	return r.Validate(out, j, gen, active)
}

// validate runs at least two consecutive pairs (both signal parities), each
// on a generation of its own with poisoned outputs, and checks every one;
// with --back-to-back the pairs follow each other without a sync or a
// barrier (backToBackChecks).
func (r *Run) validate(routings int) (*Check, error) {
	all := &Check{DispatchOK: true, CombineOK: true}
	add := func(c Check, j int) {
		if all.Detail == "" && c.Detail != "" {
			all.Detail = fmt.Sprintf("routing %d: %s", j, c.Detail)
		}
		all.DispatchOK = all.DispatchOK && c.DispatchOK
		all.CombineOK = all.CombineOK && c.CombineOK
		all.CalcDiff = max(all.CalcDiff, c.CalcDiff)
	}
	if r.Cfg.BackToBack {
		return all, r.backToBackChecks(max(4, routings), routings, add)
	}
	for p := 0; p < max(2, routings); p++ {
		j := p % routings
		c, err := r.checkPair(j)
		if err != nil {
			return nil, err
		}
		add(c, j)
	}
	return all, nil
}

// backToBackChecks runs n validated pairs back to back after poisoning
// every symmetric receive area once: no sync or barrier between them, each
// on a generation of its own and with poisoned outputs, so that a pair that
// reads what the previous one left, or that a peer running ahead already
// overwrote, is caught. Each pair's outputs are checked while the next
// runs.
func (r *Run) backToBackChecks(n, routings int, add func(Check, int)) error {
	b := r.Backend
	if err := b.Sync(); err != nil {
		return err
	}
	if err := r.hostBarrier.Wait("barrier before poisoning"); err != nil {
		return err
	}
	if err := errors.Join(b.Poison(true), b.Sync()); err != nil {
		return fmt.Errorf("poisoning outputs: %w", err)
	}
	if err := r.hostBarrier.Wait("barrier before the validated pairs"); err != nil {
		return err
	}
	var prev pendingCheck
	for p := 0; p < n; p++ {
		j := p % routings
		next, err := r.validatedPair(j)
		if err != nil {
			return err
		}
		if prev.snap != nil {
			c, err := r.check(prev.snap, prev.j, prev.gen, nil)
			if err != nil {
				return err
			}
			add(c, prev.j)
		}
		prev = next
	}
	if err := errors.Join(b.Generation(0), b.Sync()); err != nil {
		return err
	}
	c, err := r.check(prev.snap, prev.j, prev.gen, nil)
	if err != nil {
		return err
	}
	add(c, prev.j)
	return nil
}

// pendingCheck is a validated pair whose outputs are on their way.
type pendingCheck struct {
	snap   func() (*ll.Outputs, error)
	j, gen int
	after  int // timed pairs done when it ran
}

// validatedPair enqueues a pair of routing j on a generation of its own,
// with its outputs poisoned first and copied to the host after, and no sync.
func (r *Run) validatedPair(j int) (pendingCheck, error) {
	if err := r.startValidated(); err != nil {
		return pendingCheck{}, err
	}
	if err := r.launchPair(j); err != nil {
		return pendingCheck{}, fmt.Errorf("validated pair: %w", err)
	}
	snap, err := r.endValidated()
	return pendingCheck{snap: snap, j: j, gen: r.gen}, err
}

// startValidated makes the pair enqueued next a validated one: its outputs
// poisoned and its dispatch on a generation of its own, in operation order
// without a sync.
func (r *Run) startValidated() error {
	r.gen++
	if err := errors.Join(r.Backend.Poison(false), r.Backend.Generation(r.gen)); err != nil {
		return fmt.Errorf("validated pair: %w", err)
	}
	return nil
}

// endValidated follows the validated pair just enqueued: it starts copying
// the pair's outputs to the host (the snapshot it returns reads them) and
// puts the dispatches that follow back on generation 0.
func (r *Run) endValidated() (func() (*ll.Outputs, error), error) {
	snap, err := r.Backend.Snapshot()
	if err == nil {
		err = r.Backend.Generation(0)
	}
	if err != nil {
		return nil, fmt.Errorf("validated pair: %w", err)
	}
	return snap, nil
}
