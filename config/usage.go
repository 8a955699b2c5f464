package config

import (
	"strings"
)

// Usage returns the help text for the benchmark: flags with their
// defaults, the environment fallbacks, subcommands and exit codes.
func Usage() string {
	var help bool
	fs := newFlagSet("epbench")
	bindConfig(fs, Default(), &help, nil)

	var b strings.Builder
	b.WriteString(`Usage: epbench [flags]
       epbench <subcommand> [flags]

Measures expert-parallel low-latency dispatch and combine across the ranks
of one MPI job, the way NCCL-EP's ep_bench does: paired dispatch+combine
iterations timed with CUDA events, then reduced across ranks.

Subcommands:
  routing   print the expert selection one rank draws (see: epbench routing -h)
  compare   compare results side by side
  devices   list the GPUs this process can use
  sweep     run the benchmark over a grid of configurations
  plot      plot sweep results
  version   print the version

Flags:
`)
	b.WriteString(fs.FlagUsagesWrapped(100))
	b.WriteString(`
Environment:
  EPBENCH_TOKENS, EPBENCH_HIDDEN, EPBENCH_TOPK, EPBENCH_EXPERTS,
  EPBENCH_WARMUP, EPBENCH_ITERS supply --num-tokens, --hidden, --num-topk,
  --num-experts, --num-warmup and --num-iters when the flag is not given;
  the seed benchmark's names MSCCLPP_EP_BENCH_TOKENS, ... stand in for each
  where it is unset. A flag always wins over its variable.

Exit status:
  0  success
  1  runtime error
  2  usage error
  3  validation failed (or a check of -T's active-mask test)
  4  a peer did not arrive within --timeout-ms
`)
	return b.String()
}

// RoutingUsage returns the help text for "epbench routing".
func RoutingUsage() string {
	var help bool
	fs := newFlagSet("routing")
	bindRouting(fs, &RoutingArgs{}, &help)

	var b strings.Builder
	b.WriteString(`Usage: epbench routing -t T -k K -e E --rank R [--seed S] [--ranks N --reroute-index J]

Prints the expert selection rank R draws for a benchmark run with the same
sizes and seed.

Flags:
`)
	b.WriteString(fs.FlagUsagesWrapped(100))
	return b.String()
}
