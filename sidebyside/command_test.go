package sidebyside

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "''",
		"mpirun":           "mpirun",
		"ppr:4:node":       "ppr:4:node",
		"/opt/x/ep_bench":  "/opt/x/ep_bench",
		"self,vader,tcp":   "self,vader,tcp",
		"a b":              "'a b'",
		"it's":             `'it'"'"'s'`,
		"$(id)":            "'$(id)'",
		"a;b":              "'a;b'",
		"%s\\n":            `'%s\n'`,
		"x\ny":             "'x\ny'",
		"--backend=cpu":    "--backend=cpu",
		"*":                "'*'",
		"~":                "'~'",
		"h1 slots=4":       "'h1 slots=4'",
		"/dir with/space/": "'/dir with/space/'",
	} {
		assert.Equal(t, want, shellQuote(in), "%q", in)
	}
}

// A printed command, pasted into sh, runs exactly the argv and environment
// it describes.
func TestCommandStringRoundTrips(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to paste into")
	}
	c := Command{
		Env:  []string{"EPBENCH_T1=a b", "EPBENCH_T2=it's $(id)"},
		Argv: []string{"sh", "-c", `printf '[%s]' "$EPBENCH_T1" "$EPBENCH_T2" "$@"`, "x", "*", "a;b", "", "--x=1 2"},
	}
	out, err := exec.Command("sh", "-c", c.String()).Output()
	require.NoError(t, err, c.String())
	assert.Equal(t, "[a b][it's $(id)][*][a;b][][--x=1 2]", string(out))
}

func TestCommandEnvironReplaces(t *testing.T) {
	c := Command{Env: []string{"B=2", "C=3"}}
	assert.Equal(t, []string{"A=1", "D=4", "B=2", "C=3"}, c.environ([]string{"A=1", "B=old", "D=4"}))
}

func TestEnvironmentPrependKeepsOrder(t *testing.T) {
	base := map[string]string{"LD_LIBRARY_PATH": "/usr/lib", "EMPTY": ""}
	e := newEnvironment(func(n string) (string, bool) { v, ok := base[n]; return v, ok })
	e.set("X", "1")
	e.prepend("LD_LIBRARY_PATH", "/a", "/b")
	e.prepend("LD_LIBRARY_PATH", "/c")
	e.prepend("EMPTY", "/d")
	e.prepend("UNSET", "/e")
	e.prepend("NOTHING")
	e.set("X", "2")
	assert.Equal(t, []string{"X=2", "LD_LIBRARY_PATH=/c:/a:/b:/usr/lib", "EMPTY=/d", "UNSET=/e"}, e.assignments())
}

func TestTailKeepsTheEnd(t *testing.T) {
	tl := tail{limit: 16}
	tl.Write([]byte("line1\nline2\n"))
	assert.Equal(t, "line1\nline2\n", string(tl.text()))
	tl.Write([]byte("line3\nline4\n"))
	// 24 bytes written, the last 16 kept: "e2\nline3\nline4\n", cut to whole lines.
	assert.Equal(t, "line3\nline4\n", string(tl.text()))
	assert.Equal(t, []string{"line3", "line4"}, tl.lastLines(5))
	assert.Equal(t, []string{"line4"}, tl.lastLines(1))
	tl.Write([]byte(strings.Repeat("z", 40)))
	assert.Equal(t, 16, len(tl.buf))

	long := tail{limit: 4096}
	long.Write([]byte(strings.Repeat("y", 1000) + "\n\n  \n"))
	l := long.lastLines(3)
	require.Len(t, l, 1)
	assert.Equal(t, strings.Repeat("y", maxLineOutput)+"...", l[0])
}

// execute runs a program without a shell and reports how it ended.
func TestExecuteReportsExitAndStreams(t *testing.T) {
	dir := fakes(t)
	var out, errOut strings.Builder
	o, intr := execute(Command{Argv: []string{dir + "/fake_ep_bench_fail.sh"}}, &out, &errOut)
	assert.False(t, intr)
	assert.Equal(t, 3, o.exitCode)
	assert.Empty(t, o.failure)
	assert.Equal(t, "=== NCCL EP Performance Benchmark ===\n", out.String())
	assert.Contains(t, errOut.String(), "set-up step 1\n")
	assert.Equal(t, "fake ep_bench: NCCL error: unhandled cuda error", o.stderr.lastLines(1)[0])

	o, _ = execute(Command{Argv: []string{dir + "/no-such-program"}}, &out, &errOut)
	assert.Equal(t, noExitCode, o.exitCode)
	assert.Contains(t, o.failure, "did not start")

	o, _ = execute(Command{Env: []string{"OMPI_COMM_WORLD_RANK=1"}, Argv: []string{dir + "/fake_ep_bench.sh", "-t", "1"}},
		&out, &errOut)
	assert.Equal(t, 0, o.exitCode)
	assert.Empty(t, o.stdout.text(), "rank 1 prints no summary")
	assert.Contains(t, string(o.stderr.text()), "fake ep_bench rank 1: ")
	assert.Contains(t, string(o.stderr.text()), "args: -t 1")
}

func TestExecuteReportsSignal(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	o, _ := execute(Command{Argv: []string{"sh", "-c", "kill -KILL $$"}}, os.Stdout, os.Stderr)
	assert.Equal(t, noExitCode, o.exitCode)
	assert.Equal(t, "killed by signal 9 (killed)", o.failure)
}
