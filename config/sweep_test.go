package config

import (
	"slices"
	"testing"
)

func TestParseSweep(t *testing.T) {
	sw, err := ParseSweep([]string{"-t", "4,1,8", "-d", "512", "--csv", "s.csv"}, nil)
	noErr(t, err)
	equal(t, "tokens", sw.Varying)
	if !slices.Equal(sw.Values, []int{4, 1, 8}) {
		t.Fatalf("values %v", sw.Values)
	}
	equal(t, "s.csv", sw.CSVPath)
	for i, c := range sw.Points {
		equal(t, sw.Values[i], c.Tokens)
		equal(t, 512, c.Hidden)
	}

	// A single value on another list flag is just that flag's value; the
	// environment does not override a listed flag.
	sw, err = ParseSweep([]string{"-k", "1,3", "--tokens", "8"}, func(v string) string {
		return map[string]string{"EPBENCH_TOPK": "5", "EPBENCH_HIDDEN": "1024"}[v]
	})
	noErr(t, err)
	equal(t, "top_k", sw.Varying)
	equal(t, 2, len(sw.Points))
	equal(t, 3, sw.Points[1].TopK)
	equal(t, 8, sw.Points[1].Tokens)
	equal(t, 1024, sw.Points[0].Hidden)
}

// The list values get the flag's own checks and messages; the points get
// the cross-flag checks.
func TestParseSweepErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-t", "8"}, "sweep: give a comma-separated list to -t, -k or -e (see epbench sweep --help)"},
		{[]string{"-t", "1,2", "-k", "1,2"}, "sweep: only one of -t, -k, -e may take a list"},
		{[]string{"-t", "1,x"}, `--num-tokens: must be a positive integer, got "x"`},
		{[]string{"-t", "1,5000"}, "--num-tokens: must be at most 4096, got 5000"},
		{[]string{"-e", "8,8"}, "--num-experts: 8 is listed twice"},
		{[]string{"-k", "2,9", "-e", "8"}, "--num-topk: must not exceed --num-experts, got 9 > 8"},
		{[]string{"-t", "1,2", "--csv", ""}, "--csv: must name a file"},
		{[]string{"-t", "1,2", "--protocol", "inline", "-t", "8,16"}, "--protocol: inline takes at most 15 tokens per rank (--num-tokens), got 16; auto uses it for the smallest operations"},
	} {
		_, err := ParseSweep(c.args, nil)
		errText(t, err, c.want)
	}
}
