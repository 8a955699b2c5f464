package kernels

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestTracePhasesFitTheStampSlots(t *testing.T) {
	for _, p := range [][]string{DispatchPhases, CombinePhases} {
		if len(p) > TracePoints {
			t.Errorf("%d phase names for %d stamp slots: %q", len(p), TracePoints, p)
		}
	}
}

func TestTraceSummary(t *testing.T) {
	const grid = 2
	raw := make([]byte, grid*TracePoints*8)
	put := func(b, i int, ns uint64) { binary.LittleEndian.PutUint64(raw[8*(b*TracePoints+i):], ns) }
	put(0, 0, 1000)
	put(1, 0, 3000)
	put(0, 1, 5000)
	put(1, 1, 9000)
	// block 1 never reached phase 2
	put(0, 2, 11000)
	// phase 5 ("rows sent") comes before phase 1 in time
	put(0, 5, 2000)
	var out bytes.Buffer
	TraceSummary(&out, 1, "dispatch", DispatchPhases, raw, grid)
	got := out.String()
	if r, s := strings.Index(got, "dispatch rows sent "), strings.Index(got, "dispatch sent "); r < 0 || s < 0 || r > s {
		t.Errorf("phases not in time order:\n%s", got)
	}
	for _, want := range []string{
		"trace rank 1 dispatch start            blocks   2  min    0.00  avg    1.00  max    2.00 us",
		"trace rank 1 dispatch sent             blocks   2  min    4.00  avg    6.00  max    8.00 us",
		"trace rank 1 dispatch signalled        blocks   1  min   10.00  avg   10.00  max   10.00 us",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "sources arrived") {
		t.Errorf("a phase no block reached is printed:\n%s", got)
	}
	out.Reset()
	TraceSummary(&out, 0, "combine", CombinePhases, make([]byte, len(raw)), grid)
	if out.Len() != 0 {
		t.Errorf("an empty trace prints %q", out.String())
	}
}

func TestTraceSpan(t *testing.T) {
	const grid = 2
	raw := make([]byte, grid*TracePoints*8)
	put := func(b, i int, ns uint64) { binary.LittleEndian.PutUint64(raw[8*(b*TracePoints+i):], ns) }
	if s, e := TraceSpan(raw, grid); s != 0 || e != 0 {
		t.Fatalf("empty call: %d %d", s, e)
	}
	put(1, 0, 3000)
	put(0, 0, 2000)
	put(0, 4, 9000)
	put(1, 2, 12000) // a later phase of another block is the end
	if s, e := TraceSpan(raw, grid); s != 2000 || e != 12000 {
		t.Fatalf("TraceSpan = %d, %d; want 2000, 12000", s, e)
	}
}
