// Package routing makes the inputs of NCCL-EP's ep_bench bit for bit: the
// low-latency top-k routing table (topk_idx) of every rank, and the token rows
// and top-k weights that --validate uses.
//
// ep_bench builds these on the host with libstdc++'s <random> and <algorithm>.
// Matching its selection counts, and the experts each token reaches, needs the
// same numbers, so this package reproduces the exact algorithms rather than
// equivalent ones:
//
//   - MT19937 is std::mt19937.
//   - NormalFloat32 is std::normal_distribution<float>: Marsaglia's polar
//     method over generate_canonical<float> uniforms, with the second value of
//     each pair cached, and glibc's logf (an FMA-capable host's build).
//   - UniformUint32 is std::uniform_int_distribution<unsigned> as of GCC 11
//     (Lemire's multiply-and-reject; a one-value range still draws).
//   - TopK orders experts as std::partial_sort does (heap selection, then
//     sort_heap), comparing scores only, so equal scores keep libstdc++'s order.
//
// Rank r's table uses seed DefaultSeed + r (GenSeed with j = 0). With 8 ranks
// and ep_bench's defaults (128 tokens, 256 experts, top-8) rank 0 has 1015
// valid selections and every other rank 1014.
//
// The --validate inputs (TokenRows, DecodeRow, Weights) follow ep_bench's
// initializeValidationData: every token row carries its source rank and
// token index as small bfloat16 integers, and weights are |N(0,1)| from
// std::mt19937(42 + rank), at least 1e-6.
package routing
