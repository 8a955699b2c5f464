package bench

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/stats"
	"github.com/epbench/epbench/validate"
)

// Benchmark is one run of cfg: it sets the platform up (timed), measures
// (Measure) and adds the set-up timings, reduced over ranks, the topology
// block and the memory readings. mpiMs is how long MPI took to start, the
// rest of ep_bench's "group creation". Every rank returns the same result.
// A platform that cannot be set up is a *SetupError.
func Benchmark(w *World, cfg *config.Config, open Opener, mpiMs float64) (*report.Result, error) {
	if err := cfg.CheckRanks(w.Size); err != nil {
		return nil, err
	}
	t0 := time.Now()
	plat, err := open(cfg)
	if err != nil {
		return nil, &SetupError{err}
	}
	defer plat.Backend.Close()
	setupMs := msSince(t0)

	res, err := Measure(w, cfg, plat)
	if err != nil {
		return nil, err
	}
	res.Topology = plat.Topology
	c := StatsComm(w.Comm)
	group, err := stats.Reduce(c, stats.Values, stats.Local{Sample: stats.Sample{Avg: mpiMs + plat.GroupMs, N: 1}})
	if err != nil {
		return nil, err
	}
	handle, err := stats.Reduce(c, stats.Values, stats.Local{Sample: stats.Sample{Avg: setupMs - plat.GroupMs, N: 1}})
	if err != nil {
		return nil, err
	}
	res.Setup = &report.Setup{Ranks: w.Size, GroupCreationMS: report.StatFrom(group), HandleCreationMS: report.StatFrom(handle)}
	if plat.Memory != nil {
		res.Memory = plat.Memory()
	}
	return res, nil
}

// Sweep measures every point of sw. A token sweep sets up once, for the
// largest count, when the backend is a Resizer; otherwise every point sets
// up its own. row is called on every rank after each point, in order.
func Sweep(w *World, sw *config.Sweep, open Opener, row func(i int, s *report.Sweep, pt report.SweepPoint) error) (*report.Sweep, error) {
	for _, c := range sw.Points {
		if err := c.CheckRanks(w.Size); err != nil {
			return nil, err
		}
	}
	var shared *Platform
	if sw.Varying == report.VaryTokens {
		largest := sw.Points[0]
		for _, c := range sw.Points {
			if c.Tokens > largest.Tokens {
				largest = c
			}
		}
		p, err := open(largest)
		if err != nil {
			return nil, &SetupError{err}
		}
		if _, ok := p.Backend.(Resizer); ok {
			shared = p
			defer shared.Backend.Close()
		} else {
			p.Backend.Close()
		}
	}

	out := &report.Sweep{Varying: sw.Varying}
	for i, cfg := range sw.Points {
		plat := shared
		if plat == nil {
			var err error
			if plat, err = open(cfg); err != nil {
				return nil, &SetupError{err}
			}
		} else if err := plat.Backend.(Resizer).SetShape(ll.ShapeOf(cfg, w.Rank, w.Size)); err != nil {
			return nil, err
		}
		res, err := Measure(w, cfg, plat)
		if plat != shared {
			plat.Backend.Close()
		}
		if err != nil {
			return nil, err
		}
		if i == 0 {
			out.Config = res.Config
		}
		pt := report.SweepPoint{Tokens: cfg.Tokens, TopK: cfg.TopK, Experts: cfg.Experts, Result: res}
		out.Points = append(out.Points, pt)
		if err := row(i, out, pt); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Measure is one full measurement of cfg on a set-up platform: ep_bench's
// paired loop, the byte counts of routing 0 (ep_bench's), validation when
// asked, and every cross-rank reduction. The result is the same on every
// rank; report.Result.Failed says whether the final validation failed on
// some rank. Errors of the loop are returned as they are (a
// *ValidationError, a PeerTimeout, ...).
func Measure(w *World, cfg *config.Config, plat *Platform) (*report.Result, error) {
	shape := ll.ShapeOf(cfg, w.Rank, w.Size)
	idx0, err := shape.Routing(cfg.Seed, w.Rank, 0)
	if err != nil {
		return nil, err
	}
	sel := stats.Selections(idx0)
	run := &Run{
		Cfg: cfg, Comm: w.Comm, Backend: plat.Backend,
		Kernel: plat.Kernel, KernelNote: plat.KernelNote,
		BeforeTimed: plat.BeforeTimed, AfterTimed: plat.AfterTimed, Profiler: plat.Profiler, Shape: &shape,
		Selections:    sel,
		DispatchBytes: stats.DispatchBytes(sel, cfg.Hidden, dtypeOf(cfg)),
		CombineBytes:  stats.CombineBytes(sel, cfg.Hidden),
	}
	if shape.RankMajor {
		run.Messages = stats.Messages(idx0, cfg.TopK, cfg.Experts/w.Size, w.Rank)
	}
	if cfg.Validate || cfg.ValidateEvery > 0 {
		check := validate.Validator(shape, cfg)
		run.Validate = func(o *ll.Outputs, j, gen int, active []bool) (Check, error) {
			rep, err := check(o, j, gen, active)
			return verdict(rep), err
		}
	}
	m, err := run.Loop()
	if err != nil {
		return nil, err
	}
	sum, per, err := run.Summarize(m)
	if err != nil {
		return nil, err
	}
	res := &report.Result{Config: header(cfg, w.Size, plat), Summary: sum, PerRank: per}
	for _, d := range m.KernelTimerDoubts(w.Rank) {
		fmt.Fprintf(os.Stderr, "epbench: kernel timer: %s\n", d)
	}
	if m.Check != nil {
		if res.Validation, err = validation(w.Comm, m.Check); err != nil {
			return nil, err
		}
		res.Validation.DispatchOnly = cfg.DispatchOnly
		if m.Check.Detail != "" {
			fmt.Fprintf(os.Stderr, "epbench: validation: %s\n", m.Check.Detail)
		}
	}
	if m.Mask != nil {
		if res.MaskTest, err = gatherMaskTest(w.Comm, m.Mask); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// GlobalVerdicts reduces this rank's dispatch and combine verdicts over
// every rank of c: a check passes globally only where it passed on all of
// them (ep_bench's MPI_Allreduce MIN). Collective.
func GlobalVerdicts(c *mpi.Comm, dispatchOK, combineOK bool) (dispatch, combine bool, err error) {
	one := func(ok bool) int32 {
		if ok {
			return 1
		}
		return 0
	}
	v, err := c.AllreduceInt32([]int32{one(dispatchOK), one(combineOK)}, mpi.Min)
	if err != nil {
		return false, false, fmt.Errorf("reducing the validation verdicts: %w", err)
	}
	if len(v) != 2 {
		return false, false, errors.New("reducing the validation verdicts: wrong count back")
	}
	return v[0] == 1, v[1] == 1, nil
}

// validation is the Data Validation block of this rank's check, with the
// verdicts of all ranks (GlobalVerdicts). Collective.
func validation(c *mpi.Comm, chk *Check) (*report.Validation, error) {
	dispatch, combine, err := GlobalVerdicts(c, chk.DispatchOK, chk.CombineOK)
	if err != nil {
		return nil, err
	}
	detail := func(ok bool) string {
		if ok {
			return ""
		}
		return chk.Detail
	}
	return &report.Validation{
		Dispatch:       report.Check{Passed: chk.DispatchOK, Detail: detail(chk.DispatchOK)},
		Combine:        report.Check{Passed: chk.CombineOK, Detail: detail(chk.CombineOK)},
		CalcDiff:       chk.CalcDiff,
		GlobalDispatch: dispatch,
		GlobalCombine:  combine,
	}, nil
}

func dtypeOf(cfg *config.Config) stats.DType {
	if cfg.DispatchDtype == config.DtypeFP8E4M3 {
		return stats.FP8E4M3
	}
	return stats.BF16
}

// header is the configuration block: cfg as run on `ranks` ranks, with what
// the platform reports of itself.
func header(cfg *config.Config, ranks int, plat *Platform) report.Config {
	backend := plat.Backend.Name()
	cupti := "enabled (kernel-level GPU timing available)"
	switch {
	case backend == string(config.ComputeCPU):
		cupti = "not applicable (cpu backend)"
	case !cfg.KernelTiming:
		cupti = "disabled (--no-kernel-timing)"
	case cfg.CUPTIRegion:
		cupti = "disabled (--cupti-region: external profiler)"
	case plat.Kernel == nil:
		cupti = "unavailable"
	}
	sub := ""
	switch {
	case cfg.NonUniform:
		sub = fmt.Sprintf("Non-uniform tokens in [0, %d] (last rank forced to 0)", cfg.Tokens)
	case cfg.DispatchTokens > 0:
		sub = fmt.Sprintf("Uniform tokens (num<max=%d)", cfg.DispatchTokens)
	}
	return report.Config{
		Algorithm: cfg.Algorithm.String(), Layout: cfg.Layout.String(), Ranks: ranks,
		NumBlocks: cfg.NumBlocks, MaxNumSMs: cfg.MaxNumSMs, Tokens: cfg.Tokens, SubTest: sub, RankTokens: cfg.RankTokens(ranks),
		Hidden: cfg.Hidden, TopK: cfg.TopK,
		Experts: cfg.Experts, LocalExperts: cfg.LocalExperts(ranks), Warmup: cfg.Warmup, Iters: cfg.Iters,
		DispatchDType: cfg.DispatchDtype.String(), ProfileMode: cfg.CUPTIRegion || cfg.Profile, NVLink: plat.NVLink,
		Validate: cfg.Validate, CUPTI: cupti, Backend: backend, CombineMode: cfg.CombineMode.String(),
		BackToBack: cfg.BackToBack,
	}
}

// verdict is a validation report as the runner keeps it.
func verdict(rep validate.Report) Check {
	return Check{DispatchOK: rep.DispatchOK, CombineOK: rep.CombineOK, CalcDiff: rep.CalcDiff, Detail: rep.First}
}
