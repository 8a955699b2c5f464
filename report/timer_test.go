package report

import (
	"strings"
	"testing"
)

func TestKernelTimerDoubts(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	per := []RankValues{
		// The asymmetric run of docs/data/sweep_ep2_bf16.json at T=128: rank 0's combine record is
		// longer than the event-timed interval that contains it; rank 1's dispatch is not.
		{Rank: 0, Dispatch: RankPhase{AvgUS: 23.35, Samples: 199}, Combine: RankPhase{AvgUS: 20.85, Samples: 199},
			KernelDispatchUS: f(15.68), KernelCombineUS: f(23.18)},
		{Rank: 1, Dispatch: RankPhase{AvgUS: 23.76, Samples: 199}, Combine: RankPhase{AvgUS: 20.91, Samples: 199},
			KernelDispatchUS: f(21.57), KernelCombineUS: f(13.69)},
		// Within the slack: not named.
		{Rank: 2, Dispatch: RankPhase{AvgUS: 10, Samples: 9}, Combine: RankPhase{AvgUS: 10, Samples: 9},
			KernelDispatchUS: f(10 + TimerSlack), KernelCombineUS: f(9)},
		// No kernel times, or no event samples: nothing to compare.
		{Rank: 3, Dispatch: RankPhase{AvgUS: 1, Samples: 9}, Combine: RankPhase{AvgUS: 1, Samples: 9}},
		{Rank: 4, KernelDispatchUS: f(5), KernelCombineUS: f(5)},
	}
	got := KernelTimerDoubts(per)
	if len(got) != 1 {
		t.Fatalf("got %d doubts, want 1: %q", len(got), got)
	}
	for _, want := range []string{"rank 0 combine:", "23.18 us", "20.85 us"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("%q lacks %q", got[0], want)
		}
	}
	if d := KernelTimerDoubts(nil); d != nil {
		t.Errorf("no ranks: %q", d)
	}
}
