// Package cpuref is the CPU reference backend: the low-latency dispatch and
// combine of docs/DESIGN.md on host memory, one MPI rank per process, tokens
// exchanged with an Alltoallv of point-to-point messages bounded by
// --timeout-ms. It is the executable specification the GPU
// kernels are held to, and a way to run the benchmark without a GPU.
//
// # Inputs
//
// New generates everything up front: topk_idx of routings j = 0..Reroute-1
// with routing.TopK and the seed routing.GenSeed(cfg.Seed, rank, ranks, j);
// the token rows routing.TokenRows, whose values encode (rank, token); and
// the weights routing.Weights. Rows and weights depend on the rank only, so
// every routing shares them. Hidden must therefore be at least 256.
//
// # Dispatch
//
// One message per (token, destination rank) holding an expert of the token:
// a header (token, the K expert ids, the K weights) and the row, BF16 or FP8
// E4M3 with one float32 scale per 128 channels (QuantizeRow). The message
// counts travel in a first Alltoallv, the messages in a second. The receiver
// lays them out expert-major in the canonical order, source ranks ascending
// and tokens ascending inside a source, and fills recv_count, src_info and
// layout_range.
//
// # Combine
//
// The experts are the identity. For FP8 dispatch the expert output is the
// dequantised row bf16(fp32(decode(q) * scale)), computed while combine reads
// it; the GPU runner writes it once before its timed loop instead, so CPU
// combine times include that work. All arithmetic is fp32 with each multiply
// and add rounded on its own (explicit float32 conversions stop Go from
// fusing them):
//
//   - rank_local_reduce: the expert rank sums w*y over its local slots of a
//     token in top-k order, rounds to bf16 and sends one row; the source sums
//     the partials in expert-rank order and rounds to bf16.
//   - direct_send: every expert row travels back; the source sums w*y in
//     top-k order and rounds to bf16.
//
// # Timing and memory
//
// Dispatch and Combine run to completion before they return; Sync does
// nothing. Mark reads the monotonic wall clock and ElapsedUs gives
// microseconds. Every buffer is allocated by New, and the exchanges reuse
// their MPI requests: Dispatch and Combine allocate nothing in a steady
// loop. Every wait for a peer is bounded by --timeout-ms; peers that do not
// take part in time make a *bench.TimeoutError that names them.
//
// Outputs returns copies. Poison writes bf16 0x7FC1, E4M3 0x7F and float32
// NaN into the data outputs and -1 into recv_count, src_info and
// layout_range.
package cpuref
