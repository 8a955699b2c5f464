package report

import (
	"bytes"
	"testing"
)

// The header lines of ep_bench's sub-tests and of -S read back: the SM cap
// (not the exact grid) and the sub-test's line.
func TestParseSubTestHeader(t *testing.T) {
	c := Config{Algorithm: "LOW_LATENCY", Layout: "rank-major", Ranks: 4, MaxNumSMs: 64, Tokens: 128,
		SubTest: "Non-uniform tokens in [0, 128] (last rank forced to 0)", Hidden: 7168, TopK: 8, Experts: 256, LocalExperts: 64,
		Warmup: 10, Iters: 50, DispatchDType: "BF16"}
	var b bytes.Buffer
	if err := WriteHeader(&b, c, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  Max num SMs:     64\n", "  Sub-test:        Non-uniform tokens in [0, 128] (last rank forced to 0)\n", "  Layout:          rank-major\n"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("header lacks %q:\n%s", want, b.String())
		}
	}
	if err := WriteSummary(&b, Summary{Ranks: 4, KernelNote: "no kernel timing on the cpu backend.", Host: HostPerf{Dispatch: HostPhase{LatencyUS: Stat{1, 1, 1}}, Combine: HostPhase{LatencyUS: Stat{1, 1, 1}}, Total: HostPhase{LatencyUS: Stat{2, 2, 2}}}, Bytes: Bytes{Dispatch: 1, Combine: 1, Selections: 1}}); err != nil {
		t.Fatal(err)
	}
	p, err := ParseSummary(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config; got.MaxNumSMs != 64 || got.NumBlocks != 0 || got.SubTest != c.SubTest || got.Layout != "rank-major" {
		t.Errorf("read back %+v", got)
	}
}
