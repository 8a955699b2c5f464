package app

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/config"
)

// stdoutOf runs f with os.Stdout captured.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	f()
	w.Close()
	return <-done
}

// "epbench help" is the help, "help COMMAND" the command's help.
func TestHelpCommand(t *testing.T) {
	var err error
	out := stdoutOf(t, func() { err = dispatch([]string{"help"}, Options{}) })
	require.NoError(t, err)
	assert.Equal(t, config.Usage(), out)
	out = stdoutOf(t, func() { err = dispatch([]string{"help", "compare"}, Options{}) })
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "usage: epbench compare "), out)
	out = stdoutOf(t, func() { err = dispatch([]string{"help", "routing"}, Options{}) })
	require.NoError(t, err)
	assert.Equal(t, config.RoutingUsage(), out)
}

// A word that names no command is refused as one, with the commands listed.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		word string
	}{{[]string{"bogus"}, "bogus"}, {[]string{"help", "bogus"}, "bogus"}, {[]string{"compre", "a.out"}, "compre"}} {
		err := dispatch(tc.args, Options{})
		assert.Equal(t, ExitUsage, CodeOf(err), "%q", tc.args)
		assert.EqualError(t, err, `"`+tc.word+`": unknown command (commands: help, routing, compare, devices, sweep, plot,`+
			` version; flags alone run the benchmark)`, "%q", tc.args)
	}
	// A positional word after flags is still the benchmark's to refuse.
	err := dispatch([]string{"--backend", "cpu", "bogus"}, Options{})
	assert.Equal(t, ExitUsage, CodeOf(err))
	assert.EqualError(t, err, `"bogus": unexpected positional argument`)
}

// --json is checked before anything is set up: a run is not lost to a typo.
func TestOutputPathsCheckedFirst(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no", "such", "r.json")
	_, _, err := parseRun([]string{"--backend", "cpu", "--json", bad})
	assert.Equal(t, ExitUsage, CodeOf(err))
	assert.EqualError(t, err, "--json: cannot create "+bad+": no folder "+filepath.Dir(bad))

	for _, args := range [][]string{
		{"--backend", "cpu", "-t", "1,2", "--csv", bad},
		{"--backend", "cpu", "-t", "1,2", "--json", bad},
	} {
		err := sweepCmd(args, Options{})
		assert.Equal(t, ExitUsage, CodeOf(err), "%q", args)
		assert.ErrorContains(t, err, "cannot create "+bad, "%q", args)
	}
}

// The seed benchmark's variables stand in for epbench's.
func TestSeedEnvironment(t *testing.T) {
	t.Setenv("EPBENCH_TOKENS", "")
	t.Setenv("MSCCLPP_EP_BENCH_TOKENS", "32")
	t.Setenv("MSCCLPP_EP_BENCH_ITERS", "7")
	cfg, _, err := parseRun([]string{"--backend", "cpu"})
	require.NoError(t, err)
	assert.Equal(t, 32, cfg.Tokens)
	assert.Equal(t, 7, cfg.Iters)
	t.Setenv("EPBENCH_TOKENS", "64")
	cfg, _, err = parseRun([]string{"--backend", "cpu"})
	require.NoError(t, err)
	assert.Equal(t, 64, cfg.Tokens, "EPBENCH_TOKENS wins")
}
