// Package config holds the configuration of an epbench run and parses it
// from the command line, getopt style (pflag), with the short and long
// flag names of NCCL-EP's ep_bench and of the MSCCL++ port of it.
//
// Parse returns a *Config or one error: ErrHelp for -h/--help, otherwise a
// *UsageError that reads "<flag>: <why>", for which the caller prints
// "epbench: error: " and the message and exits with status 2. pflag's own
// messages and usage output are suppressed.
//
// The problem size may also come from EPBENCH_TOKENS, EPBENCH_HIDDEN,
// EPBENCH_TOPK, EPBENCH_EXPERTS, EPBENCH_WARMUP and EPBENCH_ITERS; a flag
// on the command line always wins. Checks that need facts known only at
// run time are separate methods: CheckRanks once the MPI world size is
// known, CheckNumBlocks once the device's SM count is known.
//
// Config.Args renders a configuration back to a canonical argument list,
// for re-executing a run and for sweeps; Parse(c.Args(), env) gives back c.
//
// The package uses neither cgo nor MPI, so every executable can share it.
// It never panics on any input.
package config
