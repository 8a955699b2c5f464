// Package stats turns per-iteration timings into the numbers ep_bench prints:
// per-rank statistics, byte accounting, throughput and the cross-rank
// reduction.
//
// Units: times are microseconds, bytes are bytes, throughput is GB/s with
// GB = 1e9 bytes.
//
// Per rank, [Summarize] drops the first timed iteration when there is more
// than one (ep_bench's calc_stats) and reports avg/min/max plus p50/p99 by the
// nearest-rank method on the kept samples.
//
// Across ranks, [Reduce] is the only reduction helper; its [Mode] says which
// of ep_bench's two rules applies:
//
//   - [Host]: avg = mean of per-rank averages, min = smallest per-rank min,
//     max = largest per-rank max. Throughput avg = rank 0's bytes / global avg;
//     throughput min/max = each rank's bytes / its own avg, with the owning rank
//     found by MINLOC/MAXLOC.
//   - [KernelOnly]: avg/min/max over ranks of one value per rank (the per-rank
//     CUPTI kernel average, first iteration included). Throughput avg = rank 0's
//     bytes / avg, and, as in ep_bench, throughput "min" is computed from the
//     minimum time and "max" from the maximum time, so "min" is the higher
//     number.
//   - [Values]: avg/min/max over ranks of one value per rank that is not a
//     phase's time (set-up timings), without throughput.
//
// The communicator is the small [Comm] interface (package bench adapts MPI's
// to it; the tests use an in-process one whose ranks are goroutines).
package stats
