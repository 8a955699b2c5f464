package gpu

import (
	"errors"
	"unsafe"

	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// What validated pairs need of the backend: time stamps for pairs that
// follow each other without a sync, token rows of other generations,
// poisoned outputs and receive areas, and outputs copied to the host while
// later pairs run. Everything here is enqueued on the stream, in operation
// order, without a sync, except the shared poisoning, which the runner
// brackets with barriers.

// Marks implements bench.Backend: n timing events (the first four are
// made at set-up).
func (b *Backend) Marks(n int) error {
	for len(b.events) < n {
		e, err := NewEvent()
		if err != nil {
			return err
		}
		b.events = append(b.events, e)
	}
	return nil
}

// genRows stages a generation's token rows on their way to the device.
type genRows struct {
	host   *HostBuffer
	copied Event // recorded after the last copy from host
	used   bool  // copied has been recorded
}

// Generation implements bench.Backend: generation 0 is the set-up's rows
// (mem.x); another generation's rows are computed here, copied into
// mem.xgen in stream order, and the dispatches that follow read them. The
// rank-major combine of another generation (a validated pair) scales each
// slot by its weight sum first (kernels.FlagPrescale), as the CPU reference
// does.
func (b *Backend) Generation(g int) error {
	b.args.SetFlag(kernels.FlagPrescale, false)
	if g == 0 {
		b.args.X = b.mem.x
		return nil
	}
	if b.plan.RankMajor() {
		b.args.SetFlag(kernels.FlagPrescale, true)
	}
	s := b.shape
	st := &b.stage
	if st.host == nil {
		var err error
		if st.host, err = NewHostBuffer(int(b.plan.Local.XGen)); err != nil {
			return err
		}
		if st.copied, err = NewEvent(); err != nil {
			return err
		}
	}
	if st.used { // the host rows of the last generation may still be on their way
		if err := b.waitEvent(st.copied); err != nil {
			return err
		}
	}
	// The rows are written straight into the pinned buffer (no row buffer
	// allocated per validated pair, which runs between timed pairs).
	n := 2 * s.Tokens * s.Hidden
	if err := routing.FillRows(bytesU16(st.host.Bytes()[:n]), s.Rank, s.Hidden, g); err != nil {
		return err
	}
	if err := CopyToDeviceAsync(b.mem.xgen, st.host, 0, n, b.stream); err != nil {
		return err
	}
	if err := st.copied.Record(b.stream); err != nil {
		return err
	}
	st.used = true
	b.args.X = b.mem.xgen
	return nil
}

// Poison implements bench.Backend.
func (b *Backend) Poison(shared bool) error {
	m := &b.mem
	for _, p := range []uint64{m.recvX, m.recvCount, m.srcInfo, m.layoutRange, m.out, m.recvScales, m.recvTopkIdx, m.recvTopkW} {
		if p == 0 {
			continue
		}
		if err := MemsetD32Async(p, poisonWord, int(m.sizes[p]/4), b.stream); err != nil {
			return err
		}
	}
	if !shared {
		return nil
	}
	l := b.plan.Sym
	for _, a := range []struct{ Off, Size int64 }{l.DispatchRecv, l.DispatchCounts, l.CombineRecv, l.InlineDispatch,
		l.InlineCounts, l.InlineCombine} {
		if err := MemsetD32Async(m.sym+uint64(a.Off), poisonShared, int(a.Size/4), b.stream); err != nil {
			return err
		}
	}
	return nil
}

// snapshot is a host copy of a rank's outputs on its way.
type snapshot struct {
	host *HostBuffer
	done Event
	busy bool // taken, not yet read
}

// outputSpans are the outputs of the current shape in the order Snapshot
// copies them: device address and bytes (outputSizes).
func (b *Backend) outputSpans() [][2]uint64 {
	m := &b.mem
	n := b.outputSizes()
	sp := [][2]uint64{{m.recvCount, 4 * n.count}, {m.srcInfo, 4 * n.rows}, {m.layoutRange, 8 * n.ranges}, {m.out, 2 * n.out}}
	if n.rm {
		sp = append(sp, [2]uint64{m.recvTopkIdx, 4 * n.rows * n.k}, [2]uint64{m.recvTopkW, 4 * n.rows * n.k})
	}
	rows, H := n.rows, n.h
	if b.args.FP8() {
		return append(sp, [2]uint64{m.recvX, rows * H}, [2]uint64{m.recvScales, 4 * rows * (H / 128)})
	}
	return append(sp, [2]uint64{m.recvX, 2 * rows * H})
}

// Snapshot implements bench.Backend: the outputs are copied into one of two
// page-locked buffers in stream order, and the function it returns waits
// for the copy (and reports a kernel's error, as Sync does) before it reads
// them.
func (b *Backend) Snapshot() (func() (*ll.Outputs, error), error) {
	sn := &b.snaps[b.nextSnap]
	if sn.busy {
		return nil, errors.New("gpu: a third snapshot while two are unread")
	}
	b.nextSnap = (b.nextSnap + 1) % len(b.snaps)
	if sn.host == nil {
		need := 0
		for _, sp := range b.maxSpans() {
			need += int(sp)
		}
		var err error
		if sn.host, err = NewHostBuffer(need); err != nil {
			return nil, err
		}
		if sn.done, err = NewEvent(); err != nil {
			return nil, err
		}
	}
	spans := b.outputSpans()
	off := 0
	for _, sp := range spans {
		if sp[1] == 0 {
			continue
		}
		if err := CopyFromDeviceAsync(sn.host, off, sp[0], int(sp[1]), b.stream); err != nil {
			return nil, err
		}
		off += int(sp[1])
	}
	if err := sn.done.Record(b.stream); err != nil {
		return nil, err
	}
	sn.busy = true
	n := b.outputSizes()
	fp8 := b.args.FP8()
	return func() (*ll.Outputs, error) {
		defer func() { sn.busy = false }()
		if err := b.waitEvent(sn.done); err != nil {
			return nil, err
		}
		if err := b.kernelError(); err != nil {
			return nil, err
		}
		// Views of the page-locked copy, no allocation: they hold until the
		// slot is taken again, two snapshots later.
		p := unsafe.Pointer(unsafe.SliceData(sn.host.Bytes()))
		off := uintptr(0)
		i := 0
		next := func() unsafe.Pointer {
			q := unsafe.Add(p, off)
			off += uintptr(spans[i][1])
			i++
			return q
		}
		rows, H := int(n.rows), int(n.h)
		o := &ll.Outputs{
			RecvCount:   unsafe.Slice((*int32)(next()), n.count),
			SrcInfo:     unsafe.Slice((*int32)(next()), rows),
			LayoutRange: unsafe.Slice((*int64)(next()), n.ranges),
			Out:         unsafe.Slice((*uint16)(next()), n.out),
		}
		if n.rm {
			o.LayoutRange = nil
			o.RecvTopkIdx = unsafe.Slice((*int32)(next()), rows*int(n.k))
			o.RecvTopkWeights = unsafe.Slice((*float32)(next()), rows*int(n.k))
		}
		if fp8 {
			o.RecvFP8 = unsafe.Slice((*uint8)(next()), rows*H)
			o.RecvScales = unsafe.Slice((*float32)(next()), rows*(H/128))
		} else {
			o.RecvX = unsafe.Slice((*uint16)(next()), rows*H)
		}
		return o, nil
	}, nil
}

// maxSpans are the sizes of the outputs at the plan's largest shape.
func (b *Backend) maxSpans() []int64 {
	l := b.plan.Local
	return []int64{l.RecvCount, l.SrcInfo, l.LayoutRange, l.Out, l.RecvTopkIdx, l.RecvTopkW, l.RecvX, l.RecvScales}
}

// outSizes are the element counts of the outputs at the current shape.
type outSizes struct {
	rm              bool
	count, ranges   uint64 // recv_count, layout_range
	rows, h, k, out uint64 // rows of recv_x (rank-major: slots), hidden, top-k, combine output elements
}

func (b *Backend) outputSizes() outSizes {
	s := b.shape
	L, R, T := uint64(s.LocalExperts()), uint64(s.Ranks), uint64(s.Tokens)
	n := outSizes{rm: s.RankMajor, h: uint64(s.Hidden), k: uint64(s.TopK), out: uint64(s.Own() * s.Hidden)}
	if n.rm {
		n.count, n.rows = R, R*T
		return n
	}
	n.count, n.ranges, n.rows = L, L*R, L*R*T
	return n
}

// freeValidation releases what validated pairs made.
func (b *Backend) freeValidation() error {
	var errs []error
	for i := range b.snaps {
		sn := &b.snaps[i]
		errs = append(errs, sn.host.Free())
		if sn.done.Live() {
			errs = append(errs, sn.done.Destroy())
		}
	}
	errs = append(errs, b.stage.host.Free())
	if b.stage.copied.Live() {
		errs = append(errs, b.stage.copied.Destroy())
	}
	return errors.Join(errs...)
}
