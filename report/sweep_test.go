package report

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sweepPoint(tokens, topk int, d, c float64, kernel bool) SweepPoint {
	r := &Result{Schema: Schema, Config: Config{Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: tokens,
		Hidden: 7168, TopK: topk, Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 200, DispatchDType: "BF16",
		CombineMode: "rank_local_reduce", Backend: "cuda"}}
	sel := int64(tokens * topk)
	r.Summary.Ranks = 2
	r.Summary.Bytes = Bytes{Dispatch: sel * 14336, Combine: sel * 14336, Selections: sel}
	r.Summary.Host.Dispatch = HostPhase{LatencyUS: Stat{Avg: d, Min: d - 1, Max: d + 1},
		ThroughputGBps: RankedStat{Avg: 3.5, Min: 3.25, MinRank: 1, Max: 3.75, MaxRank: 0}}
	r.Summary.Host.Combine = HostPhase{LatencyUS: Stat{Avg: c, Min: c - 1, Max: c + 1},
		ThroughputGBps: RankedStat{Avg: 4.5, Min: 4.25, MinRank: 0, Max: 4.75, MaxRank: 1}}
	r.Summary.Host.Total = HostPhase{LatencyUS: Stat{Avg: d + c + 5, Min: d + c, Max: d + c + 10},
		ThroughputGBps: RankedStat{Avg: 12.5, Min: 12, MinRank: 1, Max: 13, MaxRank: 0}}
	kd, kc := d-6, c-6
	if kernel {
		r.Summary.Kernel = &KernelPerf{
			Dispatch: KernelPhase{LatencyUS: Stat{Avg: kd, Min: kd - 1, Max: kd + 1}, ThroughputGBps: Stat{Avg: 6, Min: 6.5, Max: 5.5}},
			Combine:  KernelPhase{LatencyUS: Stat{Avg: kc, Min: kc - 1, Max: kc + 1}, ThroughputGBps: Stat{Avg: 7, Min: 7.5, Max: 6.5}},
		}
	} else {
		r.Summary.KernelNote = NoteKernelDisabled
	}
	r.Validation = &Validation{Dispatch: Check{Passed: true}, Combine: Check{Passed: true}, CalcDiff: 1e-6,
		GlobalDispatch: true, GlobalCombine: true}
	for rank := range 2 {
		rv := RankValues{Rank: rank, Selections: sel - int64(rank), DispatchBytes: (sel - int64(rank)) * 14336,
			CombineBytes: (sel - int64(rank)) * 14336,
			Dispatch:     RankPhase{AvgUS: d + float64(rank), MinUS: d - 1, MaxUS: d + 1, P50US: d, P99US: d + 1, Samples: 199, ThroughputGBps: 3.5},
			Combine:      RankPhase{AvgUS: c + float64(rank), MinUS: c - 1, MaxUS: c + 1, P50US: c, P99US: c + 1, Samples: 199, ThroughputGBps: 4.5},
			Total:        RankPhase{AvgUS: d + c + 5, MinUS: d + c, MaxUS: d + c + 10, P50US: d + c + 5, P99US: d + c + 9, Samples: 199, ThroughputGBps: 12.5}}
		if kernel {
			kdr, kcr := kd+float64(rank)/4, kc+float64(rank)/4
			rv.KernelDispatchUS, rv.KernelCombineUS = &kdr, &kcr
		}
		r.PerRank = append(r.PerRank, rv)
	}
	return SweepPoint{Tokens: tokens, TopK: topk, Experts: 256, Result: r}
}

func sweepFixture() *Sweep {
	s := &Sweep{Varying: VaryTokens, Points: []SweepPoint{
		sweepPoint(1, 8, 16.25, 15.5, true), sweepPoint(8, 8, 18, 17.125, true), sweepPoint(128, 8, 33.75, 26, false)}}
	s.Config = s.Points[0].Result.Config
	return s
}

func topKFixture() *Sweep {
	s := &Sweep{Varying: VaryTopK, Points: []SweepPoint{sweepPoint(128, 1, 20, 18, true), sweepPoint(128, 8, 33.75, 26, true)}}
	s.Config = s.Points[0].Result.Config
	return s
}

func TestSweepTableGolden(t *testing.T) {
	for name, s := range map[string]*Sweep{"sweep_tokens.txt": sweepFixture(), "sweep_topk.txt": topKFixture()} {
		var b bytes.Buffer
		if err := WriteSweepTable(&b, s); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, name, b.Bytes())
	}
}

// The streaming writers produce the table line for line.
func TestSweepRowsStream(t *testing.T) {
	s := sweepFixture()
	var whole, streamed bytes.Buffer
	if err := WriteSweepTable(&whole, s); err != nil {
		t.Fatal(err)
	}
	partial := &Sweep{Varying: s.Varying, Config: s.Config}
	for i, p := range s.Points {
		partial.Points = append(partial.Points, p)
		if i == 0 {
			if err := WriteSweepHeader(&streamed, partial); err != nil {
				t.Fatal(err)
			}
		}
		if err := WriteSweepRow(&streamed, partial, p); err != nil {
			t.Fatal(err)
		}
	}
	if whole.String() != streamed.String() {
		t.Fatalf("streamed:\n%s\nwhole:\n%s", streamed.String(), whole.String())
	}
	lines := strings.Split(strings.TrimSpace(whole.String()), "\n")
	if len(lines) != 4+len(s.Points) {
		t.Fatalf("%d lines, want a 4-line header and %d rows", len(lines), len(s.Points))
	}
	for _, l := range lines[4:] {
		if len(l) != len(lines[2]) {
			t.Errorf("row %q is not as wide as the header %q", l, lines[2])
		}
	}
}

func TestSweepCSVGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweepCSV(&b, sweepFixture()); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "sweep_tokens.csv", b.Bytes())

	rows, err := csv.NewReader(bytes.NewReader(b.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want header + 3", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	if len(col) != len(rows[0]) {
		t.Fatalf("duplicate column names: %v", rows[0])
	}
	check := func(row int, name, want string) {
		t.Helper()
		i, ok := col[name]
		if !ok {
			t.Fatalf("no column %s", name)
		}
		if got := rows[row][i]; got != want {
			t.Errorf("row %d %s = %q, want %q", row, name, got, want)
		}
	}
	check(1, "tokens", "1")
	check(1, "host_dispatch_avg_us", "16.250")
	check(1, "host_total_tput_min_rank", "1")
	check(1, "kernel_combine_avg_us", "9.500")
	check(1, "kernel_dispatch_tput_min_gbps", "6.500")
	check(1, "bench_iters", "200")
	check(3, "tokens", "128")
	check(3, "selections_rank0", "1024")
	check(3, "dispatch_bytes_rank0", "14680064")
	check(3, "kernel_dispatch_avg_us", "")
	check(3, "kernel_combine_tput_max_gbps", "")
}

func TestSweepJSONRoundTrip(t *testing.T) {
	for _, s := range []*Sweep{sweepFixture(), topKFixture()} {
		var b bytes.Buffer
		if err := WriteSweepJSON(&b, s); err != nil {
			t.Fatal(err)
		}
		if s.Schema != "" {
			t.Fatal("WriteSweepJSON changed its argument")
		}
		path := filepath.Join(t.TempDir(), "sweep.json")
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ParseSweepFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := *s
		want.Schema = SweepSchema
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("round trip lost data:\n got %+v\nwant %+v", got, &want)
		}
		if n := len(got.Points[0].Result.PerRank); n != 2 || got.Points[0].Result.PerRank[1].KernelCombineUS == nil {
			t.Fatalf("per-rank values lost: %+v", got.Points[0].Result.PerRank)
		}
	}
}

func TestSweepRejects(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"", "unexpected end of JSON input"},
		{"[1,2", "unexpected end of JSON input"},
		{"{}", `schema "", want "epbench.sweep/v1"`},
		{`{"schema":"epbench.result/v1","varying":"tokens"}`, `schema "epbench.result/v1"`},
		{`{"schema":"epbench.sweep/v1","varying":"hidden","points":[]}`, `varying "hidden"`},
		{`{"schema":"epbench.sweep/v1","varying":"tokens","points":[]}`, "no points"},
		{`{"schema":"epbench.sweep/v1","varying":"tokens","points":[{"tokens":1}]}`, "point 0 has no result"},
		{`{"schema":"epbench.sweep/v1","varying":"tokens","points":[{"tokens":0,"top_k":8,"experts":256,"result":{}}]}`,
			"point 0: tokens 0, top-k 8, experts 256"},
		{`{"schema":"epbench.sweep/v1","varying":"tokens","points":[{"tokens":"many"}]}`, "cannot unmarshal"},
	} {
		_, err := ParseSweep(strings.NewReader(tc.in))
		if !errors.Is(err, ErrBadSweep) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseSweep(%q) = %v, want ErrBadSweep saying %q", tc.in, err, tc.msg)
		}
	}
	if _, err := ParseSweepFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ParseSweepFile of a missing file succeeded")
	}

	var b bytes.Buffer
	bad := sweepFixture()
	bad.Varying = "hidden"
	for name, err := range map[string]error{
		"table, bad varying": WriteSweepTable(&b, bad),
		"json, bad varying":  WriteSweepJSON(&b, bad),
		"table, nil":         WriteSweepTable(&b, nil),
		"csv, nil":           WriteSweepCSV(&b, nil),
		"json, nil":          WriteSweepJSON(&b, nil),
		"csv, no result":     WriteSweepCSV(&b, &Sweep{Varying: VaryTokens, Points: []SweepPoint{{Tokens: 1}}}),
		"json, no result":    WriteSweepJSON(&b, &Sweep{Varying: VaryTokens, Points: []SweepPoint{{Tokens: 1}}}),
		"row, no result":     WriteSweepRow(&b, sweepFixture(), SweepPoint{Tokens: 1}),
	} {
		if !errors.Is(err, ErrBadSweep) {
			t.Errorf("%s: %v, want ErrBadSweep", name, err)
		}
	}
}
