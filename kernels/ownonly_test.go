package kernels

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/epbench/epbench/bf16"
)

// own_only_out (ll.cu) writes the output of a token whose only term is the
// own rank's partial as that partial's bf16 with every -0 half cleared, in
// place of bf16(0 + bf16(p)): the CPU reference adds the ranks' bf16 partials
// to a zero. These are the two lines of ll.cu that do it, one 32-bit word
// (two bf16 halves) at a time; clearNegZero2 below is them in Go.
const (
	ownOnlyNonzero = "const uint32_t nonzero = (w[i] & 0x7fff7fffu) + 0x7fff7fffu;"
	ownOnlyClear   = "w[i] &= nonzero | 0x7fff7fffu;"
)

func clearNegZero2(w uint32) uint32 {
	nonzero := (w & 0x7fff7fff) + 0x7fff7fff
	return w & (nonzero | 0x7fff7fff)
}

func TestOwnOnlyOutIsTheSumFromZero(t *testing.T) {
	src, err := os.ReadFile("ll.cu")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "uint4 own_only_out(")
	if start < 0 {
		t.Fatal("ll.cu: no own_only_out")
	}
	body := string(src[start:])
	body = body[:strings.Index(body, "\n}\n")]
	for _, line := range []string{ownOnlyNonzero, ownOnlyClear} {
		if !strings.Contains(body, line) {
			t.Fatalf("own_only_out no longer has %q: this test checks that formula", line)
		}
	}

	// The sum from zero, as the reference computes it for one bf16 value.
	fromZero := func(h uint16) uint16 { return bf16.FromFloat32(float32(0) + bf16.ToFloat32(h)) }
	isNaN := func(h uint16) bool { return math.IsNaN(float64(bf16.ToFloat32(h))) }
	changed := 0
	others := []uint16{0x0000, 0x8000, 0x0001, 0x8001, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7f7f, 0xffff &^ 0x0080}
	for x := 0; x < 1<<16; x++ {
		h := uint16(x)
		if isNaN(h) {
			continue // the GPU's NaN is the canonical one either way; the data holds none
		}
		if fromZero(h) != h {
			changed++
		}
		for _, o := range others {
			if isNaN(o) {
				continue
			}
			// h in the lower half, then in the upper: a half's result must not
			// depend on the other half.
			for _, w := range []uint32{uint32(o)<<16 | uint32(h), uint32(h)<<16 | uint32(o)} {
				got := clearNegZero2(w)
				want := uint32(fromZero(uint16(w>>16)))<<16 | uint32(fromZero(uint16(w)))
				if got != want {
					t.Fatalf("word %#08x: own_only_out gives %#08x, bf16(0 + x) per half %#08x", w, got, want)
				}
			}
		}
	}
	// The formula must matter: only -0 changes when added to +0.
	if changed != 1 || fromZero(0x8000) != 0 {
		t.Fatalf("%d bf16 values change when added to +0 (want 1, -0)", changed)
	}
}
