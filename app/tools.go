package app

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/plot"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/routing"
	"github.com/epbench/epbench/sidebyside"
)

// routingCmd prints one rank's topk_idx exactly as ep_bench draws it. It
// runs as a plain process (no MPI, no GPU) and prints nothing else.
func routingCmd(args []string, stdout io.Writer) error {
	ra, err := config.ParseRouting(args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, config.RoutingUsage())
		return nil
	}
	if err != nil {
		return Usage(err)
	}
	idx, err := routing.TopK(ra.Tokens, ra.Experts, ra.TopK, routing.GenSeed(ra.Seed, ra.Rank, max(ra.Ranks, 1), ra.RerouteIndex))
	if err != nil {
		return Usage(err)
	}
	if err := routing.WriteTopK(stdout, idx, ra.TopK); err != nil {
		return Runtimef("routing: %v", err)
	}
	return nil
}

// compareCmd prints the unified comparison table of summary files; with
// --run it runs the benchmarks first (package sidebyside).
func compareCmd(args []string, stdout io.Writer) error {
	if sidebyside.Requested(args) {
		return withCode(sidebyside.Main(args, sidebyside.Env{Stdout: stdout, Stderr: os.Stderr, GPUCount: gpuCount}))
	}
	return withCode(report.CompareCommand(args, stdout))
}

// plotCmd draws latency against tokens (epbench plot).
func plotCmd(args []string) error { return withCode(plot.Main(args, os.Stdout)) }

// withCode gives the error of compare, compare --run or plot its exit code:
// 2 for a usage error, else 1.
func withCode(err error) error {
	switch {
	case err == nil:
		return nil
	case sidebyside.IsUsage(err), errors.Is(err, report.ErrCompareUsage), errors.Is(err, plot.ErrUsage):
		return Usage(err)
	}
	return Runtime(err)
}
