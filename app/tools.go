package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/plot"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/routing"
	"github.com/epbench/epbench/sidebyside"
)

// routingCmd prints one rank's topk_idx exactly as ep_bench draws it: one
// token per line, values separated by single spaces, -1 for masked. It runs
// as a plain process (no MPI, no GPU) and prints nothing else.
func routingCmd(args []string, stdout io.Writer) error {
	ra, err := config.ParseRouting(args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, config.RoutingUsage())
		return nil
	}
	if err != nil {
		return Usage(err)
	}
	ranks := ra.Ranks
	if ranks == 0 {
		ranks = 1
	}
	idx, err := routing.TopK(ra.Tokens, ra.Experts, ra.TopK, routing.GenSeed(ra.Seed, ra.Rank, ranks, ra.RerouteIndex))
	if err != nil {
		return Usage(err)
	}
	w := bufio.NewWriter(stdout)
	buf := make([]byte, 0, 16)
	for t := 0; t < ra.Tokens; t++ {
		for k := 0; k < ra.TopK; k++ {
			if k > 0 {
				w.WriteByte(' ')
			}
			buf = strconv.AppendInt(buf[:0], idx[t*ra.TopK+k], 10)
			w.Write(buf)
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return Runtimef("routing: %v", err)
	}
	return nil
}

const compareUsage = `usage: epbench compare [--kernel-only] [--label NAME ...] FILE FILE [FILE ...]

Reads the summaries of ep_bench (NCCL-EP and nccl-extensions formats), of the
Python ep_bench_ll benchmark and of epbench (text or --json output), and prints
one table: host-observed avg/min/max per phase, and kernel rows when every
input has them. For two inputs it adds "Host D+C ratio a/b".

  --kernel-only   lead with the kernel-only rows
  --label NAME    label of the next input, in order (default: file name without
                  extension, cut to 14 characters); repeat per input

epbench compare --run --ep-lib epbench,nccl-ep ... runs the benchmarks on one
problem and compares their outputs (see epbench compare --run --help).
`

// compareCmd prints the unified comparison table of summary files; with
// --run it runs the benchmarks first (package sidebyside).
func compareCmd(args []string, stdout io.Writer) error {
	if sidebyside.Requested(args) {
		err := sidebyside.Main(args, sidebyside.Env{Stdout: stdout, Stderr: os.Stderr, GPUCount: gpuCount})
		if sidebyside.IsUsage(err) {
			return Usage(err)
		}
		if err != nil {
			return Runtime(err)
		}
		return nil
	}
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kernelOnly := fs.Bool("kernel-only", false, "")
	labels := fs.StringArray("label", nil, "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return Usagef("compare: %v", err)
	}
	if *help {
		fmt.Fprint(stdout, compareUsage)
		return nil
	}
	files := fs.Args()
	if len(files) < 1 {
		return Usagef("compare: need at least one summary file (see epbench compare --help)")
	}
	if len(*labels) > len(files) {
		return Usagef("compare: --label given %d times for %d inputs", len(*labels), len(files))
	}
	var inputs []*report.Parsed
	for i, f := range files {
		p, err := report.ParseFile(f)
		if err != nil {
			return Usagef("compare: %s: %v", f, err)
		}
		if i < len(*labels) {
			p.Label = (*labels)[i]
		}
		inputs = append(inputs, p)
	}
	if err := report.WriteCompare(stdout, inputs, report.CompareOptions{KernelOnly: *kernelOnly}); err != nil {
		return Runtimef("compare: %v", err)
	}
	return nil
}

// plotCmd draws latency against tokens (epbench plot).
func plotCmd(args []string) error {
	err := plot.Main(args, os.Stdout)
	if errors.Is(err, plot.ErrUsage) {
		return Usage(err)
	}
	if err != nil {
		return Runtime(err)
	}
	return nil
}
