package bench

import (
	"strings"
	"testing"
)

func TestHostTraceOffsets(t *testing.T) {
	n := len(hostPoints)
	// Two iterations; the first is dropped. Rank 1 gets to every point
	// 3 us after rank 0, except the dispatch launch, 7 us after.
	r0 := make([]int64, 2*n)
	r1 := make([]int64, 2*n)
	for i := 0; i < 2; i++ {
		for k := 0; k < n; k++ {
			r0[i*n+k] = int64(i*100_000 + k*10_000)
			r1[i*n+k] = r0[i*n+k] + 3_000
		}
		r1[i*n+1] += 4_000
	}
	r1[0] += 1_000_000 // dropped iteration
	var b strings.Builder
	writeHostTrace(&b, [][]int64{r0, r1})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), n, b.String())
	}
	for k, want := range []string{
		"rank 1:    +3.00 us after rank 0,    0.00 us since the last point",
		"rank 1:    +7.00 us after rank 0,   14.00 us since the last point",
		"rank 1:    +3.00 us after rank 0,    6.00 us since the last point",
	} {
		if !strings.Contains(lines[k], hostPoints[k]) || !strings.Contains(lines[k], want) {
			t.Errorf("line %d = %q, want %q in it", k, lines[k], want)
		}
	}
	if !strings.Contains(lines[1], "rank 0:    +0.00 us after rank 0,   10.00 us since the last point") {
		t.Errorf("rank 0's line: %q", lines[1])
	}
}

func TestHostTraceOffNoStamps(t *testing.T) {
	var h *hostTrace
	h.stamp(0, 0) // a nil trace records nothing, and does not fail
	var b strings.Builder
	writeHostTrace(&b, nil)
	if b.Len() != 0 {
		t.Fatalf("wrote %q for no ranks", b.String())
	}
}
