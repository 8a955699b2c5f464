package routing

import "fmt"

// Input generations. Generation 0 is ep_bench's validation rows
// (FillTokenRow): the timed loop runs on them. Validation runs each of its
// pairs on a generation of its own (1, 2, ...), whose rows carry high
// entropy: every 16-byte chunk (8 channels) of a row is drawn from a hash of
// (rank, token, generation, chunk), so a row read from an earlier call, a
// row of another token or source, or a 128-byte line torn between two
// calls does not match what the pair sent. The values are ±[0.25, 4) with 7
// mantissa bits: exact in bfloat16, sums of them stay far from overflow,
// and FP8 quantises them with one scale per 128 channels as any row.

// FillRow writes the row of token t of rank in generation gen into row
// (whose length is the hidden size): FillTokenRow for generation 0, the
// high-entropy row otherwise.
func FillRow(row []uint16, rank, t, gen int) error {
	if gen == 0 {
		return FillTokenRow(row, rank, t)
	}
	if err := checkTokenRow(rank, t, len(row)); err != nil {
		return err
	}
	if gen < 0 {
		return fmt.Errorf("routing: generation %d is negative", gen)
	}
	for c0 := 0; c0 < len(row); c0 += 8 {
		h0, h1 := chunkHash(rank, t, gen, c0/8)
		for i := 0; i < 8 && c0+i < len(row); i++ {
			w := h0
			if i >= 4 {
				w = h1
			}
			row[c0+i] = entropyBF16(uint16(w >> (16 * (i % 4))))
		}
	}
	return nil
}

// FillRows writes rank's rows of generation gen into rows, [tokens, hidden]
// row-major, in place: one FillRow per token.
func FillRows(rows []uint16, rank, hidden, gen int) error {
	if hidden < 1 || len(rows)%hidden != 0 {
		return fmt.Errorf("routing: %d values are not rows of hidden %d", len(rows), hidden)
	}
	for t := 0; t < len(rows)/hidden; t++ {
		if err := FillRow(rows[t*hidden:(t+1)*hidden], rank, t, gen); err != nil {
			return err
		}
	}
	return nil
}

// entropyBF16 maps 16 random bits to a bfloat16 of magnitude in [0.25, 4):
// the sign, two bits of exponent (2^-2 .. 2^1) and 7 bits of mantissa.
func entropyBF16(b uint16) uint16 {
	sign := b & 0x8000
	exp := uint16(125+(b>>7)&3) << 7
	return sign | exp | b&0x7f
}

// chunkHash is 128 bits drawn from (rank, token, generation, chunk) by
// splitmix64 steps.
func chunkHash(rank, t, gen, chunk int) (uint64, uint64) {
	x := uint64(rank)<<48 ^ uint64(t)<<24 ^ uint64(gen)<<40 ^ uint64(chunk)
	a := SplitMix64(x ^ 0x5851f42d4c957f2d)
	return a, SplitMix64(a ^ uint64(chunk)<<17)
}

// SplitMix64 is one step of the splitmix64 generator: x advanced by the
// golden-ratio increment, then mixed. The kernels' --jitter-us delays
// (jitter in kernels/ll.cu) and the reference's (cpuref) are drawn with it.
func SplitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
