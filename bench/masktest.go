package bench

import (
	"errors"
	"fmt"
	"slices"

	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
)

// Masker is a backend with elastic EP's mask of active ranks (-T): while
// masking is on, an operation that waits for a peer past --timeout-ms masks
// it instead of failing and goes on without it, and masked peers are skipped.
type Masker interface {
	// SetMasking turns the mask on, every rank active, or off.
	SetMasking(on bool) error
	// Mask is this rank's mask after the operations so far (true: active).
	Mask() ([]bool, error)
	// CleanMask makes every rank active again.
	CleanMask() error
	// CombineWaitsForAll: a combine waits for every active rank, not only
	// for the ranks its tokens select.
	CombineWaitsForAll() bool
}

// The ranks that skip an operation in the active-mask test, as NCCL-EP tests
// elastic EP: MaskSkipDispatch skips a dispatch (and so its combine),
// MaskSkipCombine a combine.
const (
	MaskSkipDispatch = 1
	MaskSkipCombine  = 3
)

// maskTest is the active-mask test on this rank, after the benchmark: with
// the mask on, every rank but MaskSkipDispatch dispatches routing 0, which
// must mask that rank; every rank but both skippers combines, which must
// mask MaskSkipCombine too (where this rank waits for it: always with a
// combine that waits for every rank, else when its tokens select that
// rank); then the mask is cleaned. Bounded barriers separate the steps,
// long enough for the waits that mask a rank. With Validate the step
// runs on token rows of its own with its outputs poisoned, and each rank
// that combined checks its combine output against the reference with the
// ranks its mask says are masked left out (their terms count as zero).
func (r *Run) maskTest() (*report.MaskRank, error) {
	mk := r.Backend.(Masker) // refuse checked
	b := r.Backend
	rank, n := r.Comm.Rank(), r.Comm.Size()
	bar := NewBarrier(r.Comm, 2*r.Cfg.Timeout()+HostWorkTimeout)
	ones := func() []int { return slices.Repeat([]int{1}, n) }
	read := func(want []int) (*report.MaskCheck, error) {
		m, err := mk.Mask()
		if err != nil {
			return nil, err
		}
		if len(m) != n { // here, not in the gather, which every rank must enter
			return nil, fmt.Errorf("a mask of %d ranks in a job of %d", len(m), n)
		}
		c := &report.MaskCheck{Mask: make([]int, len(m)), Want: want}
		for i, on := range m {
			if on {
				c.Mask[i] = 1
			}
		}
		return c, nil
	}
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("active-mask test: %s: %w", what, err)
		}
		return nil
	}
	if err := step("barrier before it", bar.Wait("barrier before the active-mask test")); err != nil {
		return nil, err
	}
	if r.Validate != nil {
		// As before a validated pair: every rank is between operations
		// (the barrier above) when any poisons the areas peers write.
		if err := step("poisoning outputs", r.poisonForPair()); err != nil {
			return nil, err
		}
		if err := step("barrier after poisoning", bar.Wait("barrier after poisoning for the active-mask test")); err != nil {
			return nil, err
		}
	}
	if err := step("turning the mask on", mk.SetMasking(true)); err != nil {
		return nil, err
	}
	out := &report.MaskRank{Rank: rank}
	var err error
	if rank != MaskSkipDispatch {
		if err := step("dispatch", errors.Join(b.Dispatch(0), b.Sync())); err != nil {
			return nil, err
		}
		want := ones()
		want[MaskSkipDispatch] = 0
		if out.Dispatch, err = read(want); err != nil {
			return nil, step("reading the mask", err)
		}
	}
	if err := step("barrier after the dispatch", bar.Wait("barrier after the active-mask test's dispatch")); err != nil {
		return nil, err
	}
	if rank != MaskSkipDispatch && rank != MaskSkipCombine {
		if err := step("combine", errors.Join(b.Combine(0), b.Sync())); err != nil {
			return nil, err
		}
		want := ones()
		want[MaskSkipDispatch] = 0
		if sel, err := r.selectsRank(MaskSkipCombine); err != nil {
			return nil, step("routing", err)
		} else if sel || mk.CombineWaitsForAll() {
			want[MaskSkipCombine] = 0
		}
		if out.Combine, err = read(want); err != nil {
			return nil, step("reading the mask", err)
		}
		if r.Validate != nil {
			if out.CombineOutput, err = r.checkMasked(out.Combine.Mask); err != nil {
				return nil, step("checking the combine output", err)
			}
		}
	}
	if r.Validate != nil {
		if err := step("token rows", b.Generation(0)); err != nil {
			return nil, err
		}
	}
	if err := step("barrier after the combine", bar.Wait("barrier after the active-mask test's combine")); err != nil {
		return nil, err
	}
	if err := step("cleaning the mask", mk.CleanMask()); err != nil {
		return nil, err
	}
	clean, err := read(ones())
	if err != nil {
		return nil, step("reading the mask", err)
	}
	out.Clean = *clean
	if err := step("turning the mask off", mk.SetMasking(false)); err != nil {
		return nil, err
	}
	return out, step("barrier after it", bar.Wait("barrier after the active-mask test"))
}

// selectsRank reports whether this rank's routing 0 selects an expert of
// rank q.
func (r *Run) selectsRank(q int) (bool, error) {
	if r.Shape == nil {
		return false, errors.New("no shape")
	}
	s := *r.Shape
	idx, err := s.Routing(r.Cfg.Seed, s.Rank, 0)
	if err != nil {
		return false, err
	}
	for _, e := range idx {
		if e >= 0 && int(e)/s.LocalExperts() == q {
			return true, nil
		}
	}
	return false, nil
}

// maskDetailBytes is how much of a failed combine output check's first
// difference gatherMaskTest carries per rank.
const maskDetailBytes = 240

// gatherMaskTest collects every rank's part of the active-mask test (the
// same on every rank). Collective.
func gatherMaskTest(c *mpi.Comm, me *report.MaskRank) (*report.MaskTest, error) {
	mine := *me
	if o := me.CombineOutput; o != nil && len(o.First) > maskDetailBytes {
		mine.CombineOutput = &report.OutputCheck{OK: o.OK, First: o.First[:maskDetailBytes]}
	}
	// Room for three checks of two masks of n entries ("0," each), the
	// detail (escaped: up to 6 bytes a byte) and the field names.
	slot := 512 + 3*2*2*c.Size() + 6*maskDetailBytes
	all, err := GatherJSON(c, mine, slot)
	if err != nil {
		return nil, fmt.Errorf("gathering the active-mask test: %w", err)
	}
	return &report.MaskTest{Ranks: all}, nil
}

// checkMasked checks this rank's combine output of the masked step against
// the reference with the ranks mask marks 0 left out.
func (r *Run) checkMasked(mask []int) (*report.OutputCheck, error) {
	snap, err := r.Backend.Snapshot()
	if err != nil {
		return nil, err
	}
	active := make([]bool, len(mask))
	for i, on := range mask {
		active[i] = on == 1
	}
	c, err := r.check(snap, 0, r.gen, active)
	if err != nil {
		return nil, err
	}
	return &report.OutputCheck{OK: c.CombineOK, First: c.Detail}, nil
}
