// Package e2e runs the built epbench binary the way users do: as a plain
// process and under mpirun, on the CPU backend (no GPU needed).
package e2e

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/report"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "epbench-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "epbench"), "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building epbench:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs name with args within timeout. The CUDA executable is one that
// does not exist, so the CUDA backend is never reached from a test that does
// not ask for it.
func run(t *testing.T, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	return runWithCUDA(t, timeout, "/nonexistent/epbench-cuda", name, args...)
}

// runWithCUDA is run with cudaExe as the CUDA executable.
func runWithCUDA(t *testing.T, timeout time.Duration, cudaExe, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_rmaps_base_oversubscribe=1", "EPBENCH_CUDA_EXE="+cudaExe)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v did not finish in %v", name, args, timeout)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{o.String(), e.String(), code}
}

func epbench() string { return filepath.Join(binDir, "epbench") }

func mpirun(t *testing.T, np int, args ...string) result {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatalf("mpirun not found: install Open MPI (make deps)")
	}
	a := append([]string{"-np", fmt.Sprint(np), epbench()}, args...)
	t.Logf("mpirun %s", strings.Join(a, " "))
	return run(t, 2*time.Minute, "mpirun", a...)
}

func errorLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "epbench: error: ") {
			out = append(out, l)
		}
	}
	return out
}

func TestBinaryDoesNotLinkCUDA(t *testing.T) {
	f, err := elf.Open(epbench())
	require.NoError(t, err)
	defer f.Close()
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	for _, l := range libs {
		assert.NotContains(t, l, "libcuda", "bin/epbench must load without the CUDA driver")
		assert.NotContains(t, l, "cupti")
		assert.NotContains(t, l, "nvidia-ml")
	}
	r := run(t, 10*time.Second, epbench(), "--version")
	assert.Equal(t, 0, r.code)
	assert.Regexp(t, `^epbench \S+\n$`, r.stdout)
}

func TestCPUBackendValidatesBothCombineModes(t *testing.T) {
	for _, mode := range []string{"rank_local_reduce", "direct_send"} {
		t.Run(mode, func(t *testing.T) {
			r := mpirun(t, 4, "--backend", "cpu", "-V", "-t", "32", "-d", "1024", "-k", "4", "-e", "16", "--combine-mode", mode, "-w", "2", "-i", "5")
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stdout, "=== Summary (Low Latency, across 4 ranks) ===")
			assert.Contains(t, r.stdout, "  Combine mode:    "+mode+"\n")
			assert.Contains(t, r.stdout, "  NOTE: no kernel timing on the cpu backend.\n")
			assert.Contains(t, r.stdout, "Global validation: Dispatch=PASSED, Combine=PASSED")
			assert.Empty(t, errorLines(r.stderr))
		})
	}
}

func TestCPUBackendRerouteAndJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := mpirun(t, 2, "--backend", "cpu", "-V", "-t", "16", "-d", "512", "-k", "2", "-e", "8", "--reroute", "3", "-w", "1", "-i", "6", "--json", path)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	p, err := report.ParseFile(path)
	require.NoError(t, err)
	assert.Equal(t, 2, p.Summary.Ranks)
	txt := filepath.Join(t.TempDir(), "r.txt")
	require.NoError(t, os.WriteFile(txt, []byte(r.stdout), 0o644))
	c := run(t, 10*time.Second, epbench(), "compare", txt, path)
	assert.Equal(t, 0, c.code, c.stderr)
	assert.Contains(t, c.stdout, "Host D+C ratio")
}

func TestUsageErrorsExitTwoOnEveryRank(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "cpu", "-t", "abc"}, "epbench: error: --num-tokens: "},
		{[]string{"--backend", "cpu", "-e", "18"}, "epbench: error: --num-experts: "},
		{[]string{"--backend", "cpu", "--bogus"}, "epbench: error: --bogus: "},
		{[]string{"-a", "ht"}, "epbench: error: --algorithm: "},
		{[]string{"--backend", "cpu", "--cuda-graph"}, "epbench: error: --cuda-graph needs the CUDA backend"},
		{[]string{"--backend", "cpu", "--ptx-dir", "/tmp"}, "epbench: error: --ptx-dir needs the CUDA backend"},
		{[]string{"--backend", "cpu", "--transport", "nccl"}, "epbench: error: --transport needs the CUDA backend"},
		{[]string{"--backend", "cpu", "-n"}, "epbench: error: --disable-nvlink needs the CUDA backend"},
	}
	for _, c := range cases {
		r := mpirun(t, 4, c.args...)
		assert.Equal(t, 2, r.code, "%v: stdout %s stderr %s", c.args, r.stdout, r.stderr)
		lines := errorLines(r.stderr)
		if assert.Len(t, lines, 1, "%v: exactly one error line, got %q", c.args, r.stderr) {
			assert.True(t, strings.HasPrefix(lines[0], c.want), "%v: %q", c.args, lines[0])
		}
		assert.NotContains(t, r.stderr, "panic")
	}
}

func TestRoutingSubcommand(t *testing.T) {
	r := run(t, 10*time.Second, epbench(), "routing", "-t", "128", "-k", "8", "-e", "256", "--rank", "0")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 128)
	valid := 0
	for _, l := range lines {
		f := strings.Split(l, " ")
		require.Len(t, f, 8)
		for _, v := range f {
			if v != "-1" {
				valid++
			}
		}
	}
	assert.Equal(t, 1015, valid, "ep_bench's rank 0 selections with the defaults")
}

func TestCUDABackendWithoutExecutable(t *testing.T) {
	r := run(t, 10*time.Second, epbench(), "--backend", "cuda")
	assert.Equal(t, 1, r.code)
	assert.Len(t, errorLines(r.stderr), 1)
	assert.Contains(t, r.stderr, "CUDA executable not found")
}

// EPBENCH_HOSTTRACE on every rank prints one line per point on rank 0; set
// on one rank only, the job neither hangs nor gathers: it says why.
func TestHostTrace(t *testing.T) {
	job := "--backend cpu -t 8 -d 256 -k 2 -e 8 -w 1 -i 4"
	r := run(t, 2*time.Minute, "mpirun", append([]string{"-np", "2", "-x", "EPBENCH_HOSTTRACE=1", epbench()}, strings.Fields(job)...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 6, strings.Count(r.stderr, "epbench: host trace "), r.stderr)
	assert.Contains(t, r.stderr, "epbench: host trace dispatch launched")

	one := fmt.Sprintf(`[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export EPBENCH_HOSTTRACE=1; exec %s %s`, epbench(), job)
	r = run(t, 2*time.Minute, "mpirun", "-np", "2", "bash", "-c", one)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "epbench: host trace: EPBENCH_HOSTTRACE not set on rank 0")
	assert.Equal(t, 1, strings.Count(r.stderr, "epbench: host trace"), r.stderr)
}
