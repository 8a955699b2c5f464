package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
)

// resizingBackend is a fakeBackend that can be set up again (a Resizer).
type resizingBackend struct {
	fakeBackend
	shapes []ll.Shape
}

func (b *resizingBackend) SetShape(s ll.Shape) error { b.shapes = append(b.shapes, s); return nil }

// With -p, after the timed loop and inside the profiler's capture range:
// the set-up again in HandleCreate, then Iters pairs in the paired range,
// each operation in its own range, nested as ep_bench nests them; the
// kernel timer's window holds the timed pairs only.
func TestProfiledLoop(t *testing.T) {
	needMPI(t)
	cfg := loopConfig(3, 0)
	cfg.Profile = true
	var events []string
	depth := 0
	prof := &Profiler{
		Start: func() error { events = append(events, "start"); return nil },
		Stop:  func() error { events = append(events, "stop"); return nil },
		Push: func(name string) error {
			events = append(events, strings.Repeat(" ", depth)+name)
			depth++
			return nil
		},
		Pop: func() error {
			depth--
			if depth < 0 {
				return errors.New("pop without push")
			}
			return nil
		},
	}
	timer := &fakeTimer{}
	b := &resizingBackend{fakeBackend: fakeBackend{timer: timer}}
	shape := ll.Shape{Tokens: 7}
	var err error
	onMPI(func() {
		r := &Run{Cfg: cfg, Comm: mpi.World(), Backend: b, Kernel: timer, Profiler: prof, Shape: &shape}
		_, err = r.Loop()
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "HandleCreate", "Paired Dispatch+Combine Benchmark"}
	for range 3 {
		want = append(want, " Dispatch", " Combine")
	}
	want = append(want, "stop")
	if !slices.Equal(events, want) || depth != 0 {
		t.Errorf("profiled loop:\n%q\nwant\n%q (depth left %d)", events, want, depth)
	}
	if len(b.shapes) != 1 || b.shapes[0].Tokens != 7 {
		t.Errorf("HandleCreate set the backend up for %+v, want the run's shape once", b.shapes)
	}
	// 2 warm-up, 3 timed, 3 profiled pairs; the timer saw the 3 timed.
	if b.dispatches != 8 || b.combines != 8 || timer.timed != 3 {
		t.Errorf("%d dispatches, %d combines, %d timed by the kernel timer; want 8, 8, 3", b.dispatches, b.combines, timer.timed)
	}
}

// -p without a profiler fails clearly instead of skipping the loop.
func TestProfileNeedsAProfiler(t *testing.T) {
	needMPI(t)
	cfg := loopConfig(2, 0)
	cfg.Profile = true
	b := &fakeBackend{timer: &fakeTimer{}}
	var err error
	onMPI(func() {
		_, err = (&Run{Cfg: cfg, Comm: mpi.World(), Backend: b}).Loop()
	})
	if err == nil || !strings.Contains(err.Error(), "profile") {
		t.Errorf("-p without a profiler: %v", err)
	}
}
