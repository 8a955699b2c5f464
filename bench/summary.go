package bench

import (
	"fmt"
	"os"

	"github.com/epbench/epbench/internal/ranklist"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/stats"
)

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
				HostTraceEnv, ranklist.String(missing), HostTraceEnv)
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
