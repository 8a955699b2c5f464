package bench

import (
	"strings"
	"testing"
)

func TestKernelTimerDoubts(t *testing.T) {
	m := &Measurement{
		// The events include every timed pair, the first too, as the kernel timer does.
		DispatchUs:       []float64{40, 20, 20, 20},
		CombineUs:        []float64{18, 18, 18, 18},
		KernelDispatchUs: 24.9, // within the events' average (25)
		KernelCombineUs:  23.2, // longer than the interval that contains it
		KernelOK:         true,
	}
	got := m.KernelTimerDoubts(1)
	if len(got) != 1 {
		t.Fatalf("got %q, want one doubt", got)
	}
	for _, want := range []string{"rank 1 combine:", "23.20 us", "18.00 us"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("%q lacks %q", got[0], want)
		}
	}
	m.KernelCombineUs = 18 + TimerSlack
	if d := m.KernelTimerDoubts(1); d != nil {
		t.Errorf("within the slack: %q", d)
	}
	m.KernelCombineUs, m.KernelOK = 99, false
	if d := m.KernelTimerDoubts(1); d != nil {
		t.Errorf("without kernel times: %q", d)
	}
}
