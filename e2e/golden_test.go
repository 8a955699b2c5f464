package e2e

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// updateGolden rewrites e2e/testdata/golden from the current binary:
// go test ./e2e -run TestGoldenOutputs -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden outputs of TestGoldenOutputs")

// goldenRuns are CPU-backend runs whose every output (stdout, the files
// they write, the exit code, epbench's stderr lines) is pinned, with the
// measured times and what derives from them masked. A change that is meant
// to leave behaviour alone must leave these alone.
var goldenRuns = []struct {
	name  string
	np    int
	args  []string
	files []string // outputs the run writes, under the test's directory
}{
	{"validate", 2, []string{"--backend", "cpu", "-V", "-t", "16", "-d", "512", "-k", "4", "-e", "8", "-w", "1", "-i", "5"}, nil},
	{"fp8_direct_send_json", 4, []string{"--backend", "cpu", "-V", "-t", "8", "-d", "256", "-k", "3", "-e", "16", "-w", "1", "-i", "3",
		"--dispatch-dtype", "fp8_e4m3", "--combine-mode", "direct_send", "--json", "{dir}/r.json"}, []string{"r.json"}},
	{"reroute_soak", 2, []string{"--backend", "cpu", "-t", "8", "-d", "256", "-k", "2", "-e", "4", "-w", "1", "-i", "6",
		"--reroute", "3", "--validate-every", "2", "--seed", "0x1234"}, nil},
	{"no_kernel_timing", 1, []string{"--backend", "cpu", "-t", "4", "-d", "256", "-k", "2", "-e", "2", "-w", "0", "-i", "2", "--no-kernel-timing"}, nil},
	{"sweep_tokens", 2, []string{"sweep", "--backend", "cpu", "-t", "4,1,8", "-d", "512", "-k", "4", "-e", "8", "-w", "1", "-i", "3", "-V",
		"--csv", "{dir}/s.csv", "--json", "{dir}/s.json"}, []string{"s.csv", "s.json"}},
	{"sweep_topk", 2, []string{"sweep", "--backend", "cpu", "-t", "8", "-d", "256", "-k", "1,3", "-e", "8", "-w", "1", "-i", "3"}, nil},
	{"fault", 2, []string{"--backend", "cpu", "-t", "8", "-d", "256", "-k", "2", "-e", "4", "-w", "1", "-i", "3",
		"--timeout-ms", "500", "--fault", "skip-combine=1"}, nil},
	{"usage", 2, []string{"--backend", "cpu", "-t", "8", "-e", "3"}, nil},
	{"back_to_back_jitter", 4, []string{"--backend", "cpu", "-V", "-t", "8", "-d", "256", "-k", "3", "-e", "8", "-w", "1", "-i", "20",
		"--back-to-back", "--jitter-us", "20", "--validate-every", "5", "--json", "{dir}/b.json"}, []string{"b.json"}},
}

// TestGoldenOutputs compares the runs above with e2e/testdata/golden.
func TestGoldenOutputs(t *testing.T) {
	for _, g := range goldenRuns {
		t.Run(g.name, func(t *testing.T) {
			dir := t.TempDir()
			args := make([]string, len(g.args))
			for i, a := range g.args {
				args[i] = strings.ReplaceAll(a, "{dir}", dir)
			}
			r := mpirun(t, g.np, args...)
			var b strings.Builder
			b.WriteString("# exit " + strconv.Itoa(r.code) + "\n# stdout\n")
			b.WriteString(maskText(r.stdout))
			// The ranks' lines, in an order the clock does not decide.
			b.WriteString("# stderr (epbench lines, sorted)\n")
			var errs []string
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(l, "epbench: ") {
					errs = append(errs, maskText(l)+"\n")
				}
			}
			sort.Strings(errs)
			b.WriteString(strings.Join(errs, ""))
			for _, f := range g.files {
				raw, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err, "%s was not written", f)
				b.WriteString("# file " + f + "\n")
				switch filepath.Ext(f) {
				case ".json":
					b.WriteString(maskJSON(t, raw))
				case ".csv":
					b.WriteString(maskCSV(string(raw)))
				}
			}
			got := strings.ReplaceAll(b.String(), dir, "{dir}")
			path := filepath.Join("testdata", "golden", g.name+".txt")
			if *updateGolden {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden output (go test ./e2e -run TestGoldenOutputs -update-golden)")
			require.Equal(t, string(want), got)
		})
	}
}

var (
	// A measured number and the unit it is printed with.
	measured = regexp.MustCompile(`\d+\.\d+( us| GB/s| ms)`)
	// The rank a throughput extreme came from follows the times.
	tputRank = regexp.MustCompile(`GB/s \(rank \d+\)`)
	// A sweep row: tokens and selections, then times and a throughput.
	sweepRow  = regexp.MustCompile(`^(\s+\d+\s+\d+)((\s+(\d+\.\d+|-))+)$`)
	spacedNum = regexp.MustCompile(`\s+\d+\.\d+`)
)

// maskText replaces what the clock decides in epbench's text outputs.
func maskText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if m := sweepRow.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + spacedNum.ReplaceAllString(m[2], " T")
			continue
		}
		l = measured.ReplaceAllString(l, "T$1")
		lines[i] = tputRank.ReplaceAllString(l, "GB/s (rank R)")
	}
	return strings.Join(lines, "\n")
}

// maskCSV blanks the columns of times, throughputs and the ranks those
// came from.
func maskCSV(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	head := strings.Split(lines[0], ",")
	for i := 1; i < len(lines); i++ {
		f := strings.Split(lines[i], ",")
		for c := range f {
			if c < len(head) && timed(head[c]) && f[c] != "" {
				f[c] = "T"
			}
		}
		lines[i] = strings.Join(f, ",")
	}
	return strings.Join(lines, "\n") + "\n"
}

// timed reports whether a field name holds a measured value.
func timed(name string) bool {
	return strings.HasSuffix(name, "_us") || strings.HasSuffix(name, "_gbps") || strings.HasSuffix(name, "_ms") ||
		strings.Contains(name, "_tput_")
}

// maskJSON zeroes the measured numbers of a JSON document, wherever they
// sit: every value under a key that names a time or a throughput.
func maskJSON(t *testing.T, raw []byte) string {
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var walk func(v any, masked bool) any
	walk = func(v any, masked bool) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e, masked || timed(k) || k == "latency_us" || k == "throughput_gbps")
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e, masked)
			}
			return x
		case float64:
			if masked {
				return "T"
			}
		}
		return v
	}
	out, err := json.MarshalIndent(walk(v, false), "", "  ")
	require.NoError(t, err)
	return string(out) + "\n"
}
