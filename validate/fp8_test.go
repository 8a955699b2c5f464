package validate

import (
	"math"
	"testing"

	"github.com/epbench/epbench/bf16"
)

func TestToE4M3KnownValues(t *testing.T) {
	cases := []struct {
		in   float32
		want uint8
	}{
		{0, 0x00},
		{float32(math.Copysign(0, -1)), 0x80},
		{1, 0x38},
		{-1, 0xB8},
		{448, 0x7E},
		{-448, 0xFE},
		{464, 0x7E}, // beyond the largest finite value: saturates
		{1e30, 0x7E},
		{float32(math.Inf(1)), 0x7E},
		{float32(math.Inf(-1)), 0xFE},
		{float32(math.NaN()), 0x7F},
		{0x1p-9, 0x01},            // smallest subnormal
		{0x1p-10, 0x00},           // half of it: tie to the even code 0
		{0x1.8p-9, 0x02},          // 1.5 subnormal steps: tie to even 2
		{0x1p-6, 0x08},            // smallest normal
		{432, 0x7E},               // tie between 416 and 448: 448 has the even code
		{424, 0x7D},               // nearer 416
		{240, 0x77},               // 15 * 16
		{float32(-0x1p-12), 0x80}, // rounds to a negative zero
	}
	for _, c := range cases {
		if got := toE4M3(c.in); got != c.want {
			t.Errorf("toE4M3(%v) = %#02x, want %#02x", c.in, got, c.want)
		}
	}
}

func TestE4M3RoundTrip(t *testing.T) {
	for c := 0; c < 256; c++ {
		q := uint8(c)
		v := fromE4M3(q)
		if q&0x7F == e4m3NaN {
			if !math.IsNaN(float64(v)) {
				t.Errorf("code %#02x decodes to %v, want NaN", q, v)
			}
			continue
		}
		if got := toE4M3(v); got != q {
			t.Errorf("code %#02x -> %v -> %#02x", q, v, got)
		}
	}
}

func TestQuantizeRowFloorsAmax(t *testing.T) {
	row := make([]uint16, 256)
	for c := range 128 {
		row[c] = bf16.FromFloat32(-128) // amax 128: 448/128 = 3.5 exactly
	}
	// The second block is all zeros: amax is floored at 1e-4.
	q := make([]uint8, 256)
	scales := make([]float32, 2)
	quantizeRow(row, q, scales)
	if q[0] != 0xFE || scales[0] != float32(128)/448 {
		t.Errorf("block 0: q %#02x scale %v, want 0xfe and %v", q[0], scales[0], float32(128)/448)
	}
	if q[128] != 0 || scales[1] != minAmax/448 {
		t.Errorf("block 1: q %#02x scale %v, want 0 and %v", q[128], scales[1], minAmax/448)
	}
	deq := make([]uint16, 256)
	dequantizeRow(q, scales, deq)
	if deq[0] != bf16.FromFloat32(-128) || deq[200] != 0 {
		t.Errorf("dequantised %v and %v, want -128 and 0", bf16.ToFloat32(deq[0]), bf16.ToFloat32(deq[200]))
	}
}
