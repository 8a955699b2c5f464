// Package validate checks one rank's low-latency dispatch and combine outputs
// (ll.Outputs) against values it derives on its own from the routing and
// the validation inputs: every rank's topk_idx, this rank's top-k weights, and
// the token rows of routing.TokenRow, which are a deterministic function of
// (source rank, token). It shares no code with any backend, so a backend and
// this package agreeing is evidence, not an echo.
//
// # Dispatch
//
// For every local expert l of rank r (global expert e = r*L + l):
//
//   - recv_count[l] is the number of (source rank, token) pairs whose
//     topk_idx selects e;
//   - layout_range[l][s] = begin<<32 | count has the count of source rank s
//     that the routing implies, and the ranges of all sources partition
//     [0, recv_count[l]) without overlap (any order of source blocks);
//   - every row i < recv_count[l] belongs to the source s whose range holds
//     it, src_info[l][i] names a token t of s that selected e, no (s, t)
//     appears twice and none is missing;
//   - BF16: the row decodes (routing.DecodeRow) to (s, t) and equals
//     routing.TokenRow(s, t, H) bit for bit. FP8 E4M3: the bytes and the
//     per-128-channel scales equal the quantisation of that row that
//     docs/DESIGN.md specifies (amax floored at 1e-4, one rounded fp32
//     division 448/amax, one rounded fp32 multiply, round-to-nearest-even
//     satfinite E4M3, scale amax/448).
//
// # Combine
//
// The experts are the identity, so the expert output of every selection of
// token t of rank r is the dispatched row itself: the token row (BF16), or
// for FP8 dispatch bf16(fp32(decode(q) * scale)), the dequantised row the
// runner hands to combine. The expected out[t] follows docs/DESIGN.md to the
// bit, with every fp32 multiply and add rounded separately:
//
//   - direct_send: acc = 0; acc += w[t][k]*y in top-k order; bf16(acc).
//   - rank_local_reduce: for every expert rank q in ascending order, the
//     partial p_q = Σ w[t][k]*y over the slots on q in top-k order, rounded to
//     bf16; acc = 0; acc += float(p_q); bf16(acc).
//
// A token without a valid selection expects zeros. The comparison is exact.
//
// With a mask of active ranks (Input.Active, -T's masked step, checked by
// Validator given the mask) every term a masked rank would have sent is left out: its
// partial, or its slots' rows; the dispatch is then not checked. A valid
// weight is then one of a slot on an active rank, for CalcDiff below too.
//
// CalcDiff is ep_bench's similarity metric, 1 − 2Σ(x+1)(y+1)/Σ[(x+1)²+(y+1)²]
// in float64, of this rank's combine output x against ep_bench's own
// reference y = token row × Σ of the valid weights (float64), so the number
// printed is comparable with ep_bench's. It is NaN when the output holds a
// NaN. Pass/fail does not depend on it: the bitwise check decides.
//
// # Across ranks
//
// Check is local to one rank, and so is everything here: RoutingTopK
// regenerates every rank's topk_idx for a routing from the seed, and
// Validator wraps RoutingTopK and Check into the check the runner calls.
// The runner (package bench) reduces the verdicts over ranks (ep_bench's
// MPI_Allreduce MIN).
package validate
