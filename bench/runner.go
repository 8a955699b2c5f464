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
)

// Run is one measurement.
type Run struct {
	Cfg     *config.Config
	Comm    *mpi.Comm
	Backend Backend

	// Kernel is nil when there is no kernel timing; KernelNote then says why.
	Kernel     KernelTimer
	KernelNote string
	// BeforeTimed and AfterTimed bracket exactly the timed loop
	// (cuProfilerStart/Stop for --cupti-region); nil for none.
	BeforeTimed, AfterTimed func() error
	// Profiler runs -p's extra loop (nil where there is none); Shape is the
	// shape its set-up range sets the backend up for again.
	Profiler *Profiler
	Shape    *ll.Shape

	Validate Validator // with -V (and -T, which implies it)

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
// outside the timed samples (and, but with --back-to-back, outside the
// kernel timing windows).
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
	if err := r.refuse(); err != nil {
		return nil, err
	}
	out, err := r.loop(m)
	if err != nil && (r.skipDispatch || r.skipCombine) {
		// What went wrong here follows from the injected fault.
		err = fmt.Errorf("%w; this rank skipped its %s (--fault %s)", err, cfg.Fault.Op, cfg.Fault)
	}
	return out, err
}

// refuse refuses what the configuration asks of a backend that cannot do
// it: every rank alike, before any waits for another.
func (r *Run) refuse() error {
	cfg := r.Cfg
	if (cfg.Validate || cfg.ValidateEvery > 0) && r.Validate == nil {
		return errors.New("validation requested but the backend has no validator")
	}
	if _, ok := r.Backend.(Masker); cfg.MaskTest && !ok {
		return errors.New("-T/--mask-test: this backend has no mask of active ranks")
	}
	return nil
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
		if err := r.dispatch(j); err != nil {
			return fmt.Errorf("timed iteration %d: dispatch: %w", i, err)
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
		if err := r.combine(j); err != nil {
			return fmt.Errorf("timed iteration %d: combine: %w", i, err)
		}
		if err := b.Mark(3); err != nil {
			return err
		}
		h.stamp(i, 3)
		if err := b.Sync(); err != nil {
			return fmt.Errorf("timed iteration %d: combine: %w", i, err)
		}
		h.stamp(i, 4)
		if err := r.samples(m, i, 0); err != nil {
			return err
		}
		if err := r.barrier.Wait("barrier after the pair"); err != nil {
			return fmt.Errorf("timed iteration %d: %w", i, err)
		}
		h.stamp(i, 5)
		r.kernel.pairs++
		if n := r.Cfg.ValidateEvery; n > 0 && (i+1)%n == 0 {
			if err := r.soakCheck(j, i+1); err != nil {
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
// --validate-every-th pair is a validated pair (startValidated,
// endValidated) that adds no sync or barrier either: its outputs are
// checked while the later pairs run, and the ranks agree on the verdicts
// after the loop.
func (r *Run) timedBackToBack(m *Measurement, routings int) error {
	b := r.Backend
	every := r.Cfg.ValidateEvery
	var prev pendingCheck
	var first *ValidationError // this rank's first failed check
	checkPrev := func() error {
		if prev.snap == nil {
			return nil
		}
		// Checking allocates (the expected outputs): the collector runs
		// while it does, or a long soak's checks pile their garbage up.
		debug.SetGCPercent(r.gcPercent)
		c, err := r.check(prev.snap, prev.j, prev.gen, nil)
		debug.SetGCPercent(-1)
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
			if err := r.startValidated(); err != nil {
				return fmt.Errorf("timed iteration %d: %w", i, err)
			}
		}
		if err := b.Mark(4 * i); err != nil {
			return err
		}
		if err := r.dispatch(j); err != nil {
			return fmt.Errorf("timed iteration %d: dispatch: %w", i, err)
		}
		if err := errors.Join(b.Mark(4*i+1), b.Mark(4*i+2)); err != nil {
			return err
		}
		if err := r.combine(j); err != nil {
			return fmt.Errorf("timed iteration %d: combine: %w", i, err)
		}
		if err := b.Mark(4*i + 3); err != nil {
			return err
		}
		r.kernel.pairs++
		if !validated {
			continue
		}
		snap, err := r.endValidated()
		if err != nil {
			return fmt.Errorf("timed iteration %d: %w", i, err)
		}
		next := pendingCheck{snap: snap, j: j, gen: r.gen, after: i + 1}
		// The check before this one is read now, while this pair runs.
		if err := checkPrev(); err != nil {
			return err
		}
		prev = next
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("timed pairs: %w", err)
	}
	if err := checkPrev(); err != nil {
		return err
	}
	for i := 0; i < r.Cfg.Iters; i++ {
		if err := r.samples(m, i, 4*i); err != nil {
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
		if first == nil { // only other ranks failed
			first = &ValidationError{}
		}
		first.Ranks = append([]int(nil), failed...)
		return first
	}
	return nil
}

// samples reads timed iteration i's times from its four marks, from slot
// first on: before and after the dispatch, before and after the combine.
func (r *Run) samples(m *Measurement, i, first int) (err error) {
	b := r.Backend
	if m.DispatchUs[i], err = b.ElapsedUs(first, first+1); err != nil {
		return err
	}
	if m.CombineUs[i], err = b.ElapsedUs(first+2, first+3); err != nil {
		return err
	}
	m.TotalUs[i], err = b.ElapsedUs(first, first+3)
	return err
}

// dispatch starts the dispatch of routing j, unless this rank is told to
// skip it (--fault).
func (r *Run) dispatch(j int) error {
	if r.skipDispatch {
		return nil
	}
	return r.Backend.Dispatch(j)
}

// combine starts the combine of routing j, unless this rank is told to skip
// it or its dispatch (--fault): without a dispatch it has nothing to combine.
func (r *Run) combine(j int) error {
	if r.skipDispatch || r.skipCombine {
		return nil
	}
	return r.Backend.Combine(j)
}

// pair runs dispatch, sync, combine, sync of routing j.
func (r *Run) pair(j int) error {
	if err := r.dispatch(j); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if err := r.Backend.Sync(); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if err := r.combine(j); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	if err := r.Backend.Sync(); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return nil
}

// launchPair starts dispatch and combine of routing j with no sync between
// or after them.
func (r *Run) launchPair(j int) error {
	if err := r.dispatch(j); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if err := r.combine(j); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return nil
}
