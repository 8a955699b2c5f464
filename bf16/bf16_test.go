package bf16

import (
	"math"
	"math/rand/v2"
	"testing"
)

// nearest is an independent reference: it picks between the two bfloat16
// neighbours of a finite f by comparing distances in float64.
func nearest(f float32) uint16 {
	lo := Truncate(f) // toward zero
	hi := lo + 1      // next bfloat16 away from zero (may be an infinity)
	dl := math.Abs(float64(f) - float64(ToFloat32(lo)))
	var dh float64
	if hi&0x7fff == 0x7f80 {
		// The "next" value is an infinity: it wins when f reaches the
		// midpoint between the largest finite bfloat16 and 2^128.
		maxFinite := math.Abs(float64(ToFloat32(lo)))
		mid := maxFinite + (math.Ldexp(1, 128)-maxFinite)/2
		if math.Abs(float64(f)) >= mid {
			return hi
		}
		return lo
	}
	dh = math.Abs(float64(ToFloat32(hi)) - float64(f))
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	default:
		return hi
	}
}

func TestFromFloat32MatchesNearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2_000_000; i++ {
		b := r.Uint32()
		f := math.Float32frombits(b)
		if f != f {
			continue
		}
		if got, want := FromFloat32(f), nearest(f); got != want {
			t.Fatalf("FromFloat32(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
}

func TestFromFloat32Cases(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"minus 128", -128, 0xc300},
		{"255", 255, 0x437f},
		{"tie rounds down to even", 1 + 1.0/256, 0x3f80},
		{"tie rounds up to even", 1 + 3.0/256, 0x3f82},
		{"above tie rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"max float32 overflows", math.MaxFloat32, 0x7f80},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"smallest subnormal", math.Float32frombits(1), 0x0000},
		{"infinity", float32(math.Inf(-1)), 0xff80},
	}
	for _, c := range cases {
		if got := FromFloat32(c.in); got != c.want {
			t.Errorf("%s: FromFloat32(%v) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
}

func TestNaNStaysNaN(t *testing.T) {
	// Payload only in the low half: truncation would give an infinity.
	for _, b := range []uint32{0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff} {
		h := FromFloat32(math.Float32frombits(b))
		if f := ToFloat32(h); f == f {
			t.Errorf("FromFloat32(%#08x) = %#04x, not a NaN", b, h)
		}
		if h>>15 != uint16(b>>31) {
			t.Errorf("FromFloat32(%#08x) = %#04x lost the sign", b, h)
		}
	}
}

func TestRoundTripAllBF16(t *testing.T) {
	for h := 0; h <= 0xffff; h++ {
		f := ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := FromFloat32(f); got != uint16(h) {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)) = %#04x", h, got)
		}
		if got := Truncate(f); got != uint16(h) {
			t.Fatalf("Truncate(ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate(math.Float32frombits(0x3f80ffff)); got != 0x3f80 {
		t.Errorf("Truncate rounded: got %#04x", got)
	}
	if got := Truncate(-1.999); got != 0xbfff {
		t.Errorf("Truncate(-1.999) = %#04x, want 0xbfff", got)
	}
}

func TestSlices(t *testing.T) {
	src := []float32{1, -2, 0.5}
	dst := make([]uint16, 2)
	if n := FromFloat32Slice(dst, src); n != 2 || dst[0] != 0x3f80 || dst[1] != 0xc000 {
		t.Errorf("FromFloat32Slice = %d %#04x", n, dst)
	}
	back := make([]float32, 4)
	if n := ToFloat32Slice(back, dst); n != 2 || back[0] != 1 || back[1] != -2 {
		t.Errorf("ToFloat32Slice = %d %v", n, back)
	}
}
