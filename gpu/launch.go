package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/kernels"
)

// TimeoutError is a kernel's bounded wait that expired.
type TimeoutError struct {
	Phase string // "dispatch" or "combine"
	Peer  int    // the rank that did not arrive
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: timed out waiting for rank %d", e.Phase, e.Peer)
}

// PeerTimeout marks the error as a peer that did not arrive (exit code 4).
func (e *TimeoutError) PeerTimeout() bool { return true }

// Graphs reports whether the operations run as CUDA graphs (--cuda-graph).
func (b *Backend) Graphs() bool { return b.mem.clock != 0 }

// Launch is how the operations run at the current token count: variant,
// entries and grid.
func (b *Backend) Launch() kernels.Launch { return b.cur }

// selectKernels makes b.cur the plan's launch at the current token count,
// with its entries, and sets the variant's fields of b.args, loading the
// variant's module (a JIT compile of its PTX) the first time. Called at
// set-up and whenever the token count changes, so a launch only reads what
// it set.
func (b *Backend) selectKernels() error {
	l, err := b.plan.Launch(b.shape.Tokens, b.shape.Own())
	if err != nil {
		return err
	}
	v := l.Variant
	ks, ok := b.modules[v]
	if !ok {
		ptx, err := kernels.PTX(b.cfg.PTXDir, v)
		if err != nil {
			return err
		}
		if ks.module, err = LoadModule(ptx); err != nil {
			return fmt.Errorf("loading the LL kernels (%s): %w", v.Module(), err)
		}
		if v.GIN {
			if err := b.mem.fillGIN(ks.module, b.stream); err != nil {
				return errors.Join(fmt.Errorf("%s: %w", v.Module(), err), ks.module.Unload())
			}
		}
		ks.entries = map[string]Function{}
		for _, name := range v.Entries() {
			f, err := ks.module.Function(name)
			if err != nil {
				return errors.Join(fmt.Errorf("%s: %w", v.Module(), err), ks.module.Unload())
			}
			ks.entries[name] = f
		}
		b.modules[v] = ks
	}
	d, c := ks.entries[l.DispatchEntry], ks.entries[l.CombineEntry]
	if err := b.checkResident(l, d, c); err != nil {
		return err
	}
	b.cur, b.curD, b.curC = l, d, c
	l.SetArgs(&b.args)
	return nil
}

// checkResident refuses a grid that cannot be resident at once together
// with the grids of the ranks that share this GPU: their blocks wait for
// each other's.
func (b *Backend) checkResident(l kernels.Launch, d, c Function) error {
	per := 0
	for i, f := range []Function{d, c} {
		smem := l.DispatchShared
		if i == 1 {
			smem = l.CombineShared
		}
		n, err := f.Occupancy(l.Threads, smem)
		if err != nil {
			return err
		}
		if i == 0 || n < per {
			per = n
		}
	}
	if room := b.dev.Info.SMs * per; l.Grid*b.sharing.Ranks > room {
		if b.sharing.Ranks == 1 {
			return fmt.Errorf("a grid of %d blocks cannot be resident at once on this GPU (%d SMs x %d blocks of these kernels)", l.Grid, b.dev.Info.SMs, per)
		}
		return &config.UsageError{Flag: "--num-blocks", Why: fmt.Sprintf(
			"%d ranks share this GPU (%d SMs x %d blocks of these kernels): their grids must be resident together, so at most %d blocks each, got %d",
			b.sharing.Ranks, b.dev.Info.SMs, per, room/b.sharing.Ranks, l.Grid)}
	}
	return nil
}

// Protocols names how dispatch and combine signal at the current token
// count: inline, fenced, or lines.
func (b *Backend) Protocols() (dispatch, combine string) {
	return kernels.ProtoNames[b.cur.Variant.Dispatch], kernels.ProtoNames[b.cur.Variant.Combine]
}

// launch runs one operation with routing j. With the fenced protocol every
// source makes one release per call on each rank's arrival counter, so after
// the n-th fenced call the kernel waits for n from every source; inline and
// lines calls carry their own flags and do not touch the counters. With
// --cuda-graph the kernels keep that count and the epoch on the device
// (kernels.ClockBytes), so each (operation, routing) is captured once, at
// its first call, and its graph launched from then on.
func (b *Backend) launch(op int, j int, expect *uint64) error {
	if j < 0 || j >= len(b.mem.idx) {
		return fmt.Errorf("routing %d of %d", j, len(b.mem.idx))
	}
	l := b.cur
	f, smem, proto := b.curD, l.DispatchShared, l.Variant.Dispatch
	if op == 1 {
		f, smem, proto = b.curC, l.CombineShared, l.Variant.Combine
	}
	if proto == kernels.ProtoFenced {
		*expect++
	}
	// A graph per routing and row set: the set-up's rows, or a validated
	// pair's (Generation), whose address is an argument.
	gi := 2 * j
	if b.args.X != b.mem.x {
		gi++
	}
	// With the mask of active ranks (-T) every call is launched, with its
	// address; no graph holds it.
	masking := b.args.Active != 0
	if b.Graphs() && !masking && b.graphs[op][gi] != 0 {
		return b.graphs[op][gi].Launch(b.stream)
	}
	b.args.TopkIdx, b.args.TopkW = b.mem.idx[j], b.mem.w[j]
	b.args.Expect = *expect
	b.args.Put(b.params.Bytes())
	if !b.Graphs() || masking {
		return f.Launch(l.Grid, l.Threads, smem, b.stream, b.params)
	}
	g, err := f.Capture(l.Grid, l.Threads, smem, b.stream, b.params)
	if err != nil {
		return err
	}
	b.graphs[op][gi] = g
	return g.Launch(b.stream)
}

// dropGraphs releases the captured graphs (their arguments are out of date).
func (b *Backend) dropGraphs() error {
	var errs []error
	for op := range b.graphs {
		for j, g := range b.graphs[op] {
			if g != 0 {
				errs = append(errs, g.Destroy())
				b.graphs[op][j] = 0
			}
		}
	}
	return errors.Join(errs...)
}

// Dispatch implements bench.Backend.
func (b *Backend) Dispatch(j int) error {
	b.args.Epoch++
	b.args.Trace = b.traceAt(b.mem.traceD, b.callsD)
	b.traceGrids[0][b.callsD%kernels.TraceCalls] = b.cur.Grid
	b.callsD++
	return b.launch(0, j, &b.expectD)
}

// Combine implements bench.Backend.
func (b *Backend) Combine(j int) error {
	b.args.Trace = b.traceAt(b.mem.traceC, b.callsC)
	b.traceGrids[1][b.callsC%kernels.TraceCalls] = b.cur.Grid
	b.callsC++
	return b.launch(1, j, &b.expectC)
}

// Sync implements bench.Backend: it waits for the stream and reports a
// kernel's expired wait as a *TimeoutError.
func (b *Backend) Sync() error {
	if b.plan.GIN {
		return b.syncGIN()
	}
	if err := b.stream.Sync(); err != nil {
		return err
	}
	return b.kernelError()
}

// GINStallMargin is how long past the kernels' own bound (--timeout-ms) the
// host waits for a GIN build's kernels: NCCL's device-side waits (for room
// in a GIN queue, for a flush) are not bounded, so a GIN backend that stops
// making progress would hold a kernel for ever.
const GINStallMargin = 10 * time.Second

// GINStallError is a GIN build's kernel that did not finish in time.
type GINStallError struct{ After time.Duration }

func (e *GINStallError) Error() string {
	return fmt.Sprintf("the kernels did not finish within %v: NCCL's GIN backend (its proxy thread and network or RMA plugin) "+
		"stopped making progress, and NCCL's device-side GIN waits are not bounded", e.After)
}

// PeerTimeout: a stalled GIN backend is reported like a peer that did not
// arrive (exit code 4).
func (e *GINStallError) PeerTimeout() bool { return true }

func (b *Backend) syncGIN() error {
	if err := b.waitGIN(); err != nil {
		return err
	}
	return b.kernelError()
}

// waitGIN waits for a GIN build's kernels as long as their own bounded
// waits may take and GINStallMargin more: a CUDA error as itself, a kernel
// still running after that as a GINStallError, at once after the first
// (Close after a failed Sync does not wait the bound out again).
func (b *Backend) waitGIN() error { return b.waitBounded(b.stream.SyncWithin) }

// waitEvent waits for the work recorded before e: a GIN build's bounded as
// waitGIN's (a validated pair's copies follow its kernels in stream order,
// so a kernel held in NCCL's unbounded waits would hold them too).
func (b *Backend) waitEvent(e Event) error {
	if !b.plan.GIN {
		return e.Wait()
	}
	return b.waitBounded(e.WaitWithin)
}

func (b *Backend) waitBounded(within func(time.Duration) (bool, error)) error {
	if b.stalled != nil {
		return b.stalled
	}
	d := b.cfg.Timeout() + GINStallMargin
	done, err := within(d)
	if err != nil {
		return err
	}
	if !done {
		b.stalled = &GINStallError{After: d}
		return b.stalled
	}
	return nil
}

// kernelError is what the kernels that ran recorded in their error word.
func (b *Backend) kernelError() error {
	w := b.mem.errw.Load()
	if w == 0 {
		return nil
	}
	switch phase, peer := kernels.DecodeError(w); phase {
	case kernels.PhaseVariant:
		return fmt.Errorf("a kernel was launched with arguments of another variant than its module's (an epbench defect)")
	case kernels.PhaseDispatch:
		return &TimeoutError{Phase: "dispatch", Peer: peer}
	case kernels.PhaseCombine:
		return &TimeoutError{Phase: "combine", Peer: peer}
	case kernels.PhaseStale:
		return fmt.Errorf("dispatch: rank %d's counts of another call were where this call's must be (the slots' ownership is broken: an epbench defect)", peer)
	default:
		return fmt.Errorf("the kernels' error word holds %#x, which no phase writes (an epbench defect)", w)
	}
}

// Mark implements bench.Backend.
func (b *Backend) Mark(i int) error { return b.events[i].Record(b.stream) }

// ElapsedUs implements bench.Backend.
func (b *Backend) ElapsedUs(from, to int) (float64, error) {
	return ElapsedUs(b.events[from], b.events[to])
}
