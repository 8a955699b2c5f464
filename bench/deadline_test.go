package bench

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

func TestTimeoutErrorMessage(t *testing.T) {
	cases := []struct {
		err  *TimeoutError
		want string
	}{
		{&TimeoutError{Phase: "warm-up barrier", Ranks: []int{3}, After: 5 * time.Second},
			"warm-up barrier: timed out after 5000 ms waiting for rank 3"},
		{&TimeoutError{Phase: "cpuref dispatch exchange", Ranks: []int{1, 2}, After: 2 * time.Second},
			"cpuref dispatch exchange: timed out after 2000 ms waiting for ranks 1, 2"},
		{&TimeoutError{Phase: "barrier after the pair", Ranks: []int{0}, After: time.Second, Indirect: true},
			"barrier after the pair: timed out after 1000 ms waiting for rank 0 (or a rank it waits for)"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q\nwant %q", got, c.want)
		}
		var pt PeerTimeout
		if !errors.As(error(c.err), &pt) || !pt.PeerTimeout() {
			t.Errorf("%q is not a PeerTimeout", c.err)
		}
	}
}

func TestBarrierWithoutAllocating(t *testing.T) {
	needMPI(t)
	var allocs float64
	var err error
	onMPI(func() {
		b := NewBarrier(mpi.World(), 20*time.Second)
		for range 10 {
			if err = b.Wait("warming"); err != nil {
				return
			}
		}
		allocs = testing.AllocsPerRun(100, func() {
			if e := b.Wait("steady"); e != nil {
				err = e
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per barrier, want 0", allocs)
	}
}

func TestAgreeNamesFailedRanks(t *testing.T) {
	needMPI(t)
	var rank, size int
	var first, second []int
	var err1, err2 error
	onMPI(func() {
		c := mpi.World()
		rank, size = c.Rank(), c.Size()
		b := NewBarrier(c, 20*time.Second)
		f, err := b.Agree("vote", rank != 0 && rank != size-1)
		first, err1 = slices.Clone(f), err
		second, err2 = b.Agree("vote again", true)
	})
	if err1 != nil || err2 != nil {
		t.Fatalf("Agree: %v, %v", err1, err2)
	}
	if want := []int{0, size - 1}; !slices.Equal(first, want) {
		t.Errorf("rank %d: failed ranks %v, want %v", rank, first, want)
	}
	if len(second) != 0 {
		t.Errorf("rank %d: failed ranks %v after everyone voted yes", rank, second)
	}
}

// TestBarrierNamesLateRank: the last rank arrives after rank 0 gave up.
// Rank 0 names it, and so do the ranks it released; the late rank only
// knows that rank 0 never released it.
func TestBarrierNamesLateRank(t *testing.T) {
	needMPI(t)
	const timeout = 200 * time.Millisecond
	var rank, late int
	var err error
	var took time.Duration
	var drain error
	onMPI(func() {
		c := mpi.World()
		rank, late = c.Rank(), c.Size()-1
		b := NewBarrier(c, timeout)
		if err = b.Wait("aligning"); err != nil {
			return
		}
		if rank == late {
			time.Sleep(3 * timeout)
		}
		start := time.Now()
		err = b.Wait("the test barrier")
		took = time.Since(start)

		// Complete what the timed-out barrier left in flight.
		deadline := time.Now().Add(20 * time.Second)
		switch rank {
		case 0:
			if _, drain = b.poll.Wait([]*mpi.Request{&b.reqs[late]}, deadline); drain == nil {
				// The late rank gives up timeout+ReleaseGrace after it arrived,
				// which is about when its vote was drained here: release it
				// well after that, or the release can win the race.
				time.Sleep(timeout + ReleaseGrace + time.Second)
				if drain = c.StartIsend(&b.reqs[late], b.release, late, tagRelease); drain == nil {
					_, drain = b.poll.Wait([]*mpi.Request{&b.reqs[late]}, deadline)
				}
			}
		case late:
			_, drain = b.poll.Wait([]*mpi.Request{&b.reqs[0], &b.reqs[1]}, deadline)
		}
		if drain == nil {
			drain = c.Barrier()
		}
	})
	if drain != nil {
		t.Fatalf("draining: %v", drain)
	}
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("rank %d: %v, want a *TimeoutError", rank, err)
	}
	want := TimeoutError{Phase: "the test barrier", Ranks: []int{late}, After: timeout}
	limit := timeout + 500*time.Millisecond
	if rank == late {
		want.Ranks, want.Indirect = []int{0}, true
		limit = timeout + ReleaseGrace + 500*time.Millisecond
	}
	if te.Phase != want.Phase || !slices.Equal(te.Ranks, want.Ranks) || te.Indirect != want.Indirect || te.After != want.After {
		t.Errorf("rank %d: %+v, want %+v", rank, *te, want)
	}
	if took > limit {
		t.Errorf("rank %d gave up after %v, want at most %v", rank, took, limit)
	}
}
