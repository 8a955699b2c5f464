package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small CPU job for the fault tests: four ranks, a short timeout.
var faultJob = []string{"--backend", "cpu", "-t", "32", "-d", "1024", "-k", "4", "-e", "16", "-w", "2", "-i", "5"}

const faultTimeout = 2 * time.Second

// TestFaultInjection: the named rank skips an operation; every other rank
// reports the timeout naming it and the phase, every rank exits 4, and the
// job ends within the timeout plus a few seconds.
func TestFaultInjection(t *testing.T) {
	cases := []struct {
		fault string
		rank  int
		phase string
	}{
		{"skip-dispatch=2", 2, "dispatch"},
		{"skip-combine=1", 1, "combine"},
	}
	for _, c := range cases {
		t.Run(c.fault, func(t *testing.T) {
			args := append(append([]string{}, faultJob...), "--timeout-ms", fmt.Sprint(faultTimeout.Milliseconds()), "--fault", c.fault)
			start := time.Now()
			r := mpirun(t, 4, args...)
			took := time.Since(start)
			assert.Equal(t, 4, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
			assert.Less(t, took, faultTimeout+10*time.Second, "the job must end within the timeout plus a few seconds")
			assert.NotContains(t, r.stderr, "panic")
			assert.Empty(t, r.stdout, "no result is printed")

			// One line per rank, each naming its rank.
			lines := errorLines(r.stderr)
			require.Len(t, lines, 4, "one error line per rank:\n%s", r.stderr)
			byRank := map[int]string{}
			for _, l := range lines {
				var rank int
				_, err := fmt.Sscanf(l, "epbench: error: rank %d:", &rank)
				require.NoError(t, err, "line %q does not name its rank", l)
				byRank[rank] = l
			}
			require.Len(t, byRank, 4, "lines of distinct ranks: %q", lines)
			want := regexp.MustCompile(fmt.Sprintf(`: %s: cpuref %s (counts )?exchange: timed out after %d ms waiting for rank %d$`,
				c.phase, c.phase, faultTimeout.Milliseconds(), c.rank))
			for rank, l := range byRank {
				if rank == c.rank {
					assert.Contains(t, l, "--fault "+c.fault, "the faulty rank says why")
					continue
				}
				assert.Regexp(t, want, l, "rank %d", rank)
			}
		})
	}
}

// With --back-to-back (no barrier between the pairs) and jitter, a rank that
// skips an operation still ends every rank within the timeout, exit 4, one
// line each.
func TestFaultBackToBack(t *testing.T) {
	args := append(append([]string{}, faultJob...), "--back-to-back", "--jitter-us", "50", "--validate-every", "2",
		"--timeout-ms", fmt.Sprint(faultTimeout.Milliseconds()), "--fault", "skip-combine=3")
	start := time.Now()
	r := mpirun(t, 4, args...)
	assert.Equal(t, 4, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
	assert.Less(t, time.Since(start), faultTimeout+10*time.Second)
	assert.Len(t, errorLines(r.stderr), 4, r.stderr)
	assert.NotContains(t, r.stderr, "panic")
}

func TestFaultRankOutsideJobIsUsageError(t *testing.T) {
	r := mpirun(t, 4, append(append([]string{}, faultJob...), "--fault", "skip-combine=4")...)
	assert.Equal(t, 2, r.code, r.stderr)
	lines := errorLines(r.stderr)
	if assert.Len(t, lines, 1, r.stderr) {
		assert.Equal(t, "epbench: error: --fault: rank 4 does not exist in a job of 4 ranks", lines[0])
	}
}

// TestKilledRankEndsJob: a rank killed with SIGKILL in the middle of a long
// run ends the job; nothing is left hanging.
func TestKilledRankEndsJob(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatalf("mpirun not found: install Open MPI (make deps)")
	}
	// A copy of the binary under a name of its own, to find its ranks by.
	exe := filepath.Join(t.TempDir(), "epbench-killed")
	data, err := os.ReadFile(epbench())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, data, 0o755))

	args := append([]string{"-np", "4", exe}, faultJob...)
	args = append(args, "-i", "1000000", "--timeout-ms", "5000")
	cmd := exec.Command("mpirun", args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_rmaps_base_oversubscribe=1", "EPBENCH_CUDA_EXE=/nonexistent/epbench-cuda")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		// Whatever happened, leave nothing running.
		_ = cmd.Process.Kill()
		for _, p := range ranksOf(exe) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}()

	// Wait until all four ranks run, and a little longer: mid-run.
	var victim int
	for deadline := time.Now().Add(30 * time.Second); victim == 0; {
		select {
		case err := <-done:
			t.Fatalf("mpirun ended before a rank was killed: %v\n%s", err, out.String())
		default:
		}
		ranks := ranksOf(exe)
		if len(ranks) == 4 {
			time.Sleep(1500 * time.Millisecond)
			for _, p := range ranks {
				if p.rank == "2" {
					victim = p.pid
				}
			}
			require.NotZero(t, victim, "no process with OMPI_COMM_WORLD_RANK=2 among %v", ranks)
		}
		require.True(t, time.Now().Before(deadline), "the ranks did not start: %s", out.String())
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))
	killed := time.Now()

	select {
	case err := <-done:
		t.Logf("mpirun ended %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "mpirun must report the failure:\n%s", out.String())
		assert.NotEqual(t, 0, ee.ExitCode())
	case <-time.After(20 * time.Second):
		t.Fatalf("mpirun still running 20 s after rank 2 was killed:\n%s", out.String())
	}
	assert.NotContains(t, out.String(), "panic")
	time.Sleep(500 * time.Millisecond)
	assert.Empty(t, ranksOf(exe), "ranks left running")
}

type rankProcess struct {
	pid  int
	rank string
}

// ranksOf lists the running processes whose executable is exe (mpirun's own
// command line names it too, but not as its first word) and their MPI ranks.
func ranksOf(exe string) []rankProcess {
	var out []rankProcess
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if argv0 != exe {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && isZombie(string(stat)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "%d", &pid); err != nil {
			continue
		}
		p := rankProcess{pid: pid}
		if env, err := os.ReadFile(filepath.Join(d, "environ")); err == nil {
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, "OMPI_COMM_WORLD_RANK="); ok {
					p.rank = v
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// isZombie reads the state field of /proc/PID/stat ("pid (comm) S ...").
func isZombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// TestValidateEveryPasses: --validate-every checks the outputs during the
// timed loop, with and without the final -V check.
func TestValidateEveryPasses(t *testing.T) {
	for _, extra := range [][]string{{"--validate-every", "3"}, {"-V", "--validate-every", "2", "--combine-mode", "direct_send"}} {
		args := append([]string{"--backend", "cpu", "-t", "32", "-d", "1024", "-k", "4", "-e", "16", "-w", "1", "-i", "10"}, extra...)
		r := mpirun(t, 4, args...)
		require.Equal(t, 0, r.code, "%v: stderr: %s", extra, r.stderr)
		assert.Contains(t, r.stdout, "=== Summary (Low Latency, across 4 ranks) ===")
		assert.Empty(t, errorLines(r.stderr), "%v", extra)
	}
}
