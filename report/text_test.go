package report

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/epbench/epbench/stats"
)

func render(t *testing.T, write func(*bytes.Buffer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReferenceBlocks checks, byte for byte, every block of
// ll_t128_i50.ep_bench.out that epbench prints in ep_bench's format, with the
// numbers produced by the real reductions.
func TestReferenceBlocks(t *testing.T) {
	ref := readRef(t, "ll_t128_i50.ep_bench.out")
	r := referenceResult(t, stats.BF16)

	got := render(t, func(b *bytes.Buffer) error { return WriteSummary(b, r.Summary) })
	if want := refBlock(t, ref, "=== Summary", "Byte counts:"); got != want {
		t.Errorf("summary\n--- got ---\n%s--- want ---\n%s", got, want)
	}

	header := render(t, func(b *bytes.Buffer) error { return WriteHeader(b, r.Config, nil) })
	lines := strings.Split(header, "\n")
	if lines[0] != Title {
		t.Errorf("title %q", lines[0])
	}
	// Our lines 2..19 are ep_bench's "Configuration:" .. "Use zero-copy" lines.
	wantCfg := strings.TrimPrefix(refBlock(t, ref, "Configuration:", "  Use zero-copy:"), "\n")
	if gotCfg := strings.Join(lines[1:19], "\n") + "\n"; gotCfg != wantCfg {
		t.Errorf("configuration\n--- got ---\n%s--- want ---\n%s", gotCfg, wantCfg)
	}
	if tail := strings.Join(lines[19:], "\n"); tail != "  Backend:         cuda\n  Combine mode:    rank_local_reduce\n\n" {
		t.Errorf("epbench's own header lines: %q", tail)
	}

	setup := render(t, func(b *bytes.Buffer) error { return WriteSetup(b, *r.Setup) })
	setup = strings.Replace(setup, "Group creation:      ", "ncclEpCreateGroup:   ", 1)
	if want := refBlock(t, ref, "=== Setup Timing", "Handle creation:"); setup != want {
		t.Errorf("setup\n--- got ---\n%s--- want ---\n%s", setup, want)
	}

	mem := render(t, func(b *bytes.Buffer) error { return WriteMemory(b, *r.Memory) })
	if want := refBlock(t, ref, "=== GPU Memory", "EP-induced delta:"); mem != want {
		t.Errorf("memory\n--- got ---\n%s--- want ---\n%s", mem, want)
	}
}

func TestReferenceValidationBlock(t *testing.T) {
	ref := readRef(t, "ll_t128_i50_V.ep_bench.out")
	v := Validation{Dispatch: Check{Passed: true}, Combine: Check{Passed: true}, CalcDiff: 1.515343e-06, GlobalDispatch: true, GlobalCombine: true}
	got := render(t, func(b *bytes.Buffer) error { return WriteValidation(b, v) })
	if want := refBlock(t, ref, "=== Data Validation", "Global validation:"); got != want {
		t.Errorf("validation\n--- got ---\n%s--- want ---\n%s", got, want)
	}
}

// TestReferenceRoundTrip parses every reference output and writes its summary
// back: the result must be the reference's block, byte for byte.
func TestReferenceRoundTrip(t *testing.T) {
	for _, name := range []string{
		"ll_t128_i50.ep_bench.out", "ll_t128_i200.ep_bench.out", "ll_t128_i50_V.ep_bench.out",
		"ll_t1_i50.ep_bench.out", "ll_t32_i50.ep_bench.out",
	} {
		t.Run(name, func(t *testing.T) {
			ref := readRef(t, name)
			p, err := ParseSummary(strings.NewReader(ref))
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, func(b *bytes.Buffer) error { return WriteSummary(b, p.Summary) })
			if want := refBlock(t, ref, "=== Summary", "Byte counts:"); got != want {
				t.Errorf("--- got ---\n%s--- want ---\n%s", got, want)
			}
		})
	}
}

func TestTextVariants(t *testing.T) {
	base := referenceResult(t, stats.BF16)
	fp8 := referenceResult(t, stats.FP8E4M3)
	topology := []string{
		"GPU 0: NVIDIA H200 (sm_90, 132 SMs, 143156 MiB)",
		"GPU 1: NVIDIA H200 (sm_90, 132 SMs, 143156 MiB)",
		"Link 0-1: NV18",
	}
	noKernel := func(r *Result, note string) {
		r.Summary.Kernel, r.Summary.KernelNote = nil, note
	}
	cases := []struct {
		golden string
		edit   func(r *Result)
		// lines the output must contain, besides matching the golden file
		want []string
	}{
		{"bf16.txt", func(r *Result) { r.Topology = topology },
			[]string{"Dispatch (BF16):  avg=40.40 us", "Link 0-1: NV18", "Dispatch:    avg=32.06 us"}},
		{"fp8.txt", func(r *Result) { *r = *fp8 }, []string{
			"  Dispatch dtype:  FP8_E4M3",
			// Same times as BF16, 7392/14336 of the bytes.
			"Dispatch (FP8_E4M3): avg=40.40 us, min=37.60 us, max=47.65 us",
			"                  throughput: avg=185.72 GB/s,",
			"                  throughput: avg=234.02 GB/s,",
			"Combine (BF16):   avg=49.14 us",
			"Byte counts: dispatch=7.50 MB (FP8_E4M3), combine=14.55 MB (BF16), selections=1015",
		}},
		{"note_cpu.txt", func(r *Result) {
			r.Config.Backend, r.Config.CUPTI = "cpu", "not used (cpu backend)"
			noKernel(r, NoteCPUBackend)
			r.Memory = nil
		}, []string{"  NOTE: no kernel timing on the cpu backend.", "  Backend:         cpu"}},
		{"note_cupti_unavailable.txt", func(r *Result) {
			noKernel(r, NoteCUPTIUnavailable("libcupti.so: cannot open shared object file"))
		}, []string{"  NOTE: CUPTI not available (libcupti.so: cannot open shared object file); kernel timing disabled."}},
		{"note_disabled.txt", func(r *Result) { noKernel(r, NoteKernelDisabled) },
			[]string{"  NOTE: kernel timing disabled (--no-kernel-timing)."}},
		{"note_cupti_region.txt", func(r *Result) {
			r.Config.ProfileMode = true
			noKernel(r, NoteCUPTIRegion)
		}, []string{"  NOTE: kernel timing left to the external profiler (--cupti-region).", "  Profile mode:    enabled"}},
		{"validate.txt", func(r *Result) {
			r.Config.Validate = true
			r.Validation = &Validation{Dispatch: Check{Passed: true}, Combine: Check{Passed: true}, CalcDiff: 1.515343e-06, GlobalDispatch: true, GlobalCombine: true}
		}, []string{"Combine validation:  PASSED (calc_diff=1.515343e-06)", "Global validation: Dispatch=PASSED, Combine=PASSED"}},
		{"validate_failed.txt", func(r *Result) {
			r.Config.Validate = true
			r.Validation = &Validation{
				Dispatch: Check{Detail: "expert 17: 3 tokens missing"}, Combine: Check{},
				CalcDiff: math.NaN(), GlobalDispatch: false, GlobalCombine: true,
			}
		}, []string{
			"Dispatch validation: FAILED (expert 17: 3 tokens missing)",
			"Combine validation:  FAILED (calc_diff=nan)",
			"Global validation: Dispatch=FAILED, Combine=PASSED",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			r := *base
			r.Summary.Kernel = &(*base.Summary.Kernel)
			tc.edit(&r)
			got := render(t, func(b *bytes.Buffer) error { return WriteText(b, &r) })
			checkGolden(t, tc.golden, []byte(got))
			lines := strings.Split(got, "\n")
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("no line starting %q", w)
				}
			}
			notes := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "  NOTE: ") {
					notes++
				}
			}
			kernelLines := strings.Count(got, "Dispatch:    avg=") + strings.Count(got, "Combine:     avg=")
			if r.Summary.Kernel == nil && (notes != 1 || kernelLines != 0) {
				t.Errorf("without kernel numbers: %d NOTE lines, %d kernel lines; want 1 and 0", notes, kernelLines)
			}
			if r.Summary.Kernel != nil && (notes != 0 || kernelLines != 2) {
				t.Errorf("with kernel numbers: %d NOTE lines, %d kernel lines; want 0 and 2", notes, kernelLines)
			}
			if hasMem := strings.Contains(got, "=== GPU Memory (rank 0) ==="); hasMem != (r.Memory != nil) {
				t.Errorf("GPU memory block printed = %v, memory known = %v", hasMem, r.Memory != nil)
			}
		})
	}
}

func containsLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func TestWriteErrors(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, nil); !errors.Is(err, ErrIncomplete) {
		t.Errorf("nil result: %v", err)
	}
	err := WriteSummary(&b, Summary{Ranks: 2})
	if !errors.Is(err, ErrIncomplete) || err.Error() != "report: incomplete result: no kernel-only numbers and no note saying why" {
		t.Errorf("no kernel, no note: %v", err)
	}
	if err := WriteJSON(&b, nil); !errors.Is(err, ErrIncomplete) {
		t.Errorf("nil JSON result: %v", err)
	}
	r := referenceResult(t, stats.BF16)
	if err := WriteText(failWriter{}, r); err == nil || err.Error() != "disk full" {
		t.Errorf("failing writer: %v", err)
	}
	r.Summary.Host.Dispatch.LatencyUS.Avg = math.Inf(1)
	if err := WriteJSON(&b, r); err == nil || !strings.HasPrefix(err.Error(), "report: encode JSON:") {
		t.Errorf("infinite latency in JSON: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestCFormatting(t *testing.T) {
	cases := []struct{ got, want string }{
		{num(math.NaN()), "nan"},
		{num(math.Inf(1)), "inf"},
		{num(math.Inf(-1)), "-inf"},
		{signedNum(math.Inf(1)), "+inf"},
		{signedNum(2392), "+2392.00"},
		{signedNum(-1.5), "-1.50"},
		{sci(1.515343e-06), "1.515343e-06"},
		{pad("Dispatch (BF16):", hostColumn), "Dispatch (BF16):  "},
		{pad("Dispatch (FP8_E4M3):", hostColumn), "Dispatch (FP8_E4M3): "},
		{oneLine("a\nb\r"), "a b "},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
	}
}
