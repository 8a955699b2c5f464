package routing

// Parameters of std::mt19937 (32-bit Mersenne Twister, MT19937).
const (
	mtN          = 624
	mtM          = 397
	mtMatrixA    = 0x9908b0df
	mtUpperMask  = 0x80000000
	mtLowerMask  = 0x7fffffff
	mtInitMult   = 1812433253
	mtTemperMask = 0x9d2c5680
	mtTemperC    = 0xefc60000
)

// MT19937 reproduces std::mt19937 as libstdc++ implements it: the same
// seeding, the same block-wise state regeneration and the same tempering,
// so a given seed yields the same 32-bit sequence.
type MT19937 struct {
	state [mtN]uint32
	next  int
}

// NewMT19937 returns a generator in the state of std::mt19937 gen(seed).
// C++ callers pass an int (seed + rank); its value modulo 2^32 is the seed,
// which is what converting it to uint32 gives.
func NewMT19937(seed uint32) *MT19937 {
	g := &MT19937{}
	g.Seed(seed)
	return g
}

// Seed resets g to the state of std::mt19937 gen(seed).
func (g *MT19937) Seed(seed uint32) {
	g.state[0] = seed
	for i := 1; i < mtN; i++ {
		x := g.state[i-1]
		g.state[i] = mtInitMult*(x^(x>>30)) + uint32(i)
	}
	g.next = mtN
}

// regenerate twists the whole state at once, as libstdc++'s _M_gen_rand does.
func (g *MT19937) regenerate() {
	s := &g.state
	twist := func(k, k1, km int) {
		y := s[k]&mtUpperMask | s[k1]&mtLowerMask
		v := s[km] ^ y>>1
		if y&1 != 0 {
			v ^= mtMatrixA
		}
		s[k] = v
	}
	for k := 0; k < mtN-mtM; k++ {
		twist(k, k+1, k+mtM)
	}
	for k := mtN - mtM; k < mtN-1; k++ {
		twist(k, k+1, k+mtM-mtN)
	}
	twist(mtN-1, 0, mtM-1)
	g.next = 0
}

// Uint32 returns the next output, like gen().
func (g *MT19937) Uint32() uint32 {
	if g.next >= mtN {
		g.regenerate()
	}
	z := g.state[g.next]
	g.next++
	z ^= z >> 11
	z ^= z << 7 & mtTemperMask
	z ^= z << 15 & mtTemperC
	z ^= z >> 18
	return z
}
