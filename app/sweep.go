package app

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
)

// sweepCmd runs `epbench sweep`.
func sweepCmd(args []string, opts Options) error {
	if slices.Contains(args, "-h") || slices.Contains(args, "--help") {
		if mpi.LauncherRank() == 0 {
			fmt.Print(config.SweepUsage())
		}
		return nil
	}
	sp, err := config.ParseSweep(args, os.Getenv)
	if err == nil {
		err = report.CheckOutputs(map[string]string{"--csv": sp.CSVPath, "--json": sp.Points[0].JSONPath})
	}
	if err != nil {
		return Usage(err)
	}
	if sp.Version {
		return printVersion()
	}
	if n := mpi.LauncherSize(); n > 0 {
		for _, c := range sp.Points {
			if err := c.CheckRanks(n); err != nil {
				return Usage(err)
			}
		}
	}
	base := sp.Points[0]
	compute, err := chooseCompute(base, opts, append([]string{"sweep"}, args...))
	if err != nil {
		return err
	}
	w, err := startMPI()
	if err != nil {
		return err
	}
	row := func(i int, sw *report.Sweep, pt report.SweepPoint) error {
		if w.Rank != 0 {
			return nil
		}
		if err := report.WriteSweepPoint(os.Stdout, sw, i, pt); err != nil {
			return err
		}
		if isTerminal(os.Stderr) {
			fmt.Fprintf(os.Stderr, "epbench: sweep %d/%d done (%s=%d)\n", i+1, len(sp.Points), sp.Varying, sp.Values[i])
		}
		return nil
	}
	sw, err := bench.Sweep(w, sp, opener(w, compute, opts), row)
	if err == nil && w.Rank == 0 {
		err = report.SaveSweep(sw, sp.CSVPath, base.JSONPath)
	}
	if err == nil && slices.ContainsFunc(sw.Points, func(p report.SweepPoint) bool { return p.Result.Failed() }) {
		err = &ExitError{Code: ExitValidation, Err: errors.New("validation failed at some sweep point")}
	}
	return finishMPI(w, base.Timeout(), runError(err))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
