package stats

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	seq := make([]float64, 0, 101)
	seq = append(seq, 999) // dropped first iteration
	for i := 1; i <= 100; i++ {
		seq = append(seq, float64(i))
	}
	cases := []struct {
		name string
		in   []float64
		want Sample
	}{
		{"empty", nil, Sample{}},
		{"single sample is kept", []float64{5}, Sample{Avg: 5, Min: 5, Max: 5, P50: 5, P99: 5, N: 1}},
		{"first dropped", []float64{100, 1, 2, 3, 4}, Sample{Avg: 2.5, Min: 1, Max: 4, P50: 2, P99: 4, N: 4}},
		{"two samples keep the second", []float64{7, 3}, Sample{Avg: 3, Min: 3, Max: 3, P50: 3, P99: 3, N: 1}},
		{"unsorted", []float64{0, 9, 1, 5}, Sample{Avg: 5, Min: 1, Max: 9, P50: 5, P99: 9, N: 3}},
		{"1..100 after the outlier", seq, Sample{Avg: 50.5, Min: 1, Max: 100, P50: 50, P99: 99, N: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.in); got != tc.want {
				t.Fatalf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSummarizeDoesNotReorderInput(t *testing.T) {
	in := []float64{4, 3, 2, 1}
	Summarize(in)
	if in[0] != 4 || in[3] != 1 {
		t.Fatalf("input modified: %v", in)
	}
}

func TestSelections(t *testing.T) {
	if got := Selections([]int64{0, -1, 5, -1, 3}); got != 3 {
		t.Fatalf("int64: got %d, want 3", got)
	}
	if got := Selections([]int32{-1, -1}); got != 0 {
		t.Fatalf("int32: got %d, want 0", got)
	}
	if got := Selections([]int(nil)); got != 0 {
		t.Fatalf("nil: got %d, want 0", got)
	}
}

func TestByteAccounting(t *testing.T) {
	cases := []struct {
		name             string
		sel, hidden      int
		dt               DType
		dispatch, combin int64
	}{
		// ep_bench rank 0, default shape: 14.55 MB printed for both phases.
		{"bf16 reference", 1015, 7168, BF16, 1015 * 7168 * 2, 1015 * 7168 * 2},
		// 7168 FP8 bytes plus 56 float scales.
		{"fp8 reference", 1015, 7168, FP8E4M3, 1015 * (7168 + 56*4), 1015 * 7168 * 2},
		{"fp8 partial block has no scale", 3, 100, FP8E4M3, 300, 600},
		{"no selections", 0, 7168, BF16, 0, 0},
		{"negative input", -4, 7168, FP8E4M3, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DispatchBytes(tc.sel, tc.hidden, tc.dt); got != tc.dispatch {
				t.Errorf("DispatchBytes = %d, want %d", got, tc.dispatch)
			}
			if got := CombineBytes(tc.sel, tc.hidden); got != tc.combin {
				t.Errorf("CombineBytes = %d, want %d", got, tc.combin)
			}
		})
	}
}

func TestThroughputGBps(t *testing.T) {
	// 1e6 bytes in 10 us is 100 GB/s.
	if got := ThroughputGBps(1_000_000, 10); math.Abs(got-100) > 1e-9 {
		t.Errorf("got %v, want 100", got)
	}
	for _, avg := range []float64{0, -1, math.NaN()} {
		if got := ThroughputGBps(1_000_000, avg); got != 0 {
			t.Errorf("avg %v: got %v, want 0", avg, got)
		}
	}
}

func TestDType(t *testing.T) {
	for in, want := range map[string]DType{"bf16": BF16, "BF16": BF16, "fp8_e4m3": FP8E4M3, "FP8_E4M3": FP8E4M3, " fp8 ": FP8E4M3} {
		got, err := ParseDType(in)
		if err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDType("fp16"); err == nil || err.Error() != `stats: unknown dispatch dtype "fp16" (want bf16 or fp8_e4m3)` {
		t.Errorf("ParseDType(fp16) error = %v", err)
	}
	if BF16.String() != "BF16" || FP8E4M3.String() != "FP8_E4M3" || DType(7).String() != "DType(7)" {
		t.Error("DType.String labels changed")
	}
}
