package e2e

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/report"
)

func TestSweepOnCPUBackend(t *testing.T) {
	dir := t.TempDir()
	js, cs := filepath.Join(dir, "s.json"), filepath.Join(dir, "s.csv")
	r := mpirun(t, 2, "sweep", "--backend", "cpu", "-t", "1,4,16", "-d", "512", "-k", "2", "-e", "8",
		"-w", "1", "-i", "4", "-V", "--json", js, "--csv", cs)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4+3, "header (4 lines) and one line per size:\n%s", r.stdout)
	assert.Contains(t, lines[0], "sweep over tokens: 2 ranks, hidden 512")
	for i, tok := range []string{"1", "4", "16"} {
		assert.Equal(t, tok, strings.Fields(lines[4+i])[0])
	}

	f, err := os.Open(js)
	require.NoError(t, err)
	defer f.Close()
	sw, err := report.ParseSweep(f)
	require.NoError(t, err)
	require.Len(t, sw.Points, 3)
	for _, p := range sw.Points {
		require.NotNil(t, p.Result.Validation)
		assert.True(t, p.Result.Validation.GlobalDispatch && p.Result.Validation.GlobalCombine)
		assert.Len(t, p.Result.PerRank, 2)
	}
	c, err := os.Open(cs)
	require.NoError(t, err)
	defer c.Close()
	rows, err := csv.NewReader(c).ReadAll()
	require.NoError(t, err)
	assert.Len(t, rows, 4)

	out := filepath.Join(dir, "latency.svg")
	p := run(t, 30*time.Second, epbench(), "plot", js, "-o", out)
	require.Equal(t, 0, p.code, p.stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(b), "s host dispatch")
}

func TestSweepUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"sweep", "--backend", "cpu", "-t", "8"},
		{"sweep", "--backend", "cpu", "-t", "1,2", "-k", "1,2"},
		{"sweep", "--backend", "cpu", "-t", "1,x"},
		{"sweep", "--backend", "cpu", "-t", "4,4"},
		{"sweep", "--backend", "cpu", "-t", "1,2", "--csv"},
		{"plot", "-o", "x.jpg", "nothing"},
	} {
		r := run(t, 20*time.Second, epbench(), args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		assert.Len(t, errorLines(r.stderr), 1, "%v: %s", args, r.stderr)
	}
}

func TestSweepOverTopK(t *testing.T) {
	js := filepath.Join(t.TempDir(), "k.json")
	r := mpirun(t, 2, "sweep", "--backend", "cpu", "-k", "1,2,4", "-t", "8", "-d", "512", "-e", "8",
		"-w", "1", "-i", "3", "-V", "--json", js)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "sweep over top-k")
	f, err := os.Open(js)
	require.NoError(t, err)
	defer f.Close()
	sw, err := report.ParseSweep(f)
	require.NoError(t, err)
	require.Len(t, sw.Points, 3)
	for i, k := range []int{1, 2, 4} {
		assert.Equal(t, k, sw.Points[i].TopK)
		assert.Equal(t, k, sw.Points[i].Result.Config.TopK)
		assert.True(t, sw.Points[i].Result.Validation.GlobalCombine)
	}
}
