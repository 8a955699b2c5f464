package bench

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/mpi"
)

// fakeBackend records what the runner asks of it; its outputs say whether
// the last pair wrote them after a Poison, and which generation it ran on.
type fakeBackend struct {
	timer                *fakeTimer
	dispatches, combines int
	syncs                int
	poisons, shared      int
	poisoned             bool
	gen, pairGen         int   // the generation set, and the one the last dispatch read
	gens                 []int // the generation of every validated pair's dispatch
	marks                int
	gcAtDispatch         []int // the garbage collector's setting at each dispatch
	gcAtCheck            []int // and at each check of a validated pair's outputs
}

// gcPercent is the garbage collector's setting (debug.SetGCPercent's).
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func (b *fakeBackend) Name() string { return "fake" }
func (b *fakeBackend) Dispatch(int) error {
	b.dispatches++
	b.gcAtDispatch = append(b.gcAtDispatch, gcPercent())
	b.timer.launched()
	b.poisoned = false
	b.pairGen = b.gen
	if b.gen != 0 {
		b.gens = append(b.gens, b.gen)
	}
	return nil
}
func (b *fakeBackend) Combine(int) error { b.combines++; return nil }
func (b *fakeBackend) Sync() error       { b.syncs++; return nil }
func (b *fakeBackend) Marks(n int) error { b.marks = n; return nil }
func (b *fakeBackend) Mark(i int) error {
	if i < 0 || i >= b.marks {
		return fmt.Errorf("mark %d of %d", i, b.marks)
	}
	return nil
}
func (b *fakeBackend) ElapsedUs(int, int) (float64, error) { return 1, nil }
func (b *fakeBackend) Generation(g int) error              { b.gen = g; return nil }
func (b *fakeBackend) Poison(shared bool) error {
	b.poisons++
	if shared {
		b.shared++
	}
	b.poisoned = true
	return nil
}
func (b *fakeBackend) Close() error { return nil }
func (b *fakeBackend) Snapshot() (func() (*ll.Outputs, error), error) {
	out := &ll.Outputs{Out: []uint16{1}, SrcInfo: []int32{int32(b.pairGen)}}
	if b.poisoned {
		out.Out[0] = 0x7FC1
	}
	return func() (*ll.Outputs, error) { return out, nil }, nil
}

// fakeTimer checks, like the CUPTI collector, that each window's kernel
// count is the launches the runner says it made.
type fakeTimer struct {
	on                bool
	inWindow, windows int
	timed             int
	// Start takes delay; the wall clock (ns) when each Start returned and
	// at each window's first launch.
	delay                  time.Duration
	startDone, firstLaunch []int64
}

func (k *fakeTimer) launched() {
	if k.on {
		if k.inWindow == 0 {
			k.firstLaunch = append(k.firstLaunch, time.Now().UnixNano())
		}
		k.inWindow++
	}
}
func (k *fakeTimer) Start() error {
	time.Sleep(k.delay)
	k.startDone = append(k.startDone, time.Now().UnixNano())
	k.on, k.inWindow = true, 0
	return nil
}
func (k *fakeTimer) Stop(d, c int) (float64, float64, error) {
	k.on = false
	k.windows++
	if d != k.inWindow || c != k.inWindow {
		return 0, 0, fmt.Errorf("window of %d launches reported as %d/%d", k.inWindow, d, c)
	}
	k.timed += d
	return 2, 3, nil
}

func loopConfig(iters, every int) *config.Config {
	cfg := config.Default()
	cfg.Warmup, cfg.Iters, cfg.ValidateEvery, cfg.TimeoutMs = 2, iters, every, 20000
	return cfg
}

// runLoop runs Loop on every rank with a fake backend; failOn (rank, check)
// makes that rank's check number check fail.
func runLoop(cfg *config.Config, failRank, failCheck int) (*Measurement, *fakeBackend, *fakeTimer, error) {
	var m *Measurement
	var err error
	timer := &fakeTimer{}
	b := &fakeBackend{timer: timer}
	onMPI(func() {
		c := mpi.World()
		checks := 0
		r := &Run{Cfg: cfg, Comm: c, Backend: b, Kernel: timer,
			Validate: func(o *ll.Outputs, j, gen int, _ []bool) (Check, error) {
				checks++
				b.gcAtCheck = append(b.gcAtCheck, gcPercent())
				if o.Out[0] != 1 {
					return Check{Detail: fmt.Sprintf("rank %d: outputs still poisoned", c.Rank())}, nil
				}
				if int(o.SrcInfo[0]) != gen {
					return Check{Detail: fmt.Sprintf("rank %d: the pair ran on generation %d, checked as %d", c.Rank(), o.SrcInfo[0], gen)}, nil
				}
				if c.Rank() == failRank && checks == failCheck {
					return Check{DispatchOK: false, CombineOK: true, Detail: fmt.Sprintf("rank %d, expert 1 (local 0), row 2: bad", c.Rank())}, nil
				}
				return Check{DispatchOK: true, CombineOK: true}, nil
			}}
		m, err = r.Loop()
	})
	return m, b, timer, err
}

func TestLoopValidatesEveryN(t *testing.T) {
	needMPI(t)
	m, b, timer, err := runLoop(loopConfig(10, 3), -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.DispatchUs) != 10 || !m.KernelOK || m.KernelDispatchUs != 2 || m.KernelCombineUs != 3 {
		t.Errorf("measurement %+v", m)
	}
	// Warm-up, timed pairs, and a validated pair after iterations 3, 6, 9,
	// each on a generation of its own, with the symmetric areas poisoned.
	if b.dispatches != 2+10+3 || b.combines != 2+10+3 || b.poisons != 3 || b.shared != 3 {
		t.Errorf("%d dispatches, %d combines, %d poisons (%d shared); want 15, 15, 3 (3)", b.dispatches, b.combines, b.poisons, b.shared)
	}
	if !slices.Equal(b.gens, []int{1, 2, 3}) || b.gen != 0 {
		t.Errorf("validated pairs on generations %v, then %d; want 1, 2, 3, then 0", b.gens, b.gen)
	}
	if timer.timed != 10 || timer.windows != 4 {
		t.Errorf("kernel timing covered %d pairs in %d windows, want 10 in 4", timer.timed, timer.windows)
	}
}

func TestLoopValidationFailureStopsEveryRank(t *testing.T) {
	needMPI(t)
	size := 0
	onMPI(func() { size = mpi.World().Size() })
	_, b, _, err := runLoop(loopConfig(10, 3), size-1, 2)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%v, want a *ValidationError", err)
	}
	if ve.After != 6 || !slices.Equal(ve.Ranks, []int{size - 1}) {
		t.Errorf("%+v, want the check after 6 iterations failing on rank %d", *ve, size-1)
	}
	if b.dispatches != 2+6+2 {
		t.Errorf("%d dispatches, want the loop to stop at the failed check (10)", b.dispatches)
	}
	want := fmt.Sprintf("validation after 6 timed iterations failed on rank %d", size-1)
	if got := err.Error(); got != want && got != want+fmt.Sprintf(": rank %d, expert 1 (local 0), row 2: bad", size-1) {
		t.Errorf("message %q", got)
	}
}

// What the configuration asks of a backend that cannot do it is refused
// before anything runs: no rank is left waiting in a barrier for it.
func TestLoopRefusesWhatTheBackendCannotDo(t *testing.T) {
	needMPI(t)
	for _, c := range []struct {
		set  func(*config.Config)
		want string
	}{
		{func(c *config.Config) { c.Validate = true }, "validation requested but the backend has no validator"},
		{func(c *config.Config) { c.ValidateEvery = 2 }, "validation requested but the backend has no validator"},
		{func(c *config.Config) { c.MaskTest = true }, "-T/--mask-test: this backend has no mask of active ranks"},
	} {
		cfg := loopConfig(4, 0)
		c.set(cfg)
		b := &fakeBackend{timer: &fakeTimer{}}
		var err error
		onMPI(func() { _, err = (&Run{Cfg: cfg, Comm: mpi.World(), Backend: b}).Loop() })
		if err == nil || err.Error() != c.want {
			t.Errorf("%v, want %q", err, c.want)
		}
		if b.marks != 0 || b.dispatches != 0 {
			t.Errorf("%q: %d marks set, %d dispatches before the refusal", c.want, b.marks, b.dispatches)
		}
	}
}

func TestLoopFaultSkipsOperation(t *testing.T) {
	needMPI(t)
	rank, size := 0, 0
	onMPI(func() { rank, size = mpi.World().Rank(), mpi.World().Size() })
	for _, f := range []config.Fault{{Op: config.FaultCombine, Rank: 0}, {Op: config.FaultDispatch, Rank: size - 1}} {
		cfg := loopConfig(4, 0)
		cfg.Fault = f
		_, b, _, err := runLoop(cfg, -1, 0)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		d, c := 6, 6
		if f.Rank == rank {
			c = 0
			if f.Op == config.FaultDispatch {
				d = 0
			}
		}
		if b.dispatches != d || b.combines != c {
			t.Errorf("%v on rank %d: %d dispatches, %d combines; want %d, %d", f, rank, b.dispatches, b.combines, d, c)
		}
	}
}

// A rank whose kernel timer is slow to start must not leave the others'
// first timed kernels waiting for it inside their timed window: every
// window's first launch, on every rank, comes after every rank's Start.
func TestLoopTimedWindowsStartTogether(t *testing.T) {
	needMPI(t)
	var err error
	var starts, firsts []int64
	onMPI(func() {
		c := mpi.World()
		timer := &fakeTimer{}
		if c.Rank() == 0 {
			timer.delay = 200 * time.Millisecond
		}
		b := &fakeBackend{timer: timer}
		r := &Run{Cfg: loopConfig(6, 3), Comm: c, Backend: b, Kernel: timer,
			Validate: func(*ll.Outputs, int, int, []bool) (Check, error) {
				return Check{DispatchOK: true, CombineOK: true}, nil
			}}
		if _, err = r.Loop(); err != nil {
			return
		}
		if len(timer.startDone) != 2 || len(timer.firstLaunch) != 2 {
			err = fmt.Errorf("rank %d: %d starts, %d windows launched; want 2, 2", c.Rank(), len(timer.startDone), len(timer.firstLaunch))
			return
		}
		if starts, err = c.AllgatherInt64(timer.startDone); err == nil {
			firsts, err = c.AllgatherInt64(timer.firstLaunch)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for w := 0; w < 2; w++ {
		latest := int64(0)
		for i := w; i < len(starts); i += 2 {
			latest = max(latest, starts[i])
		}
		for i := w; i < len(firsts); i += 2 {
			if firsts[i] < latest {
				t.Errorf("window %d: rank %d launched %v before the last rank's timer had started", w, i/2, time.Duration(latest-firsts[i]))
			}
		}
	}
}

// armedFake is a fakeTimer that can be armed; it notes how many dispatches
// the backend had made by then.
type armedFake struct {
	*fakeTimer
	b       *fakeBackend
	armedAt int
	arms    int
}

func (a *armedFake) Arm() error { a.arms++; a.armedAt = a.b.dispatches; return nil }

func TestLoopArmsTimerBeforeWarmup(t *testing.T) {
	needMPI(t)
	var arms, armedAt int
	var err error
	onMPI(func() {
		timer := &fakeTimer{}
		b := &fakeBackend{timer: timer}
		a := &armedFake{fakeTimer: timer, b: b}
		r := &Run{Cfg: loopConfig(4, 0), Comm: mpi.World(), Backend: b, Kernel: a}
		_, err = r.Loop()
		arms, armedAt = a.arms, a.armedAt
	})
	if err != nil {
		t.Fatal(err)
	}
	if arms != 1 || armedAt != 0 {
		t.Errorf("armed %d times, after %d dispatches; want once, before the warm-up", arms, armedAt)
	}
}

// No garbage collection can fall between the warm-up and the timed loop: the
// collector is off from the first warm-up pair to the last timed one (on one
// H200 a collection there made the first timed pair ~15-25 us slower), and
// restored afterwards.
func TestLoopCollectorOffFromWarmUpToTimed(t *testing.T) {
	needMPI(t)
	before := gcPercent()
	cfg := loopConfig(3, 0)
	_, b, _, err := runLoop(cfg, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.gcAtDispatch) != cfg.Warmup+cfg.Iters {
		t.Fatalf("%d dispatches, want %d", len(b.gcAtDispatch), cfg.Warmup+cfg.Iters)
	}
	for i, p := range b.gcAtDispatch {
		if p != -1 {
			t.Errorf("dispatch %d ran with the collector at %d%%", i, p)
		}
	}
	if after := gcPercent(); after != before {
		t.Errorf("collector left at %d%%, was %d%%", after, before)
	}
}

// --back-to-back: the timed pairs follow each other with one sync at the end
// and four marks each; every --validate-every-th pair is validated in the
// stream (outputs poisoned, a generation of its own), no sync or barrier
// added, and a failed check stops every rank after the loop.
func TestLoopBackToBack(t *testing.T) {
	needMPI(t)
	cfg := loopConfig(10, 3)
	cfg.BackToBack = true
	gc := gcPercent()
	m, b, timer, err := runLoop(cfg, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The checks run with the collector on, the pairs with it off.
	if len(b.gcAtCheck) != 3 || slices.ContainsFunc(b.gcAtCheck, func(p int) bool { return p != gc }) ||
		slices.ContainsFunc(b.gcAtDispatch, func(p int) bool { return p != -1 }) {
		t.Errorf("collector at %v%% in the checks, at %v%% in the dispatches; want %d%%, then off", b.gcAtCheck, b.gcAtDispatch, gc)
	}
	if len(m.TotalUs) != 10 || b.marks != 40 || !m.KernelOK || timer.windows != 1 || timer.timed != 10 {
		t.Errorf("%d samples, %d marks, kernel %v in %d windows of %d pairs", len(m.TotalUs), b.marks, m.KernelOK, timer.windows, timer.timed)
	}
	// Warm-up: 2 syncs a pair; the timed loop: one.
	if b.dispatches != 12 || b.syncs != 2*2+1 || b.poisons != 3 || b.shared != 0 {
		t.Errorf("%d dispatches, %d syncs, %d poisons (%d shared); want 12, 5, 3, 0", b.dispatches, b.syncs, b.poisons, b.shared)
	}
	if !slices.Equal(b.gens, []int{1, 2, 3}) {
		t.Errorf("validated pairs on generations %v", b.gens)
	}

	rank, size := 0, 0
	onMPI(func() { rank, size = mpi.World().Rank(), mpi.World().Size() })
	_, b, _, err = runLoop(cfg, size-1, 2)
	var ve *ValidationError
	if !errors.As(err, &ve) || !slices.Equal(ve.Ranks, []int{size - 1}) {
		t.Fatalf("%v, want a *ValidationError of rank %d", err, size-1)
	}
	// Only the rank whose check failed knows after which pair.
	want := fmt.Sprintf("validation of the timed pairs failed on rank %d", size-1)
	if rank == size-1 {
		want = fmt.Sprintf("validation after 6 timed iterations failed on rank %d: rank %d, expert 1 (local 0), row 2: bad", size-1, size-1)
	}
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if b.dispatches != 12 {
		t.Errorf("%d dispatches: the loop runs to its end before the ranks agree", b.dispatches)
	}
}

// -V with --back-to-back: the validated pairs run back to back after one
// shared poisoning, each on its own generation, all checked.
func TestValidateBackToBack(t *testing.T) {
	needMPI(t)
	cfg := loopConfig(2, 0)
	cfg.BackToBack, cfg.Validate = true, true
	m, b, _, err := runLoop(cfg, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Check == nil || !m.Check.DispatchOK || !m.Check.CombineOK {
		t.Fatalf("check %+v", m.Check)
	}
	if b.shared != 1 || !slices.Equal(b.gens, []int{1, 2, 3, 4}) || b.gen != 0 {
		t.Errorf("%d shared poisonings, generations %v, left at %d; want 1, [1 2 3 4], 0", b.shared, b.gens, b.gen)
	}
}
