package report

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/epbench/epbench/stats"
)

func TestParseFormats(t *testing.T) {
	cases := []struct {
		path       string
		format     Format
		ranks      int
		dtype      string
		dispatch   Stat // host
		total      Stat
		dispatchTp RankedStat
		kernel     *Stat // kernel dispatch
		note       string
		bytes      Bytes
		cfg        *Config
	}{
		{
			path: "reference/ll_t128_i50.ep_bench.out", format: FormatNCCLEP, ranks: 2, dtype: "BF16",
			dispatch:   Stat{40.40, 37.60, 47.65},
			total:      Stat{97.01, 91.55, 113.86},
			dispatchTp: RankedStat{Avg: 360.19, Min: 353.02, MinRank: 0, Max: 367.30, MaxRank: 1},
			kernel:     &Stat{32.06, 31.43, 32.69},
			bytes:      Bytes{Dispatch: 14_550_000, Combine: 14_550_000, Selections: 1015},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: 128, Hidden: 7168, TopK: 8,
				Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 50, DispatchDType: "BF16", NVLink: true,
				CUPTI: "enabled (kernel-level GPU timing available)",
			},
		},
		{
			path: "formats/ncclep_nocupti.out", format: FormatNCCLEP, ranks: 2, dtype: "BF16",
			dispatch:   Stat{27.09, 24.29, 40.67},
			total:      Stat{54.50, 51.33, 68.83},
			dispatchTp: RankedStat{Avg: 1.06, Min: 1.03, MinRank: 1, Max: 1.09, MaxRank: 0},
			note:       "CUPTI support was not compiled.",
			bytes:      Bytes{Dispatch: 30_000, Combine: 30_000, Selections: 2},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: 1, Hidden: 7168, TopK: 8,
				Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 50, DispatchDType: "BF16", NVLink: true,
				CUPTI: "not available (kernel timing will report 0; ensure CUDA Toolkit with CUPTI headers is installed)",
			},
		},
		{
			path: "formats/nccl_ext_ll.out", format: FormatNCCLExtensions, ranks: 8, dtype: "BF16",
			dispatch:   Stat{62.50, 55.25, 90.00},
			total:      Stat{141.26, 130.00, 170.00},
			dispatchTp: RankedStat{Avg: 154.10, Min: 150.20, MinRank: 7, Max: 158.00, MaxRank: 0},
			kernel:     &Stat{50.00, 45.00, 58.00},
			bytes:      Bytes{Dispatch: 9_630_000, Combine: 14_540_000, Selections: 1014},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 8, Tokens: 128, Hidden: 7168, TopK: 8,
				Experts: 256, LocalExperts: 32, Warmup: 10, Iters: 50, DispatchDType: "BF16", NVLink: true,
				CUPTI: "enabled (kernel-level GPU timing available)",
			},
		},
		{
			// The kernel numbers come from the second (in-process CUPTI) section,
			// printed min first.
			path: "formats/seed_inproc.out", format: FormatSeed, ranks: 8, dtype: "BF16",
			dispatch:   Stat{45.49, 40.12, 60.01},
			total:      Stat{98.74, 90.00, 120.00},
			dispatchTp: RankedStat{Avg: 319.87, Min: 310.00, MinRank: 3, Max: 330.00, MaxRank: 5},
			kernel:     &Stat{Avg: 35.50, Min: 30.12, Max: 48.00},
			bytes:      Bytes{Dispatch: 14_550_000, Combine: 14_550_000, Selections: 1015},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Ranks: 8, Tokens: 128, Hidden: 7168, TopK: 8, Experts: 256,
				LocalExperts: 32, Warmup: 10, Iters: 50, DispatchDType: "BF16", CombineMode: "rank_local_reduce",
			},
		},
		{
			path: "formats/seed_fp8_host.out", format: FormatSeed, ranks: 4, dtype: "FP8_E4M3",
			dispatch:   Stat{21.50, 19.75, 30.25},
			total:      Stat{50.25, 46.00, 61.00},
			dispatchTp: RankedStat{Avg: 100.53, Min: 98.10, MinRank: 2, Max: 102.40, MaxRank: 0},
			note:       "kernel-only pass disabled or unavailable.",
			bytes:      Bytes{Dispatch: 2_160_000, Combine: 4_190_000, Selections: 512},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Ranks: 4, Tokens: 64, Hidden: 4096, TopK: 8, Experts: 128,
				LocalExperts: 32, Warmup: 10, Iters: 50, DispatchDType: "FP8_E4M3", CombineMode: "direct_send",
			},
		},
		{
			path: "golden/note_cpu.txt", format: FormatEpbench, ranks: 2, dtype: "BF16",
			dispatch:   Stat{40.40, 37.60, 47.65},
			total:      Stat{97.01, 91.55, 113.86},
			dispatchTp: RankedStat{Avg: 360.19, Min: 353.02, MinRank: 0, Max: 367.30, MaxRank: 1},
			note:       NoteCPUBackend,
			bytes:      Bytes{Dispatch: 14_550_000, Combine: 14_550_000, Selections: 1015},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: 128, Hidden: 7168, TopK: 8,
				Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 50, DispatchDType: "BF16", NVLink: true,
				CUPTI: "not used (cpu backend)", Backend: "cpu", CombineMode: "rank_local_reduce",
			},
		},
		{
			path: "golden/fp8.txt", format: FormatEpbench, ranks: 2, dtype: "FP8_E4M3",
			dispatch:   Stat{40.40, 37.60, 47.65},
			total:      Stat{97.01, 91.55, 113.86},
			dispatchTp: RankedStat{Avg: 185.72, Min: 182.03, MinRank: 0, Max: 189.39, MaxRank: 1},
			kernel:     &Stat{32.06, 31.43, 32.69},
			bytes:      Bytes{Dispatch: 7_500_000, Combine: 14_550_000, Selections: 1015},
			cfg: &Config{
				Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: 128, Hidden: 7168, TopK: 8,
				Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 50, DispatchDType: "FP8_E4M3", NVLink: true,
				CUPTI: "enabled (kernel-level GPU timing available)", Backend: "cuda", CombineMode: "rank_local_reduce",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			p, err := ParseFile(filepath.Join("testdata", tc.path))
			if err != nil {
				t.Fatal(err)
			}
			s := p.Summary
			if p.Format != tc.format || s.Ranks != tc.ranks || s.DispatchDType != tc.dtype {
				t.Errorf("format %v, ranks %d, dtype %q; want %v, %d, %q", p.Format, s.Ranks, s.DispatchDType, tc.format, tc.ranks, tc.dtype)
			}
			if s.Host.Dispatch.LatencyUS != tc.dispatch || s.Host.Total.LatencyUS != tc.total {
				t.Errorf("host dispatch %+v total %+v; want %+v %+v", s.Host.Dispatch.LatencyUS, s.Host.Total.LatencyUS, tc.dispatch, tc.total)
			}
			if s.Host.Dispatch.ThroughputGBps != tc.dispatchTp {
				t.Errorf("dispatch throughput %+v, want %+v", s.Host.Dispatch.ThroughputGBps, tc.dispatchTp)
			}
			switch {
			case tc.kernel == nil && s.Kernel != nil:
				t.Errorf("unexpected kernel numbers %+v", s.Kernel)
			case tc.kernel != nil && (s.Kernel == nil || s.Kernel.Dispatch.LatencyUS != *tc.kernel):
				t.Errorf("kernel %+v, want dispatch %+v", s.Kernel, *tc.kernel)
			}
			if s.KernelNote != tc.note {
				t.Errorf("note %q, want %q", s.KernelNote, tc.note)
			}
			if s.Bytes != tc.bytes {
				t.Errorf("bytes %+v, want %+v", s.Bytes, tc.bytes)
			}
			if !reflect.DeepEqual(p.Config, tc.cfg) {
				t.Errorf("config\n got  %+v\n want %+v", p.Config, tc.cfg)
			}
			if want := LabelFromPath(tc.path); p.Label != want {
				t.Errorf("label %q, want %q", p.Label, want)
			}
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := referenceResult(t, stats.BF16)
	r.Topology = []string{"GPU 0: NVIDIA H200", "GPU 1: NVIDIA H200"}
	r.Validation = &Validation{Dispatch: Check{Passed: true}, Combine: Check{Detail: "NaN in output"}, CalcDiff: math.NaN(), GlobalDispatch: true}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "result.json", b.Bytes())
	if !strings.Contains(b.String(), `"calc_diff": null`) {
		t.Error("NaN calc_diff should be written as null")
	}

	p, err := ParseSummary(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if p.Format != FormatEpbenchJSON || !reflect.DeepEqual(p.Summary, r.Summary) || !reflect.DeepEqual(*p.Config, r.Config) {
		t.Errorf("JSON round trip changed the result:\n got  %+v\n want %+v", p.Summary, r.Summary)
	}
	// The JSON and the text must print the same summary.
	fromJSON := render(t, func(w *bytes.Buffer) error { return WriteSummary(w, p.Summary) })
	fromModel := render(t, func(w *bytes.Buffer) error { return WriteSummary(w, r.Summary) })
	if fromJSON != fromModel {
		t.Errorf("summary differs after JSON:\n%s\n%s", fromJSON, fromModel)
	}

	var back Result
	if err := back.Validation.UnmarshalJSON([]byte(`{"calc_diff": null}`)); err == nil {
		t.Error("unmarshal into a nil *Validation should fail, not panic")
	}
	var v Validation
	if err := v.UnmarshalJSON([]byte(`{"calc_diff": 1.5e-06, "dispatch": {"passed": true}}`)); err != nil || v.CalcDiff != 1.5e-06 || !v.Dispatch.Passed {
		t.Errorf("calc_diff: %+v, %v", v, err)
	}
}

func TestParseErrors(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("testdata", "reference", "ll_t128_i50.ep_bench.out"))
	if err != nil {
		t.Fatal(err)
	}
	valid := string(ref)
	cases := []struct {
		name  string
		input string
		is    error
		msg   string
	}{
		{"empty", "", ErrNoSummary, "report: no low-latency summary found"},
		{"blank", " \n\t\n", ErrNoSummary, "report: no low-latency summary found"},
		{"log without summary", "NCCL version 2.30.7\nRank 0: handle creation took 25.33 ms\n", ErrNoSummary, "report: no low-latency summary found"},
		{"header only", valid[:strings.Index(valid, "=== Summary")], ErrNoSummary, "report: no low-latency summary found"},
		{
			"truncated after dispatch",
			valid[:strings.Index(valid, "Combine (BF16):")], ErrBadSummary,
			"report: malformed summary: no host-observed Combine, Total (D+C) line",
		},
		{
			"two runs", valid + valid, ErrBadSummary,
			"report: malformed summary: line 103: a second summary block; pass one run per input",
		},
		{
			"duplicate host line",
			strings.Replace(valid, "Combine (BF16):", "Dispatch (BF16):", 1), ErrBadSummary,
			"report: malformed summary: line 43: a second host Dispatch line",
		},
		{
			"number out of range",
			strings.Replace(valid, "avg=40.40 us", "avg=1e999 us", 1), ErrBadSummary,
			`report: malformed summary: line 41: number "1e999": strconv.ParseFloat: parsing "1e999": value out of range`,
		},
		{
			"rank out of range",
			strings.Replace(valid, "(rank 0), max=367.30", "(rank 99999999999999999999), max=367.30", 1), ErrBadSummary,
			`report: malformed summary: line 42: rank: strconv.Atoi: parsing "99999999999999999999": value out of range`,
		},
		{
			"byte counts garbled",
			strings.Replace(valid, "combine=14.55 MB", "combine=lots", 1), ErrBadSummary,
			`report: malformed summary: line 54: unreadable byte counts "Byte counts: dispatch=14.55 MB (BF16), combine=lots (BF16), selections=1015"`,
		},
		{
			"line too long", "=== Summary (Low Latency, across 2 ranks) ===\n" + strings.Repeat("x", maxLine+1), ErrBadSummary,
			"report: malformed summary: line 2 is longer than 1048576 bytes",
		},
		{"JSON syntax", `{"schema": `, ErrBadSummary, "report: malformed summary: JSON: unexpected end of JSON input"},
		{"JSON not ours", `{"schema": "other/v9", "summary": {"ranks": 2}}`, ErrBadSummary,
			`report: malformed summary: JSON schema "other/v9", want "epbench.result/v1"`},
		{"JSON without ranks", `{"schema": "epbench.result/v1"}`, ErrBadSummary,
			"report: malformed summary: JSON summary has 0 ranks"},
		{"JSON wrong type", `{"schema": "epbench.result/v1", "summary": {"ranks": "two"}}`, ErrBadSummary,
			"report: malformed summary: JSON: json: cannot unmarshal string into Go struct field Summary.summary.ranks of type int"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseSummary(strings.NewReader(tc.input))
			if !errors.Is(err, tc.is) || err.Error() != tc.msg {
				t.Fatalf("got %v, %v\nwant %q", p, err, tc.msg)
			}
		})
	}

	if _, err := ParseSummary(iotest.ErrReader(errors.New("I/O error"))); err == nil || err.Error() != "report: read: I/O error" {
		t.Errorf("read error: %v", err)
	}
	if _, err := ParseSummary(iotest.TimeoutReader(strings.NewReader("=== Summary (Low Latency, across 2 ranks) ===\n"))); err == nil || err.Error() != "report: read: timeout" {
		t.Errorf("read error mid-text: %v", err)
	}
	_, err = ParseFile(filepath.Join("testdata", "no-such-file.out"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	_, err = ParseFile(filepath.Join("testdata", "formats", "README.md"))
	if err == nil || !errors.Is(err, ErrNoSummary) || !strings.HasPrefix(err.Error(), filepath.Join("testdata", "formats", "README.md")+": ") {
		t.Errorf("file without summary: %v", err)
	}
}

// C's spellings of non-numbers are read as numbers, and refused: no run
// prints a time or throughput of nan or inf. A negative zero is zero.
func TestParseCNumbers(t *testing.T) {
	ref := string(mustRead(t, "reference/ll_t1_i50.ep_bench.out"))
	for _, spelled := range []string{"-nan", "nan", "inf", "+inf", "-inf"} {
		in := strings.Replace(ref, "max=40.67 us", "max="+spelled+" us", 1)
		_, err := ParseSummary(strings.NewReader(in))
		want := `report: malformed summary: line 41: impossible value "` + spelled + `"`
		if !errors.Is(err, ErrBadSummary) || !strings.HasPrefix(fmt.Sprint(err), want) {
			t.Errorf("%s: got %v, want %q...", spelled, err, want)
		}
	}
	p, err := ParseSummary(strings.NewReader(strings.Replace(ref, "min=24.29 us", "min=-0.00 us", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Summary.Host.Dispatch.LatencyUS; d.Min != 0 || d.Avg != 27.09 {
		t.Errorf("got %+v", d)
	}
}

// epbench's JSON cannot hold nan, but a hand-edited one can hold a negative
// time: it is refused with the field named.
func TestParseJSONRefusesImpossibleNumbers(t *testing.T) {
	b := mustRead(t, "golden/result.json")
	in := strings.Replace(string(b), `"avg": 40.39796845030048`, `"avg": -40.39796845030048`, 1)
	if in == string(b) {
		t.Fatal("no dispatch average in golden/result.json")
	}
	_, err := ParseSummary(strings.NewReader(in))
	want := "report: malformed summary: JSON summary: host.dispatch.latency_us.avg = -40.39796845030048: impossible value"
	if !errors.Is(err, ErrBadSummary) || fmt.Sprint(err) != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLabelFromPath(t *testing.T) {
	cases := map[string]string{
		"runs/ll_t128_i50.ep_bench.out": "ll_t128_i50.ep_bench",
		"mscclpp.txt":                   "mscclpp",
		"/tmp/nccl-ep":                  "nccl-ep",
		"résultat_très_long.json":       "résultat_très_long",
		".hidden":                       ".hidden",
	}
	for in, want := range cases {
		if got := LabelFromPath(in); got != want {
			t.Errorf("LabelFromPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatString(t *testing.T) {
	if FormatSeed.String() != "ep_bench_ll.py" || Format(0).String() != "Format(0)" {
		t.Error("Format names changed")
	}
}
