package cpuref

import (
	"math"

	"github.com/epbench/epbench/bf16"
)

// FP8 E4M3 ("fn": 4 exponent bits with bias 7, 3 mantissa bits, no
// infinities; S.1111.111 is NaN).
const (
	// E4M3Max is the largest finite E4M3 magnitude.
	E4M3Max = 448
	// E4M3NaN is the NaN code the conversion produces.
	E4M3NaN = 0x7F
	// ScaleBlock is how many channels share one FP8 scale.
	ScaleBlock = 128
	// MinAmax floors a block's absolute maximum before scaling.
	MinAmax float32 = 1e-4
)

// ToE4M3 converts f the way PTX cvt.rn.satfinite.e4m3x2.f32 does: round to
// nearest, ties to even; finite magnitudes past 448 and infinities saturate
// to ±448; NaN becomes 0x7F. Results below half the smallest subnormal
// (2^-10) become a zero of f's sign.
func ToE4M3(f float32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := math.Float32frombits(b &^ (1 << 31))
	switch {
	case a != a:
		return E4M3NaN
	case a >= E4M3Max:
		return sign | 0x7E
	case a == 0:
		return sign
	}
	// E4M3 exponents run from -6 (normal and subnormal share it) to 8; the
	// spacing of values at exponent e is 2^(e-3).
	exp := int(b>>23&0xff) - 127
	if exp < -6 {
		exp = -6
	}
	// Scaling by a power of two is exact, so n carries one rounding only.
	n := int(math.RoundToEven(math.Ldexp(float64(a), 3-exp)))
	if n == 16 { // rounded up into the next binade
		exp++
		n = 8
	}
	if n < 8 { // subnormal or zero: exponent field 0
		return sign | uint8(n)
	}
	return sign | uint8(exp+7)<<3 | uint8(n-8)
}

// E4M3ToFloat32 is the exact value of an E4M3 code.
func E4M3ToFloat32(q uint8) float32 {
	exp, man := int(q>>3&0xf), int(q&7)
	if exp == 0xf && man == 7 {
		return float32(math.NaN())
	}
	var v float32
	if exp == 0 {
		v = float32(math.Ldexp(float64(man), -9))
	} else {
		v = float32(math.Ldexp(float64(8+man), exp-10))
	}
	if q&0x80 != 0 {
		v = -v
	}
	return v
}

// QuantizeRow quantises one bf16 row per docs/DESIGN.md: for each block of
// 128 channels, amax = max(max|x|, 1e-4), q = ToE4M3(x * (448/amax)) with the
// division and the multiply each one rounded fp32 operation, and scale =
// amax/448. It converts the whole 128-channel blocks that row, q and scales
// all have room for.
func QuantizeRow(row []uint16, q []uint8, scales []float32) {
	blocks := min(len(row), len(q)) / ScaleBlock
	for b := range min(blocks, len(scales)) {
		lo := b * ScaleBlock
		block := row[lo : lo+ScaleBlock]
		amax := MinAmax
		for _, h := range block {
			amax = max(amax, bf16.ToFloat32(h&0x7fff))
		}
		inv := float32(E4M3Max) / amax
		qb := q[lo : lo+ScaleBlock]
		for c, h := range block {
			qb[c] = ToE4M3(float32(bf16.ToFloat32(h) * inv))
		}
		scales[b] = amax / E4M3Max
	}
}

// DequantizeRow writes the identity expert's output for an FP8 row,
// bf16(fp32(decode(q) * scale)), into dst, for the channels that q, dst
// and scales all cover.
func DequantizeRow(q []uint8, scales []float32, dst []uint16) {
	n := min(len(q), len(dst), len(scales)*ScaleBlock)
	for c, v := range q[:n] {
		dst[c] = bf16.FromFloat32(float32(E4M3ToFloat32(v) * scales[c/ScaleBlock]))
	}
}
