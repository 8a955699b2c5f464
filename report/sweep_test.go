package report

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
)

func sweepFixture() *Sweep {
	point := func(t int, d, c float64, kernel bool) SweepPoint {
		r := &Result{Config: Config{Ranks: 2, Hidden: 7168, TopK: 8, Experts: 256, DispatchDType: "BF16", CombineMode: "rank_local_reduce", Backend: "cuda"}}
		r.Summary.Bytes = Bytes{Dispatch: int64(t) * 8 * 14336, Combine: int64(t) * 8 * 14336, Selections: int64(t * 8)}
		r.Summary.Host.Dispatch.LatencyUS = Stat{Avg: d, Min: d - 1, Max: d + 1}
		r.Summary.Host.Combine.LatencyUS = Stat{Avg: c, Min: c - 1, Max: c + 1}
		r.Summary.Host.Total.LatencyUS = Stat{Avg: d + c + 5, Min: d + c, Max: d + c + 10}
		r.Summary.Host.Total.ThroughputGBps = RankedStat{Avg: 12.5, Min: 12, MinRank: 1, Max: 13, MaxRank: 0}
		if kernel {
			r.Summary.Kernel = &KernelPerf{
				Dispatch: KernelPhase{LatencyUS: Stat{Avg: d - 6, Min: d - 7, Max: d - 5}},
				Combine:  KernelPhase{LatencyUS: Stat{Avg: c - 6, Min: c - 7, Max: c - 5}},
			}
		}
		return SweepPoint{Tokens: t, TopK: 8, Experts: 256, Result: r}
	}
	s := &Sweep{Varying: "tokens", Points: []SweepPoint{point(1, 16.25, 15.5, true), point(128, 33.75, 26, false)}}
	s.Config = s.Points[0].Result.Config
	return s
}

func TestSweepTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweepTable(&b, sweepFixture()); err != nil {
		t.Fatal(err)
	}
	want := `# epbench sweep over tokens: 2 ranks, hidden 7168, top-k 8, experts 256, BF16, rank_local_reduce, backend cuda
#
#   tokens     sel     host-D     host-C   host-D+C   kernel-D   kernel-C   D+C-tput
#          (rank0)       (us)       (us)       (us)       (us)       (us)     (GB/s)
         1       8      16.25      15.50      36.75      10.25       9.50      12.50
       128    1024      33.75      26.00      64.75          -          -      12.50
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSweepCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweepCSV(&b, sweepFixture()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want header + 2", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, r := range rows {
		if len(r) != len(sweepCSVHeader) {
			t.Fatalf("row of %d fields, header has %d", len(r), len(sweepCSVHeader))
		}
	}
	check := func(row int, name, want string) {
		t.Helper()
		if got := rows[row][col[name]]; got != want {
			t.Errorf("row %d %s = %q, want %q", row, name, got, want)
		}
	}
	check(1, "tokens", "1")
	check(1, "host_dispatch_avg_us", "16.250")
	check(1, "host_total_tput_min_rank", "1")
	check(1, "kernel_combine_avg_us", "9.500")
	check(2, "tokens", "128")
	check(2, "selections_rank0", "1024")
	check(2, "kernel_dispatch_avg_us", "")
}

func TestSweepJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	s := sweepFixture()
	if err := WriteSweepJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	got, err := ParseSweep(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Schema != SweepSchema || len(got.Points) != 2 || got.Points[1].Tokens != 128 ||
		got.Points[0].Result.Summary.Kernel.Combine.LatencyUS.Avg != 9.5 || got.Points[1].Result.Summary.Kernel != nil {
		t.Fatalf("round trip lost data: %+v", got)
	}
	for _, bad := range []string{"", "{}", `{"schema":"epbench.sweep/v1","points":[]}`, `{"schema":"epbench.sweep/v1","points":[{"tokens":1}]}`, "[1,2"} {
		if _, err := ParseSweep(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSweep(%q) accepted", bad)
		}
	}
}
