package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epbench/epbench/internal/localcomm"
	"github.com/epbench/epbench/stats"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// checkGolden compares got with testdata/golden/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func readRef(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refBlock returns the lines of text from the first line starting with from
// through the first later line starting with to, preceded by the empty line
// every ep_bench block starts with.
func refBlock(t *testing.T, text, from, to string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, from) {
			continue
		}
		for j := i; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], to) {
				return "\n" + strings.Join(lines[i:j+1], "\n") + "\n"
			}
		}
	}
	t.Fatalf("no block %q..%q", from, to)
	return ""
}

// reduce runs stats.Reduce on len(in) local ranks and returns rank 0's answer.
func reduce(t *testing.T, mode stats.Mode, in []stats.Local) stats.Global {
	t.Helper()
	out := make([]stats.Global, len(in))
	err := localcomm.Run(len(in), func(c stats.Comm) error {
		g, err := stats.Reduce(c, mode, in[c.Rank()])
		out[c.Rank()] = g
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// referenceResult rebuilds reference/ll_t128_i50.ep_bench.out through the
// real reductions: two ranks with 1015 and 1014 selections, per-rank times
// chosen to agree with every digit ep_bench printed. With FP8 the same times
// carry FP8 dispatch bytes.
func referenceResult(t *testing.T, dt stats.DType) *Result {
	t.Helper()
	const hidden = 7168
	sel := []int{1015, 1014}
	bf := []int64{stats.DispatchBytes(sel[0], hidden, stats.BF16), stats.DispatchBytes(sel[1], hidden, stats.BF16)}
	db := []int64{stats.DispatchBytes(sel[0], hidden, dt), stats.DispatchBytes(sel[1], hidden, dt)}
	cb := []int64{stats.CombineBytes(sel[0], hidden), stats.CombineBytes(sel[1], hidden)}
	// The rank's average time that yields its printed BF16 GB/s.
	avgFor := func(bf16Bytes int64, gbps float64) float64 { return float64(bf16Bytes) / (gbps * 1e3) }
	host := func(avg float64, bytes int64, lo, hi float64) stats.Local {
		return stats.Local{Sample: stats.Sample{Avg: avg, Min: lo, Max: hi, P50: avg - 0.5, P99: hi - 1, N: 49}, Bytes: bytes}
	}
	one := func(v float64, bytes int64) stats.Local {
		return stats.Local{Sample: stats.Sample{Avg: v}, Bytes: bytes}
	}

	d := reduce(t, stats.Host, []stats.Local{
		host(avgFor(bf[0], 353.02), db[0], 37.60, 47.65), host(avgFor(bf[1], 367.30), db[1], 38.00, 45.00),
	})
	c := reduce(t, stats.Host, []stats.Local{
		host(avgFor(cb[0], 303.49), cb[0], 45.86, 63.04), host(avgFor(cb[1], 288.84), cb[1], 46.00, 60.00),
	})
	tot := reduce(t, stats.Host, []stats.Local{
		host(avgFor(bf[0]+cb[0], 299.92), db[0]+cb[0], 91.55, 113.86), host(avgFor(bf[1]+cb[1], 299.76), db[1]+cb[1], 92.00, 110.00),
	})
	kd := reduce(t, stats.KernelOnly, []stats.Local{one(31.4306, db[0]), one(32.6903, db[1])})
	kc := reduce(t, stats.KernelOnly, []stats.Local{one(40.0309, cb[0]), one(43.3175, cb[1])})
	group := reduce(t, stats.KernelOnly, []stats.Local{one(168.77, 0), one(168.71, 0)})
	handle := reduce(t, stats.KernelOnly, []stats.Local{one(25.33, 0), one(25.29, 0)})

	r := &Result{
		Config: Config{
			Algorithm: "LOW_LATENCY", Layout: "expert-major", Ranks: 2, Tokens: 128, Hidden: hidden, TopK: 8,
			Experts: 256, LocalExperts: 128, Warmup: 10, Iters: 50, DispatchDType: dt.String(), NVLink: true,
			CUPTI: "enabled (kernel-level GPU timing available)", Backend: "cuda", CombineMode: "rank_local_reduce",
		},
		Summary: Summary{
			Ranks:         2,
			DispatchDType: dt.String(),
			Host:          HostPerf{Dispatch: HostPhaseFrom(d), Combine: HostPhaseFrom(c), Total: HostPhaseFrom(tot)},
			Kernel:        &KernelPerf{Dispatch: KernelPhaseFrom(kd), Combine: KernelPhaseFrom(kc)},
			Bytes:         Bytes{Dispatch: db[0], Combine: cb[0], Selections: int64(sel[0])},
		},
		Setup:  &Setup{Ranks: 2, GroupCreationMS: StatFrom(group), HandleCreationMS: StatFrom(handle)},
		Memory: &Memory{TotalMiB: 143155.94, UsedPreCreateMiB: 916.88, UsedPostCombineMiB: 3308.88, DeltaMiB: 2392},
	}
	for rank := range 2 {
		kdv, kcv := kd.PerRank[rank].Sample.Avg, kc.PerRank[rank].Sample.Avg
		r.PerRank = append(r.PerRank, RankValues{
			Rank: rank, Selections: int64(sel[rank]), DispatchBytes: db[rank], CombineBytes: cb[rank],
			Dispatch: RankPhaseFrom(d.PerRank[rank]), Combine: RankPhaseFrom(c.PerRank[rank]), Total: RankPhaseFrom(tot.PerRank[rank]),
			KernelDispatchUS: &kdv, KernelCombineUS: &kcv,
		})
	}
	return r
}
