package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMPIRun drops mpirun's own options and runs the program after -np N.
const fakeMPIRun = `#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != "-np" ]; do shift; done
shift 2
exec "$@"
`

// fakeEpbench logs each call's arguments and prints the summary epbench
// prints (report's golden BF16 output, $GOLDEN) with the kernel averages
// replaced: dispatch BASE + 0.01 per earlier call of the same build and
// flags (so rounds differ), combine 1 less. The build is the --ptx-dir
// folder's name (base 6 for "a", 7 for "b") or embedded (base 8; 9 when
// the executable is named "old", another release's stand-in). -V prints
// the validation line, failed for a build named "bad"; flags with -t 9
// fail (exit 4).
const fakeEpbench = `#!/bin/sh
echo "$*" >> "$LOG"
build=embedded
[ "$1" = --ptx-dir ] && build=$(basename "$2")
[ "$(basename "$0")" = old ] && build=old
case " $* " in *" -t 9 "*) echo "epbench: error: a peer did not arrive" >&2; exit 4 ;; esac
case " $* " in *" -V "*)
	if [ "$build" = bad ]; then echo "Global validation: Dispatch=FAILED, Combine=PASSED"; exit 3; fi
	echo "Global validation: Dispatch=PASSED, Combine=PASSED"; exit 0 ;;
esac
n=$(grep -cxF -- "$*" "$LOG")
base=8; [ "$build" = a ] && base=6; [ "$build" = b ] && base=7; [ "$build" = old ] && base=9
d=$(awk -v b=$base -v n=$n 'BEGIN { printf "%.2f", b + 0.01 * (n - 1) }')
c=$(awk -v b=$base -v n=$n 'BEGIN { printf "%.2f", b - 1 + 0.01 * (n - 1) }')
sed -e "s/^Dispatch:    avg=[0-9.]* us/Dispatch:    avg=$d us/" -e "s/^Combine:     avg=[0-9.]* us/Combine:     avg=$c us/" "$GOLDEN"
`

// golden is a real summary: the fake's output has the format alternate.sh
// parses only as long as epbench prints it so.
var golden, _ = filepath.Abs("../report/testdata/golden/bf16.txt")

type alternateRig struct {
	t        *testing.T
	dir, log string
}

func newAlternateRig(t *testing.T) *alternateRig {
	t.Helper()
	r := &alternateRig{t: t, dir: t.TempDir()}
	r.log = filepath.Join(r.dir, "calls.log")
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "mpirun"), []byte(fakeMPIRun), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "epbench"), []byte(fakeEpbench), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "old"), []byte(fakeEpbench), 0o755))
	require.NoError(t, os.WriteFile(r.log, nil, 0o644))
	for _, b := range []string{"a", "b", "bad"} {
		require.NoError(t, os.MkdirAll(filepath.Join(r.dir, b), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(r.dir, b, "ll_x.ptx"), []byte("// ptx\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "empty"), 0o755))
	return r
}

// command is alternate.sh with args, run with the rig's stand-ins; env
// (NAME=VALUE) overrides its environment.
func (r *alternateRig) command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("bash", append([]string{"alternate.sh"}, args...)...)
	cmd.Env = append(append(os.Environ(), "MPIRUN="+filepath.Join(r.dir, "mpirun"), "EPBENCH="+filepath.Join(r.dir, "epbench"),
		"LOG="+r.log, "LIMIT=20", "GOLDEN="+golden), env...)
	return cmd
}

// run runs alternate.sh with args: its stdout, stderr and exit code.
func (r *alternateRig) run(args ...string) (string, string, int) {
	r.t.Helper()
	return r.runEnv(nil, args...)
}

func (r *alternateRig) runEnv(env []string, args ...string) (string, string, int) {
	r.t.Helper()
	cmd := r.command(env, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(r.t, err)
	}
	return out.String(), errb.String(), code
}

func (r *alternateRig) calls() []string {
	r.t.Helper()
	b, err := os.ReadFile(r.log)
	require.NoError(r.t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestAlternateRunsBuildsInTurnAndTabulatesRounds(t *testing.T) {
	r := newAlternateRig(t)
	a, b := filepath.Join(r.dir, "a"), filepath.Join(r.dir, "b")
	out, errs, code := r.run("-n", "-r", "3", "-i", "50", "-c", "", "-c", "-t 1", "A="+a, "B="+b, "E=embedded")
	require.Equal(t, 0, code, "stderr:\n%s", errs)

	// Each round: every configuration, every build in turn.
	var want []string
	for range 3 {
		for _, c := range []string{"-i 50", "-i 50 -t 1"} {
			want = append(want, "--ptx-dir "+a+" "+c, "--ptx-dir "+b+" "+c, c)
		}
	}
	assert.Equal(t, want, r.calls())

	// Three rounds: 6.00, 6.01, 6.02 for A, and so on.
	assert.Contains(t, out, "| flags | A | B | E |\n|---|---|---|---|\n")
	assert.Contains(t, out, "| defaults | 6.00–6.02 / 5.00–5.02 | 7.00–7.02 / 6.00–6.02 | 8.00–8.02 / 7.00–7.02 |\n")
	assert.Contains(t, out, "| -t 1 | 6.00–6.02 / 5.00–5.02 | 7.00–7.02 / 6.00–6.02 | 8.00–8.02 / 7.00–7.02 |\n")
	assert.Contains(t, out, "min–max over 3 rounds of -i 50 at 1 rank(s), builds alternated, NOT validated (-n)")
	assert.Contains(t, errs, "round 2 [-t 1] B: dispatch 7.01 combine 6.01 us")
}

func TestAlternateOneRoundPrintsOneValue(t *testing.T) {
	r := newAlternateRig(t)
	out, errs, code := r.run("-n", "-r", "1", "A="+filepath.Join(r.dir, "a"))
	require.Equal(t, 0, code, "stderr:\n%s", errs)
	assert.Contains(t, out, "| defaults | 6.00 / 5.00 |\n")
	assert.Equal(t, []string{"--ptx-dir " + filepath.Join(r.dir, "a") + " -i 300"}, r.calls())
}

// Without -n, every build is validated on every configuration before any
// time is taken (-V, the old spelling, asks for the same).
func TestAlternateValidatesByDefault(t *testing.T) {
	for _, flag := range []string{"", "-V"} {
		r := newAlternateRig(t)
		a := filepath.Join(r.dir, "a")
		args := []string{"-r", "1", "-c", "", "-c", "-t 1", "A=" + a, "E=embedded"}
		if flag != "" {
			args = append([]string{flag}, args...)
		}
		out, errs, code := r.run(args...)
		require.Equal(t, 0, code, "stderr:\n%s", errs)
		assert.Equal(t, []string{
			"--ptx-dir " + a + " -w 3 -i 20 -V", "-w 3 -i 20 -V", "--ptx-dir " + a + " -w 3 -i 20 -V -t 1", "-w 3 -i 20 -V -t 1",
			"--ptx-dir " + a + " -i 300", "-i 300", "--ptx-dir " + a + " -i 300 -t 1", "-i 300 -t 1",
		}, r.calls(), "flag %q", flag)
		assert.Contains(t, out, "builds alternated, each build validated first (-w 3 -i 20 -V)\n", "flag %q", flag)
	}
}

func TestAlternateRunsAnotherExecutableWithItsOwnKernels(t *testing.T) {
	r := newAlternateRig(t)
	a := filepath.Join(r.dir, "a")
	out, errs, code := r.run("-V", "-r", "2", "A="+a, "O=exe:"+filepath.Join(r.dir, "old"))
	require.Equal(t, 0, code, "stderr:\n%s", errs)
	// The other executable gets no --ptx-dir, and its own times are its cells.
	assert.Equal(t, []string{"--ptx-dir " + a + " -w 3 -i 20 -V", "-w 3 -i 20 -V",
		"--ptx-dir " + a + " -i 300", "-i 300", "--ptx-dir " + a + " -i 300", "-i 300"}, r.calls())
	assert.Contains(t, out, "| defaults | 6.00–6.01 / 5.00–5.01 | 9.00–9.01 / 8.00–8.01 |\n")
}

func TestAlternateTimesOnlyBuildsThatValidate(t *testing.T) {
	r := newAlternateRig(t)
	a, bad := filepath.Join(r.dir, "a"), filepath.Join(r.dir, "bad")
	out, errs, code := r.run("-V", "-r", "2", "A="+a, "X="+bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "alternate: X [defaults] did not validate (exit 3)")
	assert.Contains(t, out, "| defaults | 6.00–6.01 / 5.00–5.01 | not valid |\n")
	assert.Equal(t, []string{
		"--ptx-dir " + a + " -w 3 -i 20 -V", "--ptx-dir " + bad + " -w 3 -i 20 -V",
		"--ptx-dir " + a + " -i 300", "--ptx-dir " + a + " -i 300",
	}, r.calls(), "the build that did not validate was timed")
}

func TestAlternateSkipsOnlyTheConfigurationABuildFailed(t *testing.T) {
	r := newAlternateRig(t)
	a := filepath.Join(r.dir, "a")
	out, errs, code := r.run("-V", "-r", "1", "-c", "", "-c", "-t 9", "A="+a)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "alternate: A [-t 9] did not validate (exit 4)")
	assert.Contains(t, out, "| defaults | 6.00 / 5.00 |\n| -t 9 | not valid |\n")
	assert.Equal(t, []string{"--ptx-dir " + a + " -w 3 -i 20 -V", "--ptx-dir " + a + " -w 3 -i 20 -V -t 9",
		"--ptx-dir " + a + " -i 300"}, r.calls())
}

func TestAlternateStopsWhenInterrupted(t *testing.T) {
	r := newAlternateRig(t)
	// A run that takes a second to stop when told to, as ranks tearing
	// down do: the script must not end (and so let a next run start on the
	// GPU) before it has.
	slow := filepath.Join(r.dir, "slow")
	require.NoError(t, os.WriteFile(slow, []byte(`#!/bin/sh
echo "$*" >> "$LOG"
trap 'sleep 1; echo stopped >> "$LOG"; exit 143' TERM
sleep 30 &
wait $!
`), 0o755))
	cmd := r.command([]string{"EPBENCH=" + slow, "LIMIT=120"}, "-n", "-r", "3", "A=embedded")
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for len(r.calls()) < 1 || r.calls()[0] == "" {
		require.True(t, time.Now().Before(deadline), "the first run never started")
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 130, ee.ExitCode())
	assert.Less(t, time.Since(start), 5*time.Second, "the interrupt waited for the run's time limit")
	assert.Equal(t, []string{"-i 300", "stopped"}, r.calls(), "the script ended before the run had stopped, or started another")
}

func TestAlternatePassesFlagsAsWordsNotFileNames(t *testing.T) {
	r := newAlternateRig(t)
	// alternate.sh's own folder has files for '*' to match.
	_, errs, code := r.run("-n", "-r", "1", "-c", "-t 1 *", "A=embedded")
	require.Equal(t, 0, code, "stderr:\n%s", errs)
	assert.Equal(t, []string{"-i 300 -t 1 *"}, r.calls())
}

func TestAlternateMarksAFailedRun(t *testing.T) {
	r := newAlternateRig(t)
	out, errs, code := r.run("-n", "-r", "2", "-c", "-t 9", "-c", "-t 2", "A="+filepath.Join(r.dir, "a"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "alternate: round 1, A [-t 9]: exit 4, no kernel times")
	assert.Contains(t, out, "| -t 9 | FAIL / FAIL |\n")
	assert.Contains(t, out, "| -t 2 | 6.00–6.01 / 5.00–5.01 |\n")
}

func TestAlternateRefusesBadUsage(t *testing.T) {
	r := newAlternateRig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no build named"},
		{[]string{"A"}, "a build is NAME=DIR, NAME=embedded or NAME=exe:PATH, got 'A'"},
		{[]string{"=x"}, "a build is NAME=DIR, NAME=embedded or NAME=exe:PATH"},
		{[]string{"A=exe:" + filepath.Join(r.dir, "nope")}, "build A: no executable"},
		{[]string{"A=exe:" + filepath.Join(r.dir, "a")}, "build A: no executable"},
		{[]string{"A=" + filepath.Join(r.dir, "nope")}, "build A: no folder"},
		{[]string{"A=" + filepath.Join(r.dir, "empty")}, "build A: no PTX in"},
		{[]string{"A=embedded", "A=" + filepath.Join(r.dir, "a")}, "build A named twice"},
		{[]string{"-r", "0", "A=embedded"}, "positive count, got '0'"},
		{[]string{"-i", "x", "A=embedded"}, "positive count, got 'x'"},
		{[]string{"-r"}, "-r needs a value"},
		{[]string{"-x", "A=embedded"}, "unknown option -x"},
	} {
		_, errs, code := r.run(tc.args...)
		assert.Equal(t, 2, code, "%q", tc.args)
		assert.Contains(t, errs, tc.want, "%q", tc.args)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"EPBENCH=" + filepath.Join(r.dir, "nope")}, "alternate: no epbench at " + filepath.Join(r.dir, "nope")},
		{[]string{"EPBENCH=" + r.dir}, "alternate: no epbench at " + r.dir},
		{[]string{"MPIRUN=" + filepath.Join(r.dir, "nope")}, "alternate: no " + filepath.Join(r.dir, "nope")},
		{[]string{"LIMIT=abc"}, "LIMIT takes a positive count of seconds, got 'abc'"},
	} {
		_, errs, code := r.runEnv(tc.env, "A=embedded")
		assert.Equal(t, 2, code, "%q", tc.env)
		assert.Contains(t, errs, tc.want, "%q", tc.env)
	}
	assert.Equal(t, []string{""}, r.calls(), "a refused invocation ran something")

	help, err := exec.Command("bash", "alternate.sh", "-h").Output()
	require.NoError(t, err)
	assert.Contains(t, string(help), "Usage: scripts/alternate.sh")
}
