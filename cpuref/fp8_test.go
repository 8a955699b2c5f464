package cpuref

import (
	"math"
	"testing"

	"github.com/epbench/epbench/bf16"
)

func TestToE4M3EdgeValues(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	cases := []struct {
		in   float32
		want uint8
	}{
		{0, 0x00},
		{negZero, 0x80},
		{1, 0x38},
		{-2, 0xC0},
		{448, 0x7E},                   // largest finite
		{-448, 0xFE},                  //
		{449, 0x7E},                   // satfinite: beyond 448 saturates
		{464, 0x7E},                   // the midpoint to the next binade still saturates
		{480, 0x7E},                   //
		{math.MaxFloat32, 0x7E},       //
		{float32(math.Inf(1)), 0x7E},  // infinities saturate too
		{float32(math.Inf(-1)), 0xFE}, //
		{float32(math.NaN()), 0x7F},   // NaN is 0x7F whatever its sign
		{-float32(math.NaN()), 0x7F},  //
		{432, 0x7E},                   // tie of 416 (0x7D) and 448 (0x7E): even code
		{math.Nextafter32(432, 0), 0x7D},
		{0x1p-6, 0x08},   // smallest normal
		{0x1.cp-7, 0x07}, // largest subnormal, 7 * 2^-9
		{0x1.ep-7, 0x08}, // 7.5 * 2^-9: tie, even code 0x08
		{0x1p-9, 0x01},   // smallest subnormal
		{-0x1p-9, 0x81},  //
		{0x1p-10, 0x00},  // half of it: tie, rounds to even zero
		{math.Nextafter32(0x1p-10, 1), 0x01},
		{-0x1p-10, 0x80},                 // ... keeping the sign
		{0x1.8p-9, 0x02},                 // 1.5 steps: tie to even 2
		{0x1.4p-8, 0x02},                 // 2.5 steps: tie to even 2
		{1e-30, 0x00},                    // far below: zero
		{math.SmallestNonzeroFloat32, 0}, // a float32 subnormal
		{1.0625, 0x38},                   // tie of 1 and 1.125: even 1
		{1.1875, 0x3A},                   // tie of 1.125 and 1.25: even 1.25
		{15.5, 0x58},                     // tie of 15 (0x57) and 16 (0x58): carries into the next binade
		{240, 0x77},
	}
	for _, c := range cases {
		if got := ToE4M3(c.in); got != c.want {
			t.Errorf("ToE4M3(%v) = %#02x, want %#02x", c.in, got, c.want)
		}
	}
}

func TestE4M3EveryCode(t *testing.T) {
	prev := float32(-1)
	for c := 0; c < 0x80; c++ {
		q := uint8(c)
		v := E4M3ToFloat32(q)
		if c == E4M3NaN {
			if !math.IsNaN(float64(v)) || !math.IsNaN(float64(E4M3ToFloat32(0xFF))) {
				t.Errorf("0x7F and 0xFF must decode to NaN")
			}
			break
		}
		if v <= prev && c > 0 {
			t.Errorf("code %#02x = %v is not above the previous %v", q, v, prev)
		}
		prev = v
		if got := ToE4M3(v); got != q {
			t.Errorf("code %#02x -> %v -> %#02x", q, v, got)
		}
		if neg := E4M3ToFloat32(q | 0x80); neg != -v || ToE4M3(neg) != q|0x80 {
			t.Errorf("code %#02x: negative %v -> %#02x", q|0x80, neg, ToE4M3(neg))
		}
		if c == 0x7E && v != E4M3Max {
			t.Errorf("0x7E = %v, want 448", v)
		}
		if c == 1 && v != 0x1p-9 {
			t.Errorf("0x01 = %v, want 2^-9", v)
		}
	}
}

// TestE4M3Midpoints: every value between two neighbouring codes goes to the
// nearer one, and exact midpoints to the code with a zero last bit.
func TestE4M3Midpoints(t *testing.T) {
	for c := 0; c < 0x7E; c++ {
		lo, hi := E4M3ToFloat32(uint8(c)), E4M3ToFloat32(uint8(c+1))
		mid := (lo + hi) / 2 // exact: a few significant bits
		even := uint8(c)
		if c%2 == 1 {
			even = uint8(c + 1)
		}
		for _, sign := range []float32{1, -1} {
			s := uint8(0)
			if sign < 0 {
				s = 0x80
			}
			if got := ToE4M3(sign * mid); got != s|even {
				t.Errorf("midpoint %v: %#02x, want %#02x", sign*mid, got, s|even)
			}
			if got := ToE4M3(sign * math.Nextafter32(mid, 0)); got != s|uint8(c) {
				t.Errorf("below midpoint %v: %#02x, want %#02x", sign*mid, got, s|uint8(c))
			}
			if got := ToE4M3(sign * math.Nextafter32(mid, 1000)); got != s|uint8(c+1) {
				t.Errorf("above midpoint %v: %#02x, want %#02x", sign*mid, got, s|uint8(c+1))
			}
		}
	}
}

// TestToE4M3Sweep compares ToE4M3 with a search for the nearest value over
// a million float32 patterns spread over every exponent.
func TestToE4M3Sweep(t *testing.T) {
	var vals [E4M3NaN]float64
	for c := range vals {
		vals[c] = float64(E4M3ToFloat32(uint8(c)))
	}
	nearest := func(a float64) uint8 {
		if a >= E4M3Max {
			return 0x7E
		}
		best := 0
		for c := 1; c < len(vals); c++ {
			d, bd := math.Abs(a-vals[c]), math.Abs(a-vals[best])
			if d < bd || (d == bd && c%2 == 0) {
				best = c
			}
		}
		return uint8(best)
	}
	lows := []uint32{0, 1, 0x7ff, 0x800, 0x801, 0xfff}
	for hi := uint32(0); hi < 1<<19; hi += 3 {
		for _, low := range lows {
			bits := hi<<12 | low
			f := math.Float32frombits(bits)
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				continue
			}
			if got, want := ToE4M3(f), nearest(float64(f)); got != want {
				t.Fatalf("ToE4M3(%v = %#08x) = %#02x, want %#02x", f, bits, got, want)
			}
		}
	}
}

func TestQuantizeRowPerBlock(t *testing.T) {
	row := make([]uint16, 384)
	for c := range 128 {
		row[c] = bf16.FromFloat32(-120) // block 0: amax 120
	}
	row[130] = bf16.FromFloat32(3) // block 1: amax 3, the rest 0
	// block 2: all zero, amax floored at 1e-4
	q := make([]uint8, 384)
	scales := make([]float32, 3)
	QuantizeRow(row, q, scales)

	inv0 := float32(448) / float32(120)
	if want := ToE4M3(float32(-120 * inv0)); q[0] != want || q[127] != want {
		t.Errorf("block 0 codes %#02x %#02x, want %#02x", q[0], q[127], want)
	}
	if scales[0] != float32(120)/448 || scales[1] != float32(3)/448 || scales[2] != MinAmax/448 {
		t.Errorf("scales %v", scales)
	}
	if q[130] != 0x7E || q[131] != 0 || q[300] != 0 {
		t.Errorf("block 1/2 codes %#02x %#02x %#02x", q[130], q[131], q[300])
	}
	deq := make([]uint16, 384)
	DequantizeRow(q, scales, deq)
	// -120 * 448/120 rounds to -448 (0xFE); dequantised -448 * (120/448)
	// rounds back to -120 in bf16.
	for _, c := range []int{0, 130, 131, 300} {
		if deq[c] != bf16.FromFloat32(float32(E4M3ToFloat32(q[c])*scales[c/128])) {
			t.Errorf("column %d: %#04x", c, deq[c])
		}
	}
	if bf16.ToFloat32(deq[0]) != -120 || bf16.ToFloat32(deq[130]) != 3 {
		t.Errorf("dequantised %v, %v; want -120, 3", bf16.ToFloat32(deq[0]), bf16.ToFloat32(deq[130]))
	}
}

func TestQuantizeRowShortBuffers(t *testing.T) {
	row := make([]uint16, 256)
	for c := range row {
		row[c] = bf16.FromFloat32(2)
	}
	q := make([]uint8, 200) // room for one block only
	scales := make([]float32, 2)
	QuantizeRow(row, q, scales)
	if q[0] != 0x7E || q[128] != 0 || scales[1] != 0 {
		t.Errorf("q[0]=%#02x q[128]=%#02x scales=%v: only block 0 should be written", q[0], q[128], scales)
	}
	dst := make([]uint16, 256)
	DequantizeRow(q, scales[:1], dst)
	if bf16.ToFloat32(dst[0]) != 2 || dst[128] != 0 {
		t.Errorf("dequantised %v, %#04x", bf16.ToFloat32(dst[0]), dst[128])
	}
}
