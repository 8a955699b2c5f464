package report

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func parseAll(t *testing.T, names ...string) []*Parsed {
	t.Helper()
	var out []*Parsed
	for _, n := range names {
		p, err := ParseFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestWriteCompare(t *testing.T) {
	cases := []struct {
		golden string
		inputs []string
		opt    CompareOptions
		want   []string
	}{
		{
			"compare_two.txt",
			[]string{"reference/ll_t128_i50.ep_bench.out", "reference/ll_t128_i200.ep_bench.out"},
			CompareOptions{},
			[]string{
				"=== Unified EP Low-Latency Summary (host-observed, us) ===",
				"metric                     ll_t128_i50  ll_t128_i200",
				"Host Dispatch avg                40.40         39.96",
				"Host D+C max                    113.86        166.30",
				"Kernel Combine max               43.32         48.55",
				// 97.01 / 95.62
				"Host D+C ratio ll_t128_i50/ll_t128_i200 = 1.01x",
			},
		},
		{
			"compare_kernel_only.txt",
			[]string{"formats/seed_inproc.out", "formats/nccl_ext_ll.out"},
			CompareOptions{KernelOnly: true},
			[]string{
				"=== Unified EP Low-Latency Summary (kernel-only, us) ===",
				// The seed driver's rows: the minimum over ranks.
				"Kernel Dispatch repr             30.12         45.00",
				"Kernel Combine repr              33.00         57.00",
				// (35.50+34.10) / (50.00+60.00)
				"Kernel D+C ratio seed_inproc/nccl_ext_ll = 0.63x",
				"Host D+C ratio seed_inproc/nccl_ext_ll = 0.70x",
			},
		},
		{
			"compare_missing_kernel.txt",
			[]string{"reference/ll_t32_i50.ep_bench.out", "formats/seed_fp8_host.out", "golden/note_cpu.txt"},
			CompareOptions{KernelOnly: true},
			[]string{
				"=== Unified EP Low-Latency Summary (host-observed, us) ===",
				"  NOTE: kernel-only requested but kernel timing is missing for seed_fp8_host, note_cpu.",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			in := parseAll(t, tc.inputs...)
			for i, l := range Labels(tc.inputs) {
				in[i].Label = l // as the command labels them
			}
			if err := WriteCompare(&b, in, tc.opt); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, b.Bytes())
			lines := strings.Split(b.String(), "\n")
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("no line starting %q in\n%s", w, b.String())
				}
			}
			kernelRows := strings.Count(b.String(), "\nKernel ")
			hostRows := strings.Count(b.String(), "\nHost ")
			if hostRows < 9 {
				t.Errorf("%d host rows, want 9", hostRows)
			}
			allKernel := !strings.Contains(tc.golden, "missing")
			if allKernel && kernelRows < 6 || !allKernel && kernelRows != 0 {
				t.Errorf("%d kernel rows", kernelRows)
			}
			if tc.opt.KernelOnly && allKernel && strings.Index(b.String(), "\nKernel ") > strings.Index(b.String(), "\nHost ") {
				t.Error("kernel-only table should lead with the kernel rows")
			}
			if ratio := strings.Contains(b.String(), "D+C ratio"); ratio != (len(tc.inputs) == 2) {
				t.Errorf("ratio line printed = %v for %d inputs", ratio, len(tc.inputs))
			}
		})
	}
}

// An empty label is defaulted; labels given by hand are printed whole,
// however long.
func TestWriteCompareLabels(t *testing.T) {
	for _, tc := range []struct {
		labels [2]string
		want   []string
	}{
		{[2]string{"nccl-ep", ""}, []string{"Host D+C ratio nccl-ep/input2 = 0.85x\n"}},
		{[2]string{"nccl-ep-baseline-long-label", "x"}, []string{
			"metric                    nccl-ep-baseline-long-label             x\n",
			"Host Dispatch avg                               27.09         30.56\n",
			"Host D+C ratio nccl-ep-baseline-long-label/x = 0.85x\n",
		}},
	} {
		in := parseAll(t, "reference/ll_t1_i50.ep_bench.out", "reference/ll_t32_i50.ep_bench.out")
		in[0].Label, in[1].Label = tc.labels[0], tc.labels[1]
		var b bytes.Buffer
		if err := WriteCompare(&b, in, CompareOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%q: no %q in\n%s", tc.labels, want, b.String())
			}
		}
	}
}

func TestWriteCompareErrors(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCompare(&b, nil, CompareOptions{}); !errors.Is(err, ErrNoInputs) {
		t.Errorf("no inputs: %v", err)
	}
	if err := WriteCompare(&b, []*Parsed{nil}, CompareOptions{}); err == nil || err.Error() != "report: compare input 0 is nil" {
		t.Errorf("nil input: %v", err)
	}
	// A zero total in the denominator prints no ratio rather than Inf.
	in := parseAll(t, "reference/ll_t1_i50.ep_bench.out", "reference/ll_t32_i50.ep_bench.out")
	in[1].Summary.Host.Total.LatencyUS.Avg = 0
	b.Reset()
	if err := WriteCompare(&b, in, CompareOptions{}); err != nil || strings.Contains(b.String(), "ratio") {
		t.Errorf("zero denominator: %v\n%s", err, b.String())
	}
	if err := WriteCompare(failWriter{}, in, CompareOptions{}); err == nil {
		t.Error("failing writer accepted")
	}
}
