package routing

import (
	"fmt"
	"math"
)

// CanonicalFloat32 is std::generate_canonical<float, 24>(g) in libstdc++:
// a float has 24 significand bits and one 32-bit draw supplies them, so it
// consumes exactly one output. The draw is rounded to float (to nearest) and
// divided by 2^32; draws that round up to 2^32 would give 1, which the
// library replaces with the largest float below 1.
func CanonicalFloat32(g *MT19937) float32 {
	return canonicalFromDraw(g.Uint32())
}

func canonicalFromDraw(draw uint32) float32 {
	u := float32(draw) / 0x1p32
	if u >= 1 {
		u = math.Nextafter32(1, 0)
	}
	return u
}

// NormalFloat32 is std::normal_distribution<float>(0, 1) in libstdc++: the
// Marsaglia polar method, which makes two values per accepted pair, returns
// one and keeps the other for the next call. The zero value is ready to use.
//
// The arithmetic is float except where libstdc++ mixes in double literals:
// 2*u - 1.0 is evaluated in double and rounded back to float. Explicit float32
// conversions keep Go from fusing multiply-adds the C++ code does not fuse.
type NormalFloat32 struct {
	saved    float32
	hasSaved bool
}

// Next returns the next standard normal value drawn from g.
func (n *NormalFloat32) Next(g *MT19937) float32 {
	var ret float32
	if n.hasSaved {
		n.hasSaved = false
		ret = n.saved
	} else {
		var x, y, r2 float32
		for {
			x = float32(float64(2*CanonicalFloat32(g)) - 1.0)
			y = float32(float64(2*CanonicalFloat32(g)) - 1.0)
			r2 = float32(x*x) + float32(y*y)
			if r2 <= 1 && r2 != 0 {
				break
			}
		}
		q := float32(-2*glibcLogf(r2)) / r2
		mult := float32(math.Sqrt(float64(q)))
		n.saved = float32(x * mult)
		n.hasSaved = true
		ret = float32(y * mult)
	}
	// ret*stddev + mean with (1, 0), kept because it turns -0 into +0.
	return float32(ret*1) + 0
}

// Reset drops the cached value, like normal_distribution::reset().
func (n *NormalFloat32) Reset() { n.hasSaved = false }

// UniformUint32 is std::uniform_int_distribution<unsigned>(a, b) in libstdc++
// from GCC 11 on. A range narrower than 2^32 uses Lemire's multiply-and-reject
// on one 32-bit draw per attempt, so even a one-value range consumes a draw;
// the full range returns a draw as it is.
type UniformUint32 struct {
	a, b uint32
}

// NewUniformUint32 returns the distribution over [a, b]; a > b is an error
// (undefined behaviour in C++).
func NewUniformUint32(a, b uint32) (UniformUint32, error) {
	if a > b {
		return UniformUint32{}, fmt.Errorf("uniform int distribution: a=%d > b=%d", a, b)
	}
	return UniformUint32{a: a, b: b}, nil
}

// Next returns the next value in [a, b] drawn from g.
func (u UniformUint32) Next(g *MT19937) uint32 {
	span := u.b - u.a
	if span == math.MaxUint32 {
		return g.Uint32() + u.a
	}
	n := span + 1
	product := uint64(g.Uint32()) * uint64(n)
	low := uint32(product)
	if low < n {
		threshold := -n % n
		for low < threshold {
			product = uint64(g.Uint32()) * uint64(n)
			low = uint32(product)
		}
	}
	return uint32(product>>32) + u.a
}
