// Package bench is the benchmark runner: ep_bench's paired loop, its timing,
// the cross-rank reductions and the result model handed to the reports. The
// backends (CPU reference, CUDA) plug in through the Backend interface.
package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/stats"
)

// KernelTimer collects per-kernel device time over the timed loop (the
// in-process CUPTI collector).
type KernelTimer interface {
	// Start begins collecting; called after the warm-up.
	Start() error
	// Stop ends collecting, flushes, and returns the average duration in
	// microseconds of the dispatch and combine kernels. It fails when the
	// kernel counts are not the launches made or records were dropped.
	Stop(dispatches, combines int) (dispatchUs, combineUs float64, err error)
}

// ArmedTimer is a KernelTimer that does set-up work at the first kernels it
// sees (the CUPTI collector): Arm, called before the warm-up, moves that
// work out of the first timed pair.
type ArmedTimer interface {
	KernelTimer
	Arm() error
}

// Check is one validation of a dispatch/combine pair.
type Check struct {
	DispatchOK, CombineOK bool
	CalcDiff              float64
	Detail                string // the first failure, naming rank and expert/row or token/column
}

// Validator checks a backend's outputs of a pair of routing j on the token
// rows of generation gen against the reference.
type Validator func(o *ll.Outputs, j, gen int) (Check, error)

// Run is one measurement.
type Run struct {
	Cfg     *config.Config
	Comm    *mpi.Comm
	Backend Backend

	// Kernel is nil when there is no kernel timing; KernelNote then says why.
	Kernel     KernelTimer
	KernelNote string
	// Around brackets exactly the timed loop (cuProfilerStart/Stop for
	// --cupti-region); nil for none.
	BeforeTimed, AfterTimed func() error
	// Profiler runs -p's extra loop (nil where there is none); Shape is the
	// shape its set-up range sets the backend up for again.
	Profiler *Profiler
	Shape    *ll.Shape

	Validate Validator // with -V

	barrier                   *Barrier // bounded by --timeout-ms
	hostBarrier               *Barrier // after host work of uneven length
	kernel                    kernelWindows
	hosts                     *hostTrace // EPBENCH_HOSTTRACE; nil when off
	gcPercent                 int
	skipDispatch, skipCombine bool // --fault on this rank
	gen                       int  // the generation of the last validated pair (each has its own)

	// Selections, DispatchBytes and CombineBytes are this rank's byte
	// accounting for routing 0 (ep_bench's).
	Selections                  int
	DispatchBytes, CombineBytes int64
	// Messages is this rank's (token, destination rank) pairs to other
	// ranks, in the rank-major layout (0 in the expert-major one).
	Messages int
}

// Measurement is what the loop measured on this rank.
type Measurement struct {
	DispatchUs, CombineUs, TotalUs []float64 // one per timed iteration
	KernelDispatchUs               float64
	KernelCombineUs                float64
	KernelOK                       bool
	Check                          *Check
	Mask                           *report.MaskRank // the active-mask test (-T)
}

// PeerTimeout is a backend error meaning a peer did not arrive in time.
type PeerTimeout interface {
	error
	PeerTimeout() bool
}

// Loop runs ep_bench's paired loop on this rank: warm-up pairs, then per
// iteration: mark, dispatch, mark, sync, mark, combine, mark, sync, barrier.
// Syncs and barriers lie outside the marks. Every barrier is bounded by
// --timeout-ms (those after host work of uneven length, such as checking
// outputs, by at least HostWorkTimeout) and names the ranks that did not
// arrive (*TimeoutError).
// Nothing in the timed loop allocates, and the garbage collector is off
// while it runs, except around the --validate-every checks, which lie
// outside the timed samples and the kernel timing windows.
func (r *Run) Loop() (*Measurement, error) {
	cfg := r.Cfg
	m := &Measurement{
		DispatchUs: make([]float64, cfg.Iters),
		CombineUs:  make([]float64, cfg.Iters),
		TotalUs:    make([]float64, cfg.Iters),
	}
	rank := r.Comm.Rank()
	r.skipDispatch = cfg.Fault.Skips(config.FaultDispatch, rank)
	r.skipCombine = cfg.Fault.Skips(config.FaultCombine, rank)
	out, err := r.loop(m)
	if err != nil && (r.skipDispatch || r.skipCombine) {
		// What went wrong here follows from the injected fault.
		err = fmt.Errorf("%w; this rank skipped its %s (--fault %s)", err, cfg.Fault.Op, cfg.Fault)
	}
	return out, err
}

func (r *Run) loop(m *Measurement) (*Measurement, error) {
	cfg := r.Cfg
	routings := max(cfg.Reroute, 1)
	timeout := cfg.Timeout()
	if timeout <= 0 { // a Config built in code without --timeout-ms
		timeout = config.Default().Timeout()
	}
	r.barrier = NewBarrier(r.Comm, timeout)
	r.hostBarrier = NewBarrier(r.Comm, max(timeout, HostWorkTimeout))
	marks := 4
	if cfg.BackToBack {
		marks = 4 * cfg.Iters
	}
	if err := r.Backend.Marks(marks); err != nil {
		return nil, fmt.Errorf("time stamps: %w", err)
	}
	if a, ok := r.Kernel.(ArmedTimer); ok {
		// Unarmed, Start enables the records itself; where that fails too,
		// the kernel timing is unusable (KernelNote), not the run.
		_ = a.Arm()
	}
	if err := r.hostBarrier.Wait("barrier before the warm-up"); err != nil {
		return nil, err
	}
	if os.Getenv(HostTraceEnv) != "" {
		if !cfg.BackToBack {
			r.hosts = newHostTrace(cfg.Iters)
		} else if r.Comm.Rank() == 0 {
			fmt.Fprintf(os.Stderr, "epbench: host trace: %s stamps the syncs and barriers of the paired loop; --back-to-back has none\n", HostTraceEnv)
		}
	}
	// Garbage is collected once before the warm-up and the collector stays
	// off to the end of the timed loop, so no collection (milliseconds of
	// host work, with the GPU idle) lies between the last warm-up pair and
	// the first timed one.
	runtime.GC()
	r.gcPercent = debug.SetGCPercent(-1)
	err := r.warmUp(routings)
	if err == nil {
		r.kernel = kernelWindows{timer: r.Kernel}
		if err = r.kernel.start(); err != nil {
			err = fmt.Errorf("starting kernel timing: %w", err)
		}
	}
	began := false // BeforeTimed done, so AfterTimed is due
	if err == nil && r.BeforeTimed != nil {
		err = r.BeforeTimed()
	}
	if err == nil {
		began = true
		// Starting the kernel timer takes each rank a different time: without
		// this barrier the first timed kernels of the faster rank would wait
		// for the other's data inside the timed window.
		err = r.hostBarrier.Wait("barrier before the timed loop")
		if err == nil && cfg.BackToBack {
			err = r.timedBackToBack(m, routings)
		} else if err == nil {
			err = r.timed(m, routings)
		}
	}
	debug.SetGCPercent(r.gcPercent)
	if began && r.AfterTimed != nil {
		if aerr := r.AfterTimed(); err == nil {
			err = aerr
		}
	}
	r.kernel.stop()
	if err == nil {
		if d, c, kerr := r.kernel.result(cfg.Iters); kerr == nil {
			m.KernelDispatchUs, m.KernelCombineUs, m.KernelOK = d, c, true
		} else if r.Kernel != nil {
			r.KernelNote = "kernel timing unusable: " + kerr.Error()
		}
	}
	if err != nil {
		return nil, err
	}
	if cfg.Profile {
		if err := r.profile(routings); err != nil {
			return nil, err
		}
	}

	if cfg.Validate {
		c, err := r.validate(routings)
		if err != nil {
			return nil, err
		}
		m.Check = c
	}
	if cfg.MaskTest {
		if m.Mask, err = r.maskTest(); err != nil {
			return nil, err
		}
	}
	// The reductions that follow are blocking collectives: enter them only
	// once every rank is known to be here.
	if err := r.hostBarrier.Wait("barrier before the reductions"); err != nil {
		return nil, err
	}
	if err := r.printHostTrace(); err != nil {
		return nil, err
	}
	return m, nil
}

// warmUp runs the warm-up pairs, each followed by the bounded barrier.
func (r *Run) warmUp(routings int) error {
	for i := 0; i < r.Cfg.Warmup; i++ {
		if err := r.pair(i % routings); err != nil {
			return fmt.Errorf("warm-up iteration %d: %w", i, err)
		}
		if err := r.barrier.Wait("barrier after the pair"); err != nil {
			return fmt.Errorf("warm-up iteration %d: %w", i, err)
		}
	}
	return nil
}

func (r *Run) timed(m *Measurement, routings int) error {
	b := r.Backend
	h := r.hosts
	for i := 0; i < r.Cfg.Iters; i++ {
		j := i % routings
		h.stamp(i, 0)
		if err := b.Mark(0); err != nil {
			return err
		}
		if !r.skipDispatch {
			if err := b.Dispatch(j); err != nil {
				return fmt.Errorf("timed iteration %d: dispatch: %w", i, err)
			}
		}
		if err := b.Mark(1); err != nil {
			return err
		}
		h.stamp(i, 1)
		if err := b.Sync(); err != nil {
			return fmt.Errorf("timed iteration %d: dispatch: %w", i, err)
		}
		h.stamp(i, 2)
		if err := b.Mark(2); err != nil {
			return err
		}
		if !r.skipDispatch && !r.skipCombine {
			if err := b.Combine(j); err != nil {
				return fmt.Errorf("timed iteration %d: combine: %w", i, err)
			}
		}
		if err := b.Mark(3); err != nil {
			return err
		}
		h.stamp(i, 3)
		if err := b.Sync(); err != nil {
			return fmt.Errorf("timed iteration %d: combine: %w", i, err)
		}
		h.stamp(i, 4)
		var err error
		if m.DispatchUs[i], err = b.ElapsedUs(0, 1); err != nil {
			return err
		}
		if m.CombineUs[i], err = b.ElapsedUs(2, 3); err != nil {
			return err
		}
		if m.TotalUs[i], err = b.ElapsedUs(0, 3); err != nil {
			return err
		}
		if err := r.barrier.Wait("barrier after the pair"); err != nil {
			return fmt.Errorf("timed iteration %d: %w", i, err)
		}
		h.stamp(i, 5)
		r.kernel.pairs++
		if n := r.Cfg.ValidateEvery; n > 0 && (i+1)%n == 0 {
			if err := r.soakCheck(j, i+1, i+1 < r.Cfg.Iters); err != nil {
				return err
			}
		}
	}
	return nil
}

// timedBackToBack is the timed loop with --back-to-back: the pairs follow
// each other on the stream, dispatch, combine, dispatch, ..., with no host
// sync and no barrier between them, each operation bracketed by its own
// pair of marks (4 per pair); one sync at the end. Every
// --validate-every-th pair is a validated pair (validatedPair) that adds no
// sync or barrier either: its outputs are checked while the later pairs
// run, and the ranks agree on the verdicts after the loop.
func (r *Run) timedBackToBack(m *Measurement, routings int) error {
	b := r.Backend
	every := r.Cfg.ValidateEvery
	if every > 0 && r.Validate == nil {
		return errors.New("--validate-every: the backend has no validator")
	}
	var prev pendingCheck
	var first *ValidationError // this rank's first failed check
	checkPrev := func() error {
		if prev.snap == nil {
			return nil
		}
		c, err := r.check(prev.snap, prev.j, prev.gen)
		if err != nil {
			return fmt.Errorf("validation after %d timed iterations: %w", prev.after, err)
		}
		if first == nil && !(c.DispatchOK && c.CombineOK) {
			first = &ValidationError{After: prev.after, Detail: c.Detail}
		}
		prev.snap = nil
		return nil
	}
	for i := 0; i < r.Cfg.Iters; i++ {
		j := i % routings
		validated := every > 0 && (i+1)%every == 0
		if validated {
			r.gen++
			if err := errors.Join(b.Poison(false), b.Generation(r.gen)); err != nil {
				return fmt.Errorf("timed iteration %d: %w", i, err)
			}
		}
		if err := b.Mark(4 * i); err != nil {
			return err
		}
		if !r.skipDispatch {
			if err := b.Dispatch(j); err != nil {
				return fmt.Errorf("timed iteration %d: dispatch: %w", i, err)
			}
		}
		if err := errors.Join(b.Mark(4*i+1), b.Mark(4*i+2)); err != nil {
			return err
		}
		if !r.skipDispatch && !r.skipCombine {
			if err := b.Combine(j); err != nil {
				return fmt.Errorf("timed iteration %d: combine: %w", i, err)
			}
		}
		if err := b.Mark(4*i + 3); err != nil {
			return err
		}
		r.kernel.pairs++
		if !validated {
			continue
		}
		snap, err := b.Snapshot()
		if err == nil {
			err = b.Generation(0)
		}
		if err != nil {
			return fmt.Errorf("timed iteration %d: %w", i, err)
		}
		// The check before this one is read now, while this pair runs.
		if err := checkPrev(); err != nil {
			return err
		}
		prev = pendingCheck{snap: snap, j: j, gen: r.gen, after: i + 1}
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("timed pairs: %w", err)
	}
	if err := checkPrev(); err != nil {
		return err
	}
	for i := 0; i < r.Cfg.Iters; i++ {
		var err error
		if m.DispatchUs[i], err = b.ElapsedUs(4*i, 4*i+1); err != nil {
			return err
		}
		if m.CombineUs[i], err = b.ElapsedUs(4*i+2, 4*i+3); err != nil {
			return err
		}
		if m.TotalUs[i], err = b.ElapsedUs(4*i, 4*i+3); err != nil {
			return err
		}
	}
	if every == 0 {
		return nil
	}
	failed, err := r.hostBarrier.Agree("agreeing on the validation", first == nil)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		ve := &ValidationError{Ranks: append([]int(nil), failed...)}
		if first != nil {
			ve.After, ve.Detail = first.After, first.Detail
		}
		return ve
	}
	return nil
}

// ValidationError is a check that failed during the timed loop
// (--validate-every); every rank returns one, naming the same ranks.
type ValidationError struct {
	After  int    // timed iterations done before the check
	Ranks  []int  // the ranks whose outputs were wrong
	Detail string // this rank's first failure; empty where it passed
}

func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("validation after %d timed iterations failed on %s", e.After, rankList(e.Ranks))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// soakCheck validates one pair of routing j between timed iterations
// (--validate-every): outside the marks and the kernel timing windows, with
// the garbage collector on (the outputs are copied to the host). The verdict
// is agreed on across ranks before anyone acts on it, so all stop together.
func (r *Run) soakCheck(j, after int, more bool) error {
	if r.Validate == nil {
		return errors.New("--validate-every: the backend has no validator")
	}
	r.kernel.stop()
	debug.SetGCPercent(r.gcPercent)
	c, err := r.checkPair(j)
	if err != nil {
		return fmt.Errorf("validation after %d timed iterations: %w", after, err)
	}
	runtime.GC()
	debug.SetGCPercent(-1)
	if more {
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
	b := r.Backend
	// Peers write into this rank's symmetric areas: every rank is between
	// pairs (and has checked its last outputs, which takes each its own
	// time) before any poisons them, and all have before any starts the pair.
	if err := r.hostBarrier.Wait("barrier before poisoning"); err != nil {
		return Check{}, err
	}
	r.gen++
	if err := errors.Join(b.Generation(r.gen), b.Poison(true), b.Sync()); err != nil {
		return Check{}, fmt.Errorf("poisoning outputs: %w", err)
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
	snap, err := b.Snapshot()
	if err == nil {
		err = b.Generation(0)
	}
	if err != nil {
		return Check{}, fmt.Errorf("reading outputs: %w", err)
	}
	return r.check(snap, j, r.gen)
}

// check validates the outputs a snapshot holds: those of a pair of routing
// j on generation gen.
func (r *Run) check(snap func() (*ll.Outputs, error), j, gen int) (Check, error) {
	out, err := snap()
	if err != nil {
		return Check{}, fmt.Errorf("reading outputs: %w", err)
	}
	return r.Validate(out, j, gen)
}

// pair runs dispatch, sync, combine, sync of routing j. A rank told to skip
// its dispatch (--fault) skips the combine too: it has nothing to combine.
func (r *Run) pair(j int) error {
	b := r.Backend
	if !r.skipDispatch {
		if err := b.Dispatch(j); err != nil {
			return fmt.Errorf("dispatch: %w", err)
		}
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if !r.skipDispatch && !r.skipCombine {
		if err := b.Combine(j); err != nil {
			return fmt.Errorf("combine: %w", err)
		}
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return nil
}

// kernelWindows runs the kernel timer over the timed pairs only: it is
// stopped around each --validate-every check, and the windows' averages are
// combined weighted by their pairs.
type kernelWindows struct {
	timer      KernelTimer
	on         bool
	pairs      int     // timed pairs in the open window
	done       int     // timed pairs in the closed windows
	dSum, cSum float64 // µs × pairs over the closed windows
	err        error
}

func (w *kernelWindows) start() error {
	if w.timer == nil || w.err != nil {
		return nil
	}
	if err := w.timer.Start(); err != nil {
		w.err = err
		return err
	}
	w.on, w.pairs = true, 0
	return nil
}

// stop closes the open window; the device must be synchronized.
func (w *kernelWindows) stop() {
	if !w.on {
		return
	}
	w.on = false
	d, c, err := w.timer.Stop(w.pairs, w.pairs)
	if err != nil {
		w.err = err
		return
	}
	w.dSum += d * float64(w.pairs)
	w.cSum += c * float64(w.pairs)
	w.done += w.pairs
}

// result is the average over every window, which must cover iters pairs.
func (w *kernelWindows) result(iters int) (dispatchUs, combineUs float64, err error) {
	switch {
	case w.timer == nil:
		return 0, 0, errors.New("no kernel timer")
	case w.err != nil:
		return 0, 0, w.err
	case w.done != iters || iters == 0:
		return 0, 0, fmt.Errorf("kernel timing covered %d of %d timed pairs", w.done, iters)
	}
	return w.dSum / float64(iters), w.cSum / float64(iters), nil
}

// validate runs at least two consecutive pairs (both signal parities), each
// on a generation of its own with poisoned outputs, and checks every one;
// with --back-to-back the pairs follow each other without a sync or a
// barrier (backToBackChecks).
func (r *Run) validate(routings int) (*Check, error) {
	if r.Validate == nil {
		return nil, errors.New("validation requested but the backend has no validator")
	}
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
			c, err := r.check(prev.snap, prev.j, prev.gen)
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
	c, err := r.check(prev.snap, prev.j, prev.gen)
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
	b := r.Backend
	r.gen++
	if err := errors.Join(b.Poison(false), b.Generation(r.gen)); err != nil {
		return pendingCheck{}, fmt.Errorf("validated pair: %w", err)
	}
	if err := r.launchPair(j); err != nil {
		return pendingCheck{}, fmt.Errorf("validated pair: %w", err)
	}
	snap, err := b.Snapshot()
	if err == nil {
		err = b.Generation(0)
	}
	if err != nil {
		return pendingCheck{}, fmt.Errorf("validated pair: %w", err)
	}
	return pendingCheck{snap: snap, j: j, gen: r.gen}, nil
}

// launchPair starts dispatch and combine of routing j with no sync between
// or after them. A rank told to skip its dispatch (--fault) skips the
// combine too.
func (r *Run) launchPair(j int) error {
	if !r.skipDispatch {
		if err := r.Backend.Dispatch(j); err != nil {
			return fmt.Errorf("dispatch: %w", err)
		}
	}
	if !r.skipDispatch && !r.skipCombine {
		if err := r.Backend.Combine(j); err != nil {
			return fmt.Errorf("combine: %w", err)
		}
	}
	return nil
}

// Summarize reduces every rank's measurement into the summary ep_bench
// prints (collective). Host numbers: mode Host over per-rank statistics with
// the first timed iteration dropped; kernel numbers: mode KernelOnly over
// per-rank CUPTI averages of the whole timed loop.
func (r *Run) Summarize(m *Measurement) (report.Summary, []report.RankValues, error) {
	c := StatsComm(r.Comm)
	sum := report.Summary{Ranks: r.Comm.Size(), DispatchDType: r.Cfg.DispatchDtype.String()}
	phases := []struct {
		samples []float64
		bytes   int64
		dst     *report.HostPhase
	}{
		{m.DispatchUs, r.DispatchBytes, &sum.Host.Dispatch},
		{m.CombineUs, r.CombineBytes, &sum.Host.Combine},
		{m.TotalUs, r.DispatchBytes + r.CombineBytes, &sum.Host.Total},
	}
	globals := make([]stats.Global, len(phases))
	for i, p := range phases {
		g, err := stats.Reduce(c, stats.Host, stats.Local{Sample: stats.Summarize(p.samples), Bytes: p.bytes})
		if err != nil {
			return sum, nil, fmt.Errorf("reducing host times: %w", err)
		}
		*p.dst = report.HostPhaseFrom(g)
		globals[i] = g
	}

	// Kernel numbers count only when every rank has them.
	ok := 0.0
	if m.KernelOK {
		ok = 1
	}
	all, err := r.Comm.AllreduceFloat64([]float64{ok}, mpi.Min)
	if err != nil {
		return sum, nil, err
	}
	var kd, kc stats.Global
	if all[0] == 1 {
		if kd, err = stats.Reduce(c, stats.KernelOnly, stats.Local{Sample: stats.Sample{Avg: m.KernelDispatchUs, N: 1}, Bytes: r.DispatchBytes}); err != nil {
			return sum, nil, err
		}
		if kc, err = stats.Reduce(c, stats.KernelOnly, stats.Local{Sample: stats.Sample{Avg: m.KernelCombineUs, N: 1}, Bytes: r.CombineBytes}); err != nil {
			return sum, nil, err
		}
		sum.Kernel = &report.KernelPerf{Dispatch: report.KernelPhaseFrom(kd), Combine: report.KernelPhaseFrom(kc)}
	} else {
		sum.KernelNote = r.KernelNote
		if sum.KernelNote == "" {
			sum.KernelNote = "kernel timing unavailable on some rank."
		}
	}

	// Every rank's selections and messages (one-hot sums); ep_bench prints
	// rank 0's counts.
	n := r.Comm.Size()
	sel := make([]float64, 2*n)
	sel[r.Comm.Rank()] = float64(r.Selections)
	sel[n+r.Comm.Rank()] = float64(r.Messages)
	if sel, err = r.Comm.AllreduceFloat64(sel, mpi.Sum); err != nil {
		return sum, nil, err
	}
	sum.Bytes = report.Bytes{Dispatch: globals[0].PerRank[0].Bytes, Combine: globals[1].PerRank[0].Bytes, Selections: int64(sel[0])}
	if msgs := int64(sel[n]); msgs > 0 {
		sum.Bytes.Messages = msgs
		sum.Bytes.WireDispatch = stats.DispatchBytes(int(msgs), r.Cfg.Hidden, dtypeOf(r.Cfg))
		sum.Bytes.WireCombine = stats.CombineBytes(int(msgs), r.Cfg.Hidden)
	}

	per := make([]report.RankValues, r.Comm.Size())
	for rk := range per {
		rv := report.RankValues{
			Rank:          rk,
			Selections:    int64(sel[rk]),
			DispatchBytes: globals[0].PerRank[rk].Bytes,
			CombineBytes:  globals[1].PerRank[rk].Bytes,
			Dispatch:      report.RankPhaseFrom(globals[0].PerRank[rk]),
			Combine:       report.RankPhaseFrom(globals[1].PerRank[rk]),
			Total:         report.RankPhaseFrom(globals[2].PerRank[rk]),
		}
		if sum.Kernel != nil {
			d, cb := kd.PerRank[rk].Sample.Avg, kc.PerRank[rk].Sample.Avg
			rv.KernelDispatchUS, rv.KernelCombineUS = &d, &cb
		}
		per[rk] = rv
	}
	return sum, per, nil
}

// printHostTrace gathers every rank's host stamps; rank 0 prints them. The
// ranks first agree (bounded) on whether all of them traced: the gather is
// a blocking collective, and EPBENCH_HOSTTRACE may have reached only some
// ranks (mpirun passes it on only with -x).
func (r *Run) printHostTrace() error {
	missing, err := r.hostBarrier.Agree("agreeing on the host trace", r.hosts != nil)
	if err != nil {
		return err
	}
	switch {
	case r.hosts == nil && len(missing) == r.Comm.Size():
		return nil // off everywhere
	case len(missing) > 0:
		if r.Comm.Rank() == 0 {
			fmt.Fprintf(os.Stderr, "epbench: host trace: %s not set on %s (pass it to every rank: mpirun -x %s); not printed\n",
				HostTraceEnv, rankList(missing), HostTraceEnv)
		}
		return nil
	}
	all, err := r.Comm.AllgatherInt64(r.hosts.ns)
	if err != nil {
		return fmt.Errorf("gathering the host trace: %w", err)
	}
	if r.Comm.Rank() != 0 {
		return nil
	}
	n := len(r.hosts.ns)
	per := make([][]int64, len(all)/n)
	for q := range per {
		per[q] = all[q*n : (q+1)*n]
	}
	writeHostTrace(os.Stderr, per)
	return nil
}
