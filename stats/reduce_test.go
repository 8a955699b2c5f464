package stats_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/epbench/epbench/internal/localcomm"
	. "github.com/epbench/epbench/stats"
)

// reduceAll runs Reduce on n local ranks, rank r contributing in[r], and
// checks that every rank received the same answer.
func reduceAll(t *testing.T, mode Mode, in []Local) Global {
	t.Helper()
	out := make([]Global, len(in))
	err := localcomm.Run(len(in), func(c Comm) error {
		g, err := Reduce(c, mode, in[c.Rank()])
		out[c.Rank()] = g
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := 1; r < len(out); r++ {
		if !reflect.DeepEqual(out[r], out[0]) {
			t.Fatalf("rank %d got %+v, rank 0 got %+v", r, out[r], out[0])
		}
	}
	return out[0]
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func checkGlobal(t *testing.T, got, want Global) {
	t.Helper()
	ok := got.Mode == want.Mode && got.Ranks == want.Ranks &&
		near(got.Avg, want.Avg) && near(got.Min, want.Min) && near(got.Max, want.Max) &&
		near(got.Throughput.Avg, want.Throughput.Avg) &&
		near(got.Throughput.Min, want.Throughput.Min) && got.Throughput.MinRank == want.Throughput.MinRank &&
		near(got.Throughput.Max, want.Throughput.Max) && got.Throughput.MaxRank == want.Throughput.MaxRank
	if !ok {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func host(avg, lo, hi float64, bytes int64) Local {
	return Local{Sample: Sample{Avg: avg, Min: lo, Max: hi, N: 49}, Bytes: bytes}
}

func TestReduceHost(t *testing.T) {
	cases := []struct {
		name string
		in   []Local
		want Global
	}{
		{
			name: "1 rank",
			in:   []Local{host(40, 35, 60, 2_000_000)},
			want: Global{Mode: Host, Ranks: 1, Avg: 40, Min: 35, Max: 60,
				Throughput: Throughput{Avg: 50, Min: 50, MinRank: 0, Max: 50, MaxRank: 0}},
		},
		{
			// avg (10+30)/2 = 20; avg GB/s uses rank 0's 1e6 bytes: 1e-3/20e-6 = 50.
			// Own GB/s: rank 0 1e-3/10e-6 = 100, rank 1 3e-3/30e-6 = 100 → tie; rank 0 owns both.
			name: "2 ranks",
			in:   []Local{host(10, 9, 14, 1_000_000), host(30, 8, 31, 3_000_000)},
			want: Global{Mode: Host, Ranks: 2, Avg: 20, Min: 8, Max: 31,
				Throughput: Throughput{Avg: 50, Min: 100, MinRank: 0, Max: 100, MaxRank: 0}},
		},
		{
			// avg 25; own GB/s 100, 150, 50, 100 → min 50 (rank 2), max 150 (rank 1).
			name: "4 ranks",
			in: []Local{
				host(10, 8, 12, 1_000_000), host(20, 15, 30, 3_000_000),
				host(30, 25, 50, 1_500_000), host(40, 5, 45, 4_000_000),
			},
			want: Global{Mode: Host, Ranks: 4, Avg: 25, Min: 5, Max: 50,
				Throughput: Throughput{Avg: 40, Min: 50, MinRank: 2, Max: 150, MaxRank: 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := reduceAll(t, Host, tc.in)
			checkGlobal(t, got, tc.want)
			for r, rs := range got.PerRank {
				if rs.Rank != r || rs.Sample != tc.in[r].Sample || rs.Bytes != tc.in[r].Bytes {
					t.Errorf("PerRank[%d] = %+v, want input %+v", r, rs, tc.in[r])
				}
				if want := ThroughputGBps(tc.in[r].Bytes, tc.in[r].Sample.Avg); rs.ThroughputGBps != want {
					t.Errorf("PerRank[%d] throughput %v, want %v", r, rs.ThroughputGBps, want)
				}
			}
		})
	}
}

func kernel(avg float64, bytes int64) Local { return Local{Sample: Sample{Avg: avg}, Bytes: bytes} }

func TestReduceKernelOnly(t *testing.T) {
	cases := []struct {
		name string
		in   []Local
		want Global
	}{
		{
			name: "1 rank",
			in:   []Local{kernel(32, 3_200_000)},
			want: Global{Mode: KernelOnly, Ranks: 1, Avg: 32, Min: 32, Max: 32,
				Throughput: Throughput{Avg: 100, Min: 100, Max: 100}},
		},
		{
			// Only rank 0's bytes count: 3.2e-3 GB over 40, 30 and 50 us.
			name: "2 ranks",
			in:   []Local{kernel(50, 3_200_000), kernel(30, 9_999_999)},
			want: Global{Mode: KernelOnly, Ranks: 2, Avg: 40, Min: 30, Max: 50,
				Throughput: Throughput{Avg: 80, Min: 3.2e-3 / 30e-6, MinRank: 1, Max: 64, MaxRank: 0}},
		},
		{
			// "min" GB/s comes from the 30 us minimum, so it exceeds avg and max.
			name: "4 ranks",
			in:   []Local{kernel(30, 3_200_000), kernel(32, 1), kernel(31, 2), kernel(35, 3)},
			want: Global{Mode: KernelOnly, Ranks: 4, Avg: 32, Min: 30, Max: 35,
				Throughput: Throughput{Avg: 100, Min: 3.2e-3 / 30e-6, MinRank: 0, Max: 3.2e-3 / 35e-6, MaxRank: 3}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := reduceAll(t, KernelOnly, tc.in)
			checkGlobal(t, got, tc.want)
			if got.Throughput.Min < got.Throughput.Max && got.Ranks > 1 {
				t.Errorf("kernel-only throughput min %v should be the higher number (max %v)", got.Throughput.Min, got.Throughput.Max)
			}
		})
	}
}

// Values (set-up timings): the same avg/min/max over one value per rank,
// and no throughput whatever bytes are given.
func TestReduceValues(t *testing.T) {
	got := reduceAll(t, Values, []Local{kernel(200, 5), kernel(100, 0), kernel(300, 0)})
	checkGlobal(t, got, Global{Mode: Values, Ranks: 3, Avg: 200, Min: 100, Max: 300})
}

// TestReduceMatchesReference rebuilds the summary numbers of
// reference/ll_t128_i50.ep_bench.out (2 ranks, 1015 and 1014 selections,
// hidden 7168) from per-rank values chosen to be consistent with every
// printed digit, and checks the printed rounding.
func TestReduceMatchesReference(t *testing.T) {
	b0 := DispatchBytes(1015, 7168, BF16) // 14.55 MB
	b1 := DispatchBytes(1014, 7168, BF16)
	if got := fmt.Sprintf("%.2f", float64(b0)/1e6); got != "14.55" {
		t.Fatalf("rank 0 MB = %s, want 14.55", got)
	}
	// Per-rank host averages that reproduce the per-rank GB/s: avg = bytes/(GB/s·1e3).
	ownAvg := func(bytes int64, gbps float64) float64 { return float64(bytes) / (gbps * 1e3) }
	type want struct{ avg, min, max, tpAvg, tpMin, tpMax string }
	fmtG := func(g Global) want {
		f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
		return want{f(g.Avg), f(g.Min), f(g.Max), f(g.Throughput.Avg),
			fmt.Sprintf("%.2f (rank %d)", g.Throughput.Min, g.Throughput.MinRank),
			fmt.Sprintf("%.2f (rank %d)", g.Throughput.Max, g.Throughput.MaxRank)}
	}
	check := func(name string, got, exp want) {
		t.Helper()
		if got != exp {
			t.Errorf("%s: got %+v, want %+v", name, got, exp)
		}
	}

	d := reduceAll(t, Host, []Local{
		host(ownAvg(b0, 353.02), 37.60, 47.65, b0),
		host(ownAvg(b1, 367.30), 38.00, 45.00, b1),
	})
	check("dispatch", fmtG(d), want{"40.40", "37.60", "47.65", "360.19", "353.02 (rank 0)", "367.30 (rank 1)"})

	c := reduceAll(t, Host, []Local{
		host(ownAvg(b0, 303.49), 45.86, 63.04, b0),
		host(ownAvg(b1, 288.84), 46.00, 60.00, b1),
	})
	check("combine", fmtG(c), want{"49.14", "45.86", "63.04", "296.13", "288.84 (rank 1)", "303.49 (rank 0)"})

	tot := reduceAll(t, Host, []Local{
		host(ownAvg(2*b0, 299.92), 91.55, 113.86, 2*b0),
		host(ownAvg(2*b1, 299.76), 92.00, 110.00, 2*b1),
	})
	check("total", fmtG(tot), want{"97.01", "91.55", "113.86", "299.99", "299.76 (rank 1)", "299.92 (rank 0)"})

	kd := reduceAll(t, KernelOnly, []Local{kernel(31.4306, b0), kernel(32.6903, b1)})
	check("kernel dispatch", fmtG(kd), want{"32.06", "31.43", "32.69", "453.86", "462.96 (rank 0)", "445.12 (rank 1)"})
	kc := reduceAll(t, KernelOnly, []Local{kernel(40.0309, b0), kernel(43.3175, b1)})
	check("kernel combine", fmtG(kc), want{"41.67", "40.03", "43.32", "349.16", "363.50 (rank 0)", "335.92 (rank 1)"})
}

func TestReduceErrors(t *testing.T) {
	if _, err := Reduce(nil, Host, Local{}); !errors.Is(err, ErrBadComm) {
		t.Errorf("nil comm: %v", err)
	}
	comms, err := localcomm.NewGroup(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reduce(comms[0], Mode(0), Local{}); err == nil || err.Error() != "stats: unknown reduction mode 0" {
		t.Errorf("bad mode: %v", err)
	}
	if _, err := Reduce(shortComm{comms[0]}, Host, Local{}); !errors.Is(err, ErrBadComm) {
		t.Errorf("short answer: %v", err)
	}
	if _, err := Reduce(failComm{comms[0]}, KernelOnly, Local{}); err == nil || err.Error() != "stats: allreduce sum: link down" {
		t.Errorf("failing comm: %v", err)
	}
	if _, err := localcomm.NewGroup(0); !errors.Is(err, ErrBadComm) {
		t.Errorf("empty group: %v", err)
	}
}

// shortComm answers every collective with one element too few.
type shortComm struct{ Comm }

func (s shortComm) AllreduceFloat64(in []float64, op Op) ([]float64, error) {
	out, err := s.Comm.AllreduceFloat64(in, op)
	return out[:len(out)-1], err
}

type failComm struct{ Comm }

func (failComm) AllreduceFloat64([]float64, Op) ([]float64, error) {
	return nil, errors.New("link down")
}

func TestLocalGroupMismatch(t *testing.T) {
	err := localcomm.Run(2, func(c Comm) error {
		op := Sum
		if c.Rank() == 1 {
			op = Max
		}
		_, err := c.AllreduceFloat64([]float64{1}, op)
		if !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("op mismatch: got %v", err)
		}
		_, err = c.AllreduceMinLoc(make([]ValueRank, 1+c.Rank()))
		if !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("length mismatch: got %v", err)
		}
		// The group stays usable after a mismatch.
		out, err := c.AllreduceFloat64([]float64{float64(c.Rank() + 1)}, Sum)
		if err != nil || out[0] != 3 {
			return fmt.Errorf("after mismatch: %v, %v", out, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLocalGroupCollectives(t *testing.T) {
	err := localcomm.Run(4, func(c Comm) error {
		r := float64(c.Rank())
		in := []float64{r, -r, 10 * r}
		// A slice, not a map: every rank must call the collectives in the same order.
		for _, tc := range []struct {
			op   Op
			want []float64
		}{{Sum, []float64{6, -6, 60}}, {Min, []float64{0, -3, 0}}, {Max, []float64{3, 0, 30}}} {
			got, err := c.AllreduceFloat64(in, tc.op)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				return fmt.Errorf("%s: got %v, %v; want %v", tc.op, got, err, tc.want)
			}
		}
		// Ranks 1 and 3 tie on the lowest value, ranks 0 and 2 on the highest:
		// the lower rank wins, as in MPI.
		v := []ValueRank{{Value: float64(c.Rank() % 2), Rank: c.Rank()}}
		lo, err := c.AllreduceMinLoc([]ValueRank{{Value: -v[0].Value, Rank: c.Rank()}})
		if err != nil || lo[0] != (ValueRank{Value: -1, Rank: 1}) {
			return fmt.Errorf("minloc: %v, %v", lo, err)
		}
		hi, err := c.AllreduceMaxLoc([]ValueRank{{Value: -v[0].Value, Rank: c.Rank()}})
		if err != nil || hi[0] != (ValueRank{Value: 0, Rank: 0}) {
			return fmt.Errorf("maxloc: %v, %v", hi, err)
		}
		if _, err := c.AllreduceFloat64(in, Op(0)); err == nil {
			return errors.New("Op(0) accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
