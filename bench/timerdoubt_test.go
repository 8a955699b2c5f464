package bench

import (
	"strings"
	"testing"
)

func TestKernelTimerDoubts(t *testing.T) {
	m := &Measurement{
		// The events include every timed pair, the first too, as the kernel timer does.
		DispatchUs:       []float64{21, 20, 20, 20},
		CombineUs:        []float64{18, 18, 18, 18},
		KernelDispatchUs: 20.2, // within the events' average (20.25)
		KernelCombineUs:  23.2, // longer than the intervals that contain the kernels
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

	// A first pair of 2.5 ms among 50 of ~14 us: it lifts the average by ~50 us.
	m.CombineUs = make([]float64, 50)
	for i := range m.CombineUs {
		m.CombineUs[i] = 14 + float64(i%3)
	}
	m.CombineUs[0] = 2500
	m.KernelCombineUs = 60
	got = m.KernelTimerDoubts(0)
	if len(got) != 1 || !strings.Contains(got[0], "rank 0 combine: the first timed pair took 2500.00 us") ||
		!strings.Contains(got[0], "median of the others 15.00 us") || !strings.Contains(got[0], "by up to 49.70 us") {
		t.Errorf("first-pair doubt: %q", got)
	}
	// A first pair a little slower than the rest stays within the slack.
	m.CombineUs[0], m.KernelCombineUs = 15+50*TimerSlack, 15
	if d := m.KernelTimerDoubts(0); d != nil {
		t.Errorf("first pair within the slack: %q", d)
	}

	m.KernelCombineUs, m.KernelOK = 99, false
	if d := m.KernelTimerDoubts(1); d != nil {
		t.Errorf("without kernel times: %q", d)
	}
}
