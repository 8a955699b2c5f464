package cpuref

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
)

// TestSilentPeerTimesOut: rank 1 of an in-process pair never dispatches;
// rank 0's dispatch gives up after the timeout and names it.
func TestSilentPeerTimesOut(t *testing.T) {
	g := newChanGroup(2)
	cfg := testConfig(config.DtypeBF16, config.RankLocalReduce, 1)
	cfg.TimeoutMs = 100
	b, err := New(g[0], ll.Shape{Ranks: 2, Rank: 0, Tokens: 4, Hidden: 256, TopK: 2, Experts: 4}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	err = b.Dispatch(0)
	took := time.Since(start)
	var te *bench.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Dispatch: %v, want a *bench.TimeoutError", err)
	}
	if te.Phase != "cpuref dispatch counts exchange" || !slices.Equal(te.Ranks, []int{1}) || te.After != 100*time.Millisecond {
		t.Errorf("%+v", *te)
	}
	if want := "cpuref dispatch counts exchange: timed out after 100 ms waiting for rank 1"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v", took)
	}
	if err := b.Combine(0); err == nil {
		t.Error("combine after a failed dispatch succeeded")
	}
}
