// Package bench is the benchmark runner: ep_bench's paired loop, its timing,
// the cross-rank reductions and the result model handed to the reports. The
// backends (CPU reference, CUDA) plug in through the Backend interface.
package bench

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/epbench/epbench/config"
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

// Check is one validation of a dispatch/combine pair.
type Check struct {
	DispatchOK, CombineOK bool
	CalcDiff              float64
	Detail                string // the first failure, naming rank and expert/row or token/column
}

// Validator checks a backend's outputs of routing j against the reference.
type Validator func(o *Outputs, j int) (Check, error)

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

	Validate Validator // with -V

	// Selections, DispatchBytes and CombineBytes are this rank's byte
	// accounting for routing 0 (ep_bench's).
	Selections                  int
	DispatchBytes, CombineBytes int64
}

// Measurement is what the loop measured on this rank.
type Measurement struct {
	DispatchUs, CombineUs, TotalUs []float64 // one per timed iteration
	KernelDispatchUs               float64
	KernelCombineUs                float64
	KernelOK                       bool
	Check                          *Check
}

// PeerTimeout is a backend error meaning a peer did not arrive in time.
type PeerTimeout interface {
	error
	PeerTimeout() bool
}

// Loop runs ep_bench's paired loop on this rank: warm-up pairs, then per
// iteration: mark, dispatch, mark, sync, mark, combine, mark, sync, MPI
// barrier. Syncs and barriers lie outside the marks. Nothing in the timed
// loop allocates, and the garbage collector is off while it runs.
func (r *Run) Loop() (*Measurement, error) {
	cfg := r.Cfg
	m := &Measurement{
		DispatchUs: make([]float64, cfg.Iters),
		CombineUs:  make([]float64, cfg.Iters),
		TotalUs:    make([]float64, cfg.Iters),
	}
	routings := max(cfg.Reroute, 1)
	if err := r.Comm.Barrier(); err != nil {
		return nil, fmt.Errorf("barrier before warm-up: %w", err)
	}
	for i := 0; i < cfg.Warmup; i++ {
		if err := r.pair(i % routings); err != nil {
			return nil, fmt.Errorf("warm-up iteration %d: %w", i, err)
		}
		if err := r.Comm.Barrier(); err != nil {
			return nil, fmt.Errorf("warm-up barrier: %w", err)
		}
	}

	if r.Kernel != nil {
		if err := r.Kernel.Start(); err != nil {
			return nil, fmt.Errorf("starting kernel timing: %w", err)
		}
	}
	if r.BeforeTimed != nil {
		if err := r.BeforeTimed(); err != nil {
			return nil, err
		}
	}
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	err := r.timed(m, routings)
	debug.SetGCPercent(gc)
	if r.AfterTimed != nil {
		if aerr := r.AfterTimed(); err == nil {
			err = aerr
		}
	}
	if r.Kernel != nil {
		d, c, kerr := r.Kernel.Stop(cfg.Iters, cfg.Iters)
		if err == nil && kerr == nil {
			m.KernelDispatchUs, m.KernelCombineUs, m.KernelOK = d, c, true
		} else if kerr != nil {
			r.KernelNote = "kernel timing unusable: " + kerr.Error()
		}
	}
	if err != nil {
		return nil, err
	}

	if cfg.Validate {
		c, err := r.validate(routings)
		if err != nil {
			return nil, err
		}
		m.Check = c
	}
	return m, nil
}

func (r *Run) timed(m *Measurement, routings int) error {
	b := r.Backend
	for i := 0; i < r.Cfg.Iters; i++ {
		j := i % routings
		if err := b.Mark(0); err != nil {
			return err
		}
		if err := b.Dispatch(j); err != nil {
			return fmt.Errorf("dispatch: %w", err)
		}
		if err := b.Mark(1); err != nil {
			return err
		}
		if err := b.Sync(); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		if err := b.Mark(2); err != nil {
			return err
		}
		if err := b.Combine(j); err != nil {
			return fmt.Errorf("combine: %w", err)
		}
		if err := b.Mark(3); err != nil {
			return err
		}
		if err := b.Sync(); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
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
		if err := r.Comm.Barrier(); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
	}
	return nil
}

func (r *Run) pair(j int) error {
	b := r.Backend
	if err := b.Dispatch(j); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if err := b.Sync(); err != nil {
		return err
	}
	if err := b.Combine(j); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return b.Sync()
}

// validate runs at least two consecutive pairs (both signal parities), each
// on poisoned outputs, and checks every one.
func (r *Run) validate(routings int) (*Check, error) {
	if r.Validate == nil {
		return nil, errors.New("validation requested but the backend has no validator")
	}
	all := &Check{DispatchOK: true, CombineOK: true}
	for p := 0; p < max(2, routings); p++ {
		j := p % routings
		if err := r.Backend.Poison(); err != nil {
			return nil, fmt.Errorf("poisoning outputs: %w", err)
		}
		if err := r.Comm.Barrier(); err != nil {
			return nil, err
		}
		if err := r.pair(j); err != nil {
			return nil, fmt.Errorf("validation pair %d: %w", p, err)
		}
		if err := r.Comm.Barrier(); err != nil {
			return nil, err
		}
		out, err := r.Backend.Outputs()
		if err != nil {
			return nil, fmt.Errorf("reading outputs: %w", err)
		}
		c, err := r.Validate(out, j)
		if err != nil {
			return nil, err
		}
		if all.Detail == "" && c.Detail != "" {
			all.Detail = fmt.Sprintf("routing %d: %s", j, c.Detail)
		}
		all.DispatchOK = all.DispatchOK && c.DispatchOK
		all.CombineOK = all.CombineOK && c.CombineOK
		all.CalcDiff = max(all.CalcDiff, c.CalcDiff)
	}
	return all, nil
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

	// Every rank's selections (one-hot sum); ep_bench prints rank 0's counts.
	n := r.Comm.Size()
	sel := make([]float64, n)
	sel[r.Comm.Rank()] = float64(r.Selections)
	if sel, err = r.Comm.AllreduceFloat64(sel, mpi.Sum); err != nil {
		return sum, nil, err
	}
	sum.Bytes = report.Bytes{Dispatch: globals[0].PerRank[0].Bytes, Combine: globals[1].PerRank[0].Bytes, Selections: int64(sel[0])}

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
