package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
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

// traceCalls is the stamps of `calls` calls of `grid` blocks, call c's
// written by fill(c, base, put), base being the call's time in ns.
func traceCalls(grid, calls int, fill func(c int, base uint64, put func(b, i int, ns uint64))) [][]byte {
	slots := make([][]byte, calls)
	for c := range slots {
		slots[c] = make([]byte, grid*TracePoints*8)
		fill(c, uint64(1000000*(c+1)), func(b, i int, ns uint64) {
			binary.LittleEndian.PutUint64(slots[c][8*(b*TracePoints+i):], ns)
		})
	}
	return slots
}

func TestTraceBlocks(t *testing.T) {
	const grid, calls = 4, 6
	slots := traceCalls(grid, calls, func(c int, base uint64, put func(b, i int, ns uint64)) {
		for b := 0; b < grid; b++ {
			put(b, 0, base+uint64(b)*10)
			// "sent": block b is late by b us in every call, plus 0 or 0.1 us
			// that changes from call to call.
			put(b, 1, base+uint64(2000+1000*b+100*((b+c)%2)))
			// "signalled": the order of the blocks changes every call.
			put(b, 2, base+uint64(3000+1000*((b+c)%grid)))
		}
		// block 3 misses "end" in call 2: that phase has blocks 0..2 only.
		for b := 0; b < grid; b++ {
			if b != 3 || c != 2 {
				put(b, 4, base+uint64(9000+100*b))
			}
		}
	})
	var out bytes.Buffer
	TraceBlocks(&out, 0, "dispatch", DispatchPhases, slots, grid)
	got := out.String()
	line := func(phase string) string {
		for _, l := range strings.Split(got, "\n") {
			if strings.Contains(l, "dispatch "+phase+" ") {
				return l
			}
		}
		t.Fatalf("no %q line in\n%s", phase, got)
		return ""
	}
	if l := line("sent"); !strings.Contains(l, "4 blocks") || !strings.Contains(l, "block means 2.05..5.05 us") ||
		!strings.Contains(l, "halves r 1.00 (later half of the blocks 1.00)") || !strings.Contains(l, "latest 3 (5.05), 2 (4.05), 1 (3.05), 0 (2.05)") {
		t.Errorf("consistent lateness: %s", l)
	}
	if l := line("signalled"); !strings.Contains(l, "spread in a call 3.00 us") || strings.Contains(l, "halves r 1.00") {
		t.Errorf("lateness that moves between blocks: %s", l)
	}
	if l := line("end"); !strings.Contains(l, "3 blocks") {
		t.Errorf("a block that missed the phase in one call is counted: %s", l)
	}
	if strings.Contains(got, "sources arrived") {
		t.Errorf("a phase no block reached is printed:\n%s", got)
	}
	out.Reset()
	TraceBlocks(&out, 0, "dispatch", DispatchPhases, slots[:1], grid)
	if out.Len() != 0 {
		t.Errorf("one call prints %q", out.String())
	}
	if r := correlation([]float64{1, 2, 3}, []float64{3, 2, 1}); math.Abs(r+1) > 1e-12 {
		t.Errorf("correlation of reversed = %v", r)
	}
}

// A block without work, early in every call, makes the blocks' means agree
// between the halves of the calls by itself; the later half of the blocks
// shows that the late ones change from call to call.
func TestTraceBlocksIdleBlock(t *testing.T) {
	const grid, calls = 9, 8
	slots := traceCalls(grid, calls, func(c int, base uint64, put func(b, i int, ns uint64)) {
		for b := 0; b < grid; b++ {
			put(b, 0, base)
			end := uint64(500)
			if b > 0 {
				end = uint64(5000 + 1000*((b+3*c)%8))
			}
			put(b, 4, base+end)
		}
	})
	var out bytes.Buffer
	TraceBlocks(&out, 0, "dispatch", DispatchPhases, slots, grid)
	var all, later float64
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "dispatch end ") {
			if _, err := fmt.Sscanf(l[strings.Index(l, "halves r"):], "halves r %f (later half of the blocks %f)", &all, &later); err != nil {
				t.Fatalf("%v in %q", err, l)
			}
		}
	}
	if all < 0.5 || later > 0.5 {
		t.Errorf("halves r %.2f (all), %.2f (later half): want the idle block to raise the first only\n%s", all, later, out.String())
	}
}
