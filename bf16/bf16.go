// Package bf16 converts between float32 and bfloat16 bit patterns.
//
// A bfloat16 value is the upper half of a float32, so values are carried as
// uint16 bit patterns, the way token buffers hold them on the device.
package bf16

import "math"

// FromFloat32 rounds f to the nearest bfloat16, ties to even, as the CUDA
// __float2bfloat16 intrinsic does. Values beyond the largest finite bfloat16
// round to an infinity. A NaN stays a NaN: its sign and top payload bits are
// kept and the quiet bit is set, because dropping the low payload bits could
// otherwise turn it into an infinity.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	// Adding 0x7fff plus the lowest kept bit carries into the kept half
	// exactly when the dropped half is above one half, or equal to it with an
	// odd kept half.
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Truncate drops the low 16 bits of f (round toward zero). NCCL's ep_bench
// (contrib/nccl_ep, v2.30.7) builds its validation tokens this way; for the
// small integers it encodes, the result equals FromFloat32's.
func Truncate(f float32) uint16 {
	return uint16(math.Float32bits(f) >> 16)
}

// ToFloat32 widens a bfloat16 bit pattern to float32; the conversion is exact.
func ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// FromFloat32Slice converts src into dst with FromFloat32 and returns the
// number of elements written, min(len(dst), len(src)).
func FromFloat32Slice(dst []uint16, src []float32) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = FromFloat32(src[i])
	}
	return n
}

// ToFloat32Slice converts src into dst with ToFloat32 and returns the number
// of elements written, min(len(dst), len(src)).
func ToFloat32Slice(dst []float32, src []uint16) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = ToFloat32(src[i])
	}
	return n
}
