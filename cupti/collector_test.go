package cupti

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/kernels"
)

// The runner drives the collector through this interface.
var _ bench.KernelTimer = (*Collector)(nil)

// fakeAPI stands in for CUPTI: it records the calls made and, on flush,
// delivers the records queued with pending into the C aggregates, the way
// CUPTI's buffer callback would.
type fakeAPI struct {
	ver      uint32
	calls    []string
	fail     map[string]error
	enabled  bool
	pending  []fakeRecord
	dropped  uint64
	failOnce bool
	clock    uint64 // ns: the next launch's start, and timestamp's answer
}

type fakeRecord struct {
	name       string
	start, end uint64
}

func (f *fakeAPI) call(name string) error {
	f.calls = append(f.calls, name)
	err := f.fail[name]
	if err != nil && f.failOnce {
		delete(f.fail, name)
	}
	return err
}

func (f *fakeAPI) version() (uint32, error) {
	if err := f.call("version"); err != nil {
		return 0, err
	}
	return f.ver, nil
}

func (f *fakeAPI) registerCallbacks() error { return f.call("register") }

func (f *fakeAPI) enable(kind int) error {
	if err := f.call(fmt.Sprintf("enable(%d)", kind)); err != nil {
		return err
	}
	f.enabled = true
	return nil
}

func (f *fakeAPI) disable(kind int) error {
	f.enabled = false
	return f.call(fmt.Sprintf("disable(%d)", kind))
}

func (f *fakeAPI) flush(flag uint32) error {
	if err := f.call(fmt.Sprintf("flush(%d)", flag)); err != nil {
		return err
	}
	for _, r := range f.pending {
		feedForTest(r.name, r.start, r.end)
	}
	f.pending = nil
	return nil
}

func (f *fakeAPI) collectDropped() error {
	if err := f.call("dropped"); err != nil {
		return err
	}
	feedDroppedForTest(f.dropped)
	f.dropped = 0
	return nil
}

func (f *fakeAPI) timestamp() (uint64, error) {
	if err := f.call("timestamp"); err != nil {
		return 0, err
	}
	return f.clock, nil
}

// launch queues n records of name, each lasting ns, one after the other on
// the fake clock.
func (f *fakeAPI) launch(name string, n int, ns uint64) {
	if f.clock == 0 {
		f.clock = 1_000_000
	}
	for i := 0; i < n; i++ {
		f.pending = append(f.pending, fakeRecord{name, f.clock, f.clock + ns})
		f.clock += ns + 1_000
	}
}

func openFake(t *testing.T, f *fakeAPI) *Collector {
	t.Helper()
	if f.ver == 0 {
		f.ver = 130001
	}
	c, err := open(func() (activityAPI, string, error) { return f, "fake", nil })
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestStopAveragesPerClass(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for i, ns := range []uint64{10_000, 20_000, 30_000} {
		f.pending = append(f.pending, fakeRecord{kernels.DispatchKernel, uint64(1e9 + i*1e6), uint64(1e9+i*1e6) + ns})
	}
	f.launch(kernels.CombineKernel, 3, 5_500)
	f.launch("epbench_zero_fill", 7, 1_000) // neither class
	d, cmb, err := c.Stop(3, 3)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !near(d, 20) || !near(cmb, 5.5) {
		t.Fatalf("Stop = %v, %v µs; want 20, 5.5", d, cmb)
	}
	want := []KernelStat{
		{kernels.DispatchKernel, 3, 60_000},
		{kernels.CombineKernel, 3, 16_500},
		{"epbench_zero_fill", 7, 7_000},
	}
	if got := c.Aggregates(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Aggregates = %v; want %v", got, want)
	}
	wantCalls := []string{"version", "register", "dropped", "enable(10)", "disable(10)", "flush(1)", "dropped"}
	if fmt.Sprint(f.calls) != fmt.Sprint(wantCalls) {
		t.Fatalf("calls = %v; want %v", f.calls, wantCalls)
	}
}

func TestStopMatchesMangledNames(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch("_ZN7nccl_ep12low_latency8dispatchILb1EEEvPv", 2, 4_000)
	f.launch("_ZN7nccl_ep12low_latency7combineILb1EEEvPv", 2, 2_000)
	d, cmb, err := c.Stop(2, 2)
	if err != nil || !near(d, 4) || !near(cmb, 2) {
		t.Fatalf("Stop = %v, %v, %v; want 4, 2, nil", d, cmb, err)
	}
}

func TestStopCountMismatch(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 4, 1_000)
	f.launch(kernels.CombineKernel, 5, 1_000)
	d, cmb, err := c.Stop(5, 5)
	if !errors.Is(err, ErrCountMismatch) {
		t.Fatalf("Stop error = %v; want ErrCountMismatch", err)
	}
	if d != 0 || cmb != 0 {
		t.Fatalf("Stop returned numbers %v, %v with an error", d, cmb)
	}
	const want = "4 dispatch kernel records for 5 launches, 5 combine kernel records for 5 launches"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	// The aggregates stay readable for diagnosis.
	if got := c.Aggregates(); len(got) != 2 || got[0].Count != 4 || got[1].Count != 5 {
		t.Fatalf("Aggregates = %v", got)
	}
}

func TestStopNegativeLaunchesMismatch(t *testing.T) {
	c := openFake(t, &fakeAPI{})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Stop(-1, 0); !errors.Is(err, ErrCountMismatch) {
		t.Fatalf("Stop(-1, 0) error = %v; want ErrCountMismatch", err)
	}
}

func TestStopNoLaunches(t *testing.T) {
	c := openFake(t, &fakeAPI{})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	d, cmb, err := c.Stop(0, 0)
	if err != nil || d != 0 || cmb != 0 {
		t.Fatalf("Stop(0, 0) = %v, %v, %v; want 0, 0, nil", d, cmb, err)
	}
}

func TestStopDropped(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 2, 1_000)
	f.launch(kernels.CombineKernel, 1, 1_000)
	f.dropped = 1
	_, _, err := c.Stop(2, 2)
	if !errors.Is(err, ErrDropped) || !errors.Is(err, ErrCountMismatch) {
		t.Fatalf("Stop error = %v; want ErrDropped and ErrCountMismatch", err)
	}
	if !strings.Contains(err.Error(), "dropped: 1 records") {
		t.Fatalf("error %q does not give the dropped count", err)
	}
}

func TestDropsBeforeStartAreNotCharged(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	f.dropped = 9 // CUPTI's count before the window; Start reads and discards it
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 1, 1_000)
	f.launch(kernels.CombineKernel, 1, 1_000)
	if _, _, err := c.Stop(1, 1); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestStopIncomplete(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 1, 1_000)
	f.pending = append(f.pending, fakeRecord{kernels.DispatchKernel, 5_000_000, 0}) // still running at the forced flush
	f.launch(kernels.CombineKernel, 2, 1_000)
	_, _, err := c.Stop(2, 2)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Stop error = %v; want ErrIncomplete", err)
	}
	if !strings.Contains(err.Error(), "1 of 4 kernel records without an end timestamp") {
		t.Fatalf("error %q does not count the incomplete record", err)
	}
}

func TestStartClears(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 5, 9_000)
	f.launch(kernels.CombineKernel, 5, 9_000)
	if _, _, err := c.Stop(5, 5); err != nil {
		t.Fatal(err)
	}
	// Records reaching the aggregates between windows (the warm-up) are
	// discarded by Start too.
	feedForTest(kernels.DispatchKernel, 1, 2)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 2, 3_000)
	f.launch(kernels.CombineKernel, 2, 1_000)
	d, cmb, err := c.Stop(2, 2)
	if err != nil || !near(d, 3) || !near(cmb, 1) {
		t.Fatalf("second window Stop = %v, %v, %v; want 3, 1, nil", d, cmb, err)
	}
	if got := c.Aggregates(); len(got) != 2 || got[0].Count != 2 || got[0].TotalNs != 6_000 {
		t.Fatalf("Aggregates after second window = %v", got)
	}
}

func TestNameWithBothWordsCountsInBoth(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 2, 2_000)
	f.launch(kernels.CombineKernel, 2, 4_000)
	f.launch("fused_dispatch_combine", 2, 100_000)
	_, _, err := c.Stop(2, 2)
	if !errors.Is(err, ErrCountMismatch) || !strings.Contains(err.Error(), "4 dispatch kernel records for 2 launches, 4 combine") {
		t.Fatalf("Stop error = %v; want a mismatch of 4 records in each class", err)
	}
	f.calls = nil
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch("fused_dispatch_combine", 1, 3_000)
	d, cmb, err := c.Stop(1, 1)
	if err != nil || !near(d, 3) || !near(cmb, 3) {
		t.Fatalf("Stop = %v, %v, %v; want 3, 3, nil", d, cmb, err)
	}
}

func TestLongNamesTruncated(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	prefix := strings.Repeat("x", 2*nameMax)
	long1 := prefix + "_dispatch" // the class word lies beyond the kept bytes
	long2 := prefix + "_combine"  // same kept bytes, another kernel
	exact := strings.Repeat("y", nameMax-1)
	f.launch(long1, 2, 1_000)
	f.launch(long2, 3, 2_000)
	f.launch(exact, 1, 500)
	d, cmb, err := c.Stop(2, 3)
	if err != nil || !near(d, 1) || !near(cmb, 2) {
		t.Fatalf("Stop = %v, %v, %v; want 1, 2, nil (class from the full name)", d, cmb, err)
	}
	kept := prefix[:nameMax-1]
	want := []KernelStat{
		{kept + truncatedMark, 2, 2_000},
		{kept + truncatedMark, 3, 6_000},
		{exact, 1, 500},
	}
	if got := c.Aggregates(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Aggregates = %.40v; want %.40v", got, want)
	}
}

func TestManyNamesOverflow(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxKernels+3; i++ {
		f.launch(fmt.Sprintf("helper_%d", i), 1, 100)
	}
	f.launch(kernels.DispatchKernel, 4, 7_000) // after the table filled
	f.launch(kernels.CombineKernel, 4, 3_000)
	d, cmb, err := c.Stop(4, 4)
	if err != nil || !near(d, 7) || !near(cmb, 3) {
		t.Fatalf("Stop = %v, %v, %v; want 7, 3, nil", d, cmb, err)
	}
	got := c.Aggregates()
	if len(got) != maxKernels+1 {
		t.Fatalf("Aggregates has %d entries; want %d", len(got), maxKernels+1)
	}
	last := got[len(got)-1]
	if want := (KernelStat{otherKernels, 3 + 4 + 4, 300 + 28_000 + 12_000}); last != want {
		t.Fatalf("overflow entry = %v; want %v", last, want)
	}
}

func TestLifecycleErrors(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if _, _, err := c.Stop(1, 1); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Stop before Start: %v; want ErrNotStarted", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v; want ErrAlreadyStarted", err)
	}
	if _, err := open(func() (activityAPI, string, error) { return &fakeAPI{ver: 130001}, "fake", nil }); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v; want ErrInUse", err)
	}
	f.calls = nil
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"disable(10)", "flush(1)", "dropped"}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Fatalf("Close while started made calls %v; want %v", f.calls, want)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v; want ErrClosed", err)
	}
	if _, _, err := c.Stop(0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stop after Close: %v; want ErrClosed", err)
	}
	// The slot is free again.
	openFake(t, &fakeAPI{})
}

func TestOpenErrors(t *testing.T) {
	cuptiErr := newError("cuptiActivityRegisterCallbacks", resultMultipleSubscribers, "", "")
	tests := []struct {
		name string
		f    *fakeAPI
		want error
		msg  string
	}{
		{"old", &fakeAPI{ver: 9}, ErrUnsupportedVersion, "fake reports version 9, need 10 (CUDA 9.0) or later"},
		{"version fails", &fakeAPI{fail: map[string]error{"version": newError("cuptiGetVersion", 15, "", "")}},
			nil, "cupti: cuptiGetVersion: CUPTI_ERROR_NOT_INITIALIZED (15) (is this CUPTI newer than the driver?)"},
		{"register fails", &fakeAPI{ver: 18, fail: map[string]error{"register": cuptiErr}},
			cuptiErr, "another CUPTI client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.f.ver == 0 && tc.f.fail == nil {
				tc.f.ver = 130001
			}
			c, err := open(func() (activityAPI, string, error) { return tc.f, "fake", nil })
			if err == nil {
				_ = c.Close()
				t.Fatal("open succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v; want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not contain %q", err, tc.msg)
			}
			// A failed open leaves the slot free.
			openFake(t, &fakeAPI{}).Close()
		})
	}
	if _, err := open(func() (activityAPI, string, error) { return nil, "", ErrLibraryNotFound }); !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("connect error not passed on: %v", err)
	}
}

func TestStartEnableFails(t *testing.T) {
	enableErr := newError("cuptiActivityEnable", resultMultipleSubscribers, "", "")
	f := &fakeAPI{fail: map[string]error{"enable(10)": enableErr}, failOnce: true}
	c := openFake(t, f)
	err := c.Start()
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != resultMultipleSubscribers || ce.Call != "cuptiActivityEnable" {
		t.Fatalf("Start error = %v; want the *Error of cuptiActivityEnable", err)
	}
	if _, _, err := c.Stop(0, 0); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Stop after a failed Start: %v; want ErrNotStarted", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("Start after the failure cleared: %v", err)
	}
}

func TestStopFlushesWhenDisableFails(t *testing.T) {
	disableErr := newError("cuptiActivityDisable", 3, "", "")
	f := &fakeAPI{fail: map[string]error{"disable(10)": disableErr}}
	c := openFake(t, f)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	_, _, err := c.Stop(0, 0)
	if !errors.Is(err, disableErr) {
		t.Fatalf("Stop error = %v; want the disable error", err)
	}
	if want := []string{"disable(10)", "flush(1)", "dropped"}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Fatalf("calls = %v; want %v", f.calls, want)
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		e    *Error
		want string
	}{
		{newError("cuptiActivityEnable", 39, "", ""),
			"cupti: cuptiActivityEnable: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) (another CUPTI client, such as nsys, ncu, compute-sanitizer or a framework profiler, is attached to this process)"},
		{newError("cuptiActivityFlushAll", 7, "CUPTI_ERROR_INVALID_OPERATION", "operation not permitted"),
			"cupti: cuptiActivityFlushAll: CUPTI_ERROR_INVALID_OPERATION (7): operation not permitted"},
		{newError("cuptiActivityEnable", 4242, "", ""), "cupti: cuptiActivityEnable: CUPTI error (4242)"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant      %q", got, tc.want)
		}
	}
}

func TestKindEnv(t *testing.T) {
	for v, want := range map[string]int{"": kindConcurrentKernel, "concurrent": kindConcurrentKernel, "serial": kindKernel} {
		if got, err := kindOf(v); err != nil || got != want {
			t.Errorf("kindOf(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	if _, err := kindOf("Serial"); err == nil || !strings.Contains(err.Error(), KindEnv) {
		t.Errorf("kindOf(Serial): %v, want an error naming %s", err, KindEnv)
	}
	t.Setenv(KindEnv, "serial")
	if err := CheckEnv(); err != nil {
		t.Errorf("CheckEnv with %s=serial: %v", KindEnv, err)
	}
	t.Setenv(KindEnv, "bogus")
	if err := CheckEnv(); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("CheckEnv with %s=bogus: %v, want an error quoting the value", KindEnv, err)
	}
	// The kind chosen is the one enabled and disabled.
	f := &fakeAPI{}
	c := openFake(t, f)
	c.kind = kindKernel
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch("epbench_ll_dispatch", 1, 2000)
	f.launch("epbench_ll_combine", 1, 3000)
	if _, _, err := c.Stop(1, 1); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(f.calls, " ")
	for _, want := range []string{fmt.Sprintf("enable(%d)", kindKernel), fmt.Sprintf("disable(%d)", kindKernel)} {
		if !strings.Contains(joined, want) {
			t.Errorf("calls %q lack %s", joined, want)
		}
	}
}

// Armed, records stay enabled from Arm to Close; a window flushes nothing
// at its start (the first launch after a flush is slow) and counts only the
// kernels that started in it, though the earlier records come back with its
// own at its end.
func TestArmedWindows(t *testing.T) {
	f := &fakeAPI{}
	c := openFake(t, f)
	if err := c.Arm(); err != nil {
		t.Fatal(err)
	}
	if err := c.Arm(); err != nil {
		t.Fatalf("arming again: %v", err)
	}
	f.launch(kernels.DispatchKernel, 10, 900_000) // the warm-up: slow first launches
	f.launch(kernels.CombineKernel, 10, 900_000)
	for w := 0; w < 2; w++ {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		f.launch(kernels.DispatchKernel, 4, 10_000)
		f.launch(kernels.CombineKernel, 4, 12_000)
		d, cb, err := c.Stop(4, 4)
		if err != nil || !near(d, 10) || !near(cb, 12) {
			t.Fatalf("window %d: %v, %v, %v; want 10, 12 µs", w, d, cb, err)
		}
		f.launch(kernels.DispatchKernel, 1, 500_000) // a validated pair between windows
		f.launch(kernels.CombineKernel, 1, 500_000)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"version", "register", "enable(10)",
		"timestamp", "dropped", "flush(1)", "dropped",
		"timestamp", "dropped", "flush(1)", "dropped",
		"disable(10)", "flush(1)", "dropped"}
	if fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Fatalf("calls = %v; want %v", f.calls, want)
	}
	if err := c.Arm(); !errors.Is(err, ErrClosed) {
		t.Errorf("Arm after Close: %v, want ErrClosed", err)
	}
}

// Without cuptiGetTimestamp an armed window starts with a flush instead.
func TestArmedWithoutTimestamp(t *testing.T) {
	f := &fakeAPI{fail: map[string]error{"timestamp": ErrClosed}}
	c := openFake(t, f)
	if err := c.Arm(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 3, 900_000)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f.launch(kernels.DispatchKernel, 2, 10_000)
	f.launch(kernels.CombineKernel, 2, 12_000)
	if d, cb, err := c.Stop(2, 2); err != nil || !near(d, 10) || !near(cb, 12) {
		t.Fatalf("Stop: %v, %v, %v; want 10, 12 µs", d, cb, err)
	}
	if got := fmt.Sprint(f.calls[3:6]); got != "[timestamp flush(1) dropped]" {
		t.Errorf("Start's calls %s", got)
	}
}
