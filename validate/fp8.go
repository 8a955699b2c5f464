package validate

import (
	"math"
	"sort"

	"github.com/epbench/epbench/bf16"
)

// FP8 E4M3 (the "fn" variant: no infinities, 0x7F/0xFF are NaN).
const (
	e4m3Max    = 448
	e4m3NaN    = 0x7F
	e4m3MaxPos = 0x7E
)

// e4m3Positive[c] is the value of the non-negative E4M3 code c, for the 127
// codes below the NaN; it increases with c.
var e4m3Positive = func() [e4m3NaN]float64 {
	var v [e4m3NaN]float64
	for c := range v {
		exp, man := c>>3, c&7
		if exp == 0 {
			v[c] = math.Ldexp(float64(man), -9)
		} else {
			v[c] = math.Ldexp(float64(8+man), exp-10)
		}
	}
	return v
}()

// toE4M3 converts f as PTX cvt.rn.satfinite.e4m3x2.f32 does: round to the
// nearest code, ties to the even code; magnitudes beyond 448 (infinities
// included) saturate to ±448; NaN gives 0x7F. It searches the value table
// rather than manipulating bits, to stay independent of the backends'
// converters.
func toE4M3(f float32) uint8 {
	a := math.Abs(float64(f))
	if math.IsNaN(a) {
		return e4m3NaN
	}
	var sign uint8
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	if a >= e4m3Max {
		return sign | e4m3MaxPos
	}
	hi := sort.SearchFloat64s(e4m3Positive[:], a) // first code with value >= a
	if e4m3Positive[hi] == a {
		return sign | uint8(hi)
	}
	lo := hi - 1
	// The midpoint of two E4M3 values is exact in float64.
	mid := (e4m3Positive[lo] + e4m3Positive[hi]) / 2
	switch {
	case a < mid:
		return sign | uint8(lo)
	case a > mid:
		return sign | uint8(hi)
	case lo%2 == 0:
		return sign | uint8(lo)
	}
	return sign | uint8(hi)
}

// fromE4M3 is the exact value of code q.
func fromE4M3(q uint8) float32 {
	c := q & 0x7F
	if c == e4m3NaN {
		return float32(math.NaN())
	}
	v := float32(e4m3Positive[c])
	if q&0x80 != 0 {
		return -v
	}
	return v
}

// minAmax is the floor of a block's absolute maximum in FP8 quantisation.
const minAmax float32 = 1e-4

// quantizeRow quantises a bf16 row per docs/DESIGN.md into q (len(row)
// bytes) and scales (len(row)/128 values).
func quantizeRow(row []uint16, q []uint8, scales []float32) {
	for b := range scales {
		block := row[b*channelsPerScale : (b+1)*channelsPerScale]
		amax := float32(0)
		for _, h := range block {
			if a := float32(math.Abs(float64(bf16.ToFloat32(h)))); a > amax {
				amax = a
			}
		}
		if amax < minAmax {
			amax = minAmax
		}
		inv := float32(e4m3Max) / amax
		for c, h := range block {
			q[b*channelsPerScale+c] = toE4M3(float32(bf16.ToFloat32(h) * inv))
		}
		scales[b] = amax / float32(e4m3Max)
	}
}

// dequantizeRow is the identity expert's output for an FP8 row:
// bf16(fp32(decode(q) * scale)), one rounded multiply, then bf16 rounding.
func dequantizeRow(q []uint8, scales []float32, dst []uint16) {
	for c, v := range q {
		dst[c] = bf16.FromFloat32(float32(fromE4M3(v) * scales[c/channelsPerScale]))
	}
}
