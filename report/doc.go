// Package report holds epbench's result model and everything that reads or
// writes it: the ep_bench-compatible text output, the --json output, the
// parser behind "epbench compare" and its table. One model (Result) feeds all
// of them so the formats cannot drift apart.
//
// Text output. WriteText prints, in order: the configuration header (ep_bench's
// field lines and spacing under the title "=== epbench Performance Benchmark ===",
// plus "Backend:" and "Combine mode:" lines), optional topology lines, the
// low-latency summary block exactly as ep_bench lays it out, set-up timing,
// rank 0's GPU memory and, when run, data validation. Differences from
// ep_bench, all deliberate:
//   - Kernel-only numbers may be missing for reasons ep_bench does not have; one
//     "  NOTE: ..." line (see the Note constants) then replaces the four
//     kernel lines, where ep_bench prints "CUPTI support was not compiled".
//   - The set-up timing block says "Group creation:" for ep_bench's
//     "ncclEpCreateGroup:", in the same column.
//   - The GPU memory block is left out when there is no device (CPU backend).
//   - NumBlocks is echoed on ep_bench's "Max num SMs" line.
//
// Reductions. Host lines come from stats.Reduce in stats.Host mode, kernel-only
// lines in stats.KernelOnly mode (whose throughput "min" is computed from the
// minimum time and is therefore the highest value, as in ep_bench). Set-up
// timings are reduced in stats.KernelOnly mode over one value per rank.
//
// JSON output carries the same model plus what the text leaves out: per-rank
// statistics with p50/p99 (nearest rank) and exact byte counts. A non-finite
// calc_diff is written as null.
//
// Parsing. ParseSummary reads NCCL's ep_bench, nccl-extensions' later
// ep_bench, the Python ep_bench_ll.py port, and epbench's own text and JSON,
// keeping what the comparison needs. Byte counts parsed from text are the
// printed megabytes times 1e6, not the exact counts.
package report
