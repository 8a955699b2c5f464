package cupti

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// KernelStat is the time CUPTI recorded for one kernel name over the last
// Start/Stop window.
type KernelStat struct {
	Name    string // as CUPTI reports it (mangled for C++ kernels); ends in "..." if truncated
	Count   int    // kernel instances
	TotalNs uint64 // summed end-start, ns
}

// Collector is the in-process CUPTI activity collector. It implements the
// runner's kernel timer (Start after the warm-up, Stop after the timed loop).
// Its methods may be called from any goroutine, one at a time.
type Collector struct {
	mu      sync.Mutex
	api     activityAPI
	path    string
	version uint32
	kind    int  // the activity kind enabled: concurrent-kernel records, or serialized (KindEnv)
	armed   bool // records enabled ahead of the windows (Arm) until Close
	started bool
	closed  bool
}

// KindEnv selects the kernel activity kind (a development aid for studying
// the timer itself): unset or "concurrent" gives CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
// as ep_bench uses; "serial" gives CUPTI_ACTIVITY_KIND_KERNEL, whose kernels CUPTI
// serializes.
const KindEnv = "EPBENCH_CUPTI_KIND"

// CheckEnv reports a KindEnv value Open would refuse, so that a run can stop
// with a usage error before it sets anything up.
func CheckEnv() error {
	_, err := kindOf(os.Getenv(KindEnv))
	return err
}

// kindOf maps a KindEnv value to the activity kind.
func kindOf(v string) (int, error) {
	switch v {
	case "", "concurrent":
		return kindConcurrentKernel, nil
	case "serial":
		return kindKernel, nil
	}
	return 0, fmt.Errorf("%s=%q: want concurrent or serial", KindEnv, v)
}

// The process-wide CUPTI activity state admits one collector at a time.
var slot struct {
	sync.Mutex
	held bool
}

// Open loads CUPTI, checks its version and registers the buffer callbacks.
// Call it once per process, after the CUDA context exists. Without a usable
// library it returns an error wrapping ErrLibraryNotFound or
// ErrMissingSymbol; a failing CUPTI call gives an *Error.
func Open() (*Collector, error) {
	kind, err := kindOf(os.Getenv(KindEnv))
	if err != nil {
		return nil, err
	}
	c, err := open(func() (activityAPI, string, error) {
		ep, path, err := systemFinder().load()
		if err != nil {
			return nil, "", err
		}
		bind(ep)
		return boundAPI{}, path, nil
	})
	if err != nil {
		return nil, err
	}
	c.kind = kind
	return c, nil
}

// open creates a collector over the API connect returns.
func open(connect func() (activityAPI, string, error)) (*Collector, error) {
	slot.Lock()
	defer slot.Unlock()
	if slot.held {
		return nil, ErrInUse
	}
	api, path, err := connect()
	if err != nil {
		return nil, err
	}
	v, err := api.version()
	if err != nil {
		return nil, err
	}
	if v < minVersion {
		return nil, fmt.Errorf("%w: %s reports version %d, need %d (CUDA 9.0) or later", ErrUnsupportedVersion, path, v, minVersion)
	}
	if err := api.registerCallbacks(); err != nil {
		return nil, err
	}
	slot.held = true
	return &Collector{api: api, path: path, version: v, kind: kindConcurrentKernel}, nil
}

// Path is the library the collector uses, as it was opened (a path, or a
// name resolved by the loader).
func (c *Collector) Path() string { return c.path }

// Version is cuptiGetVersion of the library: 18 for CUDA 11.8, 19 to 28 for
// CUDA 12.x, xxyyzz (130000 and up) from CUDA 13.
func (c *Collector) Version() uint32 { return c.version }

// Arm enables kernel activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
// unless KindEnv says otherwise) ahead of the first window, until Close:
// call it before the warm-up. A window then starts without enabling or
// flushing anything: the first kernel launched after a forced flush is held
// up by 2.5-5 ms (measured on H200, CUDA 13.0), and in the first timed pair
// the peers' kernels would spin that long.
// Records of kernels that started before the window (the warm-up's, still in
// the buffer) are left out by their start time. Arming twice is a no-op.
func (c *Collector) Arm() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.armed:
		return nil
	case c.started:
		return ErrAlreadyStarted
	}
	if err := c.api.enable(c.kind); err != nil {
		return err
	}
	c.armed = true
	return nil
}

// Start clears the aggregates and, unless armed, enables kernel activity
// records; armed, it leaves out the records of kernels that started before
// now (without cuptiGetTimestamp, it hands every buffer back instead). The
// device must be synchronized. Call it after the warm-up.
func (c *Collector) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.started:
		return ErrAlreadyStarted
	}
	var from uint64 // kernels that started before it are left out
	if c.armed {
		ts, err := c.api.timestamp()
		if err != nil { // no CUPTI clock: hand the earlier records back now instead
			if err := c.api.flush(flushForced); err != nil {
				return err
			}
		} else {
			from = ts
		}
	}
	// Reading the dropped count resets CUPTI's, so drops from before the
	// window are not charged to it.
	if err := c.api.collectDropped(); err != nil {
		return err
	}
	resetAggregates()
	setWindow(from)
	if !c.armed {
		if err := c.api.enable(c.kind); err != nil {
			return err
		}
	}
	c.started = true
	return nil
}

// Stop disables kernel records (unless armed), flushes every buffer (forced, so records
// of unfinished kernels come back too and are caught as incomplete) and
// returns the mean duration, in µs, of the kernels whose names contain
// "dispatch" and of those containing "combine". The device must be
// synchronized before Stop. It returns an error instead of numbers when
// records were dropped (ErrDropped) or incomplete (ErrIncomplete), or when
// the record counts differ from dispatches and combines, the launches made in
// the window (ErrCountMismatch); the errors are joined when several apply.
func (c *Collector) Stop(dispatches, combines int) (dispatchUs, combineUs float64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return 0, 0, ErrClosed
	case !c.started:
		return 0, 0, ErrNotStarted
	}
	c.started = false
	if err := c.drain(!c.armed); err != nil {
		return 0, 0, err
	}
	t, _ := snapshot()
	return summarize(t, dispatches, combines)
}

// drain disables kernel records (when disable is set) and hands every
// buffer back, flushing even when disabling failed.
func (c *Collector) drain(disable bool) error {
	var err error
	if disable {
		err = c.api.disable(c.kind)
	}
	if ferr := c.api.flush(flushForced); ferr != nil {
		err = errors.Join(err, ferr)
	}
	if derr := c.api.collectDropped(); derr != nil {
		err = errors.Join(err, derr)
	}
	return err
}

// summarize turns the aggregates into per-class means, or the reasons they
// cannot be trusted.
func summarize(t totals, dispatches, combines int) (dispatchUs, combineUs float64, err error) {
	var errs []error
	if t.dropped > 0 {
		errs = append(errs, fmt.Errorf("%w: %d records", ErrDropped, t.dropped))
	}
	if t.incomplete > 0 || t.unreadable > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d kernel records without an end timestamp, %d buffers unreadable (synchronize the device before Stop)",
			ErrIncomplete, t.incomplete, t.records, t.unreadable))
	}
	if !countIs(t.dispatchCount, dispatches) || !countIs(t.combineCount, combines) {
		errs = append(errs, fmt.Errorf("%w: %d dispatch kernel records for %d launches, %d combine kernel records for %d launches",
			ErrCountMismatch, t.dispatchCount, dispatches, t.combineCount, combines))
	}
	if len(errs) > 0 {
		return 0, 0, errors.Join(errs...)
	}
	return meanUs(t.dispatchNs, t.dispatchCount), meanUs(t.combineNs, t.combineCount), nil
}

func countIs(got uint64, want int) bool { return want >= 0 && got == uint64(want) }

func meanUs(ns, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(ns) / float64(n) / 1e3
}

// Aggregates lists, per kernel name, what the last window recorded, in
// order of first appearance. Names beyond the table's capacity are summed
// under "(other kernels)".
func (c *Collector) Aggregates() []KernelStat {
	_, ks := snapshot()
	return ks
}

// Close disables collection if still started, hands the buffers back and
// frees the process-wide slot. The library stays loaded. Close is
// idempotent.
func (c *Collector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var err error
	if c.started || c.armed {
		err = c.drain(true)
		c.started, c.armed = false, false
	}
	c.closed = true
	slot.Lock()
	slot.held = false
	slot.Unlock()
	return err
}
