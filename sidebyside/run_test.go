package sidebyside

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/report"
)

// runArgs launches the fakes as both programs on two ranks of this node.
func runArgs(dir, epbench, ncclEP string, extra ...string) []string {
	return append([]string{"--run", "--ep-lib", "both", "--hpcx", "none", "--nproc-per-node", "2",
		"--mpirun-args", "--oversubscribe",
		"--epbench", filepath.Join(dir, epbench), "--nccl-ep-bench", filepath.Join(dir, ncclEP),
		"--nccl-lib-path", filepath.Join(dir, "lib")}, extra...)
}

// Two programs that both print a summary: their outputs stream under
// banners, then one table with the ratio, exit 0, and the JSON file holds
// both results.
func TestRunTwoPrograms(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	out, errOut, err := mainRun(t, 0, runArgs(dir, "fake_ep_bench.sh", "fake_ep_bench.sh", "--json", jsonPath)...)
	require.NoError(t, err, "stderr:\n%s", errOut)

	iEp := strings.Index(out, "\n########## ep-lib=epbench ##########\n$ env NCCL_NVLS_ENABLE=0 mpirun ")
	iNccl := strings.Index(out, "\n########## ep-lib=nccl-ep ##########\n$ env NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=")
	iTable := strings.Index(out, "=== Unified EP Low-Latency Summary (host-observed, us) ===")
	require.True(t, iEp >= 0 && iNccl > iEp && iTable > iNccl, "order of banners and table:\n%s", out)
	assert.Equal(t, 2, strings.Count(out, "=== Summary (Low Latency, across 2 ranks) ==="), "each output streamed once")
	assert.Contains(t, out, "metric                         epbench       nccl-ep\n")
	assert.Contains(t, out, "Host Dispatch avg                40.40         40.40\n")
	assert.Contains(t, out, "Kernel Combine max               43.32         43.32\n")
	assert.True(t, strings.HasSuffix(out, "\nHost D+C ratio epbench/nccl-ep = 1.00x\n"), out)

	// Both ranks of each launch started with the forwarded environment.
	assert.Contains(t, errOut, "fake ep_bench rank 1: NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH="+filepath.Join(dir, "lib")+":/usr/lib/mpi")
	assert.Contains(t, errOut, "rank 0: NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/lib/mpi args: -a ll -L em -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 --combine-mode rank_local_reduce\n")
	assert.NotContains(t, errOut, "warning")

	rf := readRunFile(t, jsonPath)
	assert.Equal(t, Schema, rf.Schema)
	assert.Equal(t, 2, rf.Ranks)
	assert.Equal(t, 256, rf.Problem.Experts)
	require.Len(t, rf.Results, 2)
	for i, name := range []string{"epbench", "nccl-ep"} {
		r := rf.Results[i]
		assert.Equal(t, name, r.EPLib)
		assert.True(t, r.OK)
		assert.Equal(t, 0, r.ExitCode)
		assert.Equal(t, "nccl-ep ep_bench", r.Format)
		require.NotNil(t, r.Summary)
		assert.Equal(t, 97.01, r.Summary.Host.Total.LatencyUS.Avg)
		require.NotNil(t, r.Summary.Kernel)
		assert.Equal(t, 32.06, r.Summary.Kernel.Dispatch.LatencyUS.Avg)
		assert.Equal(t, "mpirun", r.Argv[0])
	}
}

// A program that fails is reported with its exit code and the end of its
// stderr; the table still shows the other one, and the command exits 1.
func TestRunFailingProgram(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	out, errOut, err := mainRun(t, 0, runArgs(dir, "fake_ep_bench.sh", "fake_ep_bench_fail.sh", "--json", jsonPath,
		"--kernel-only")...)
	require.Error(t, err)
	assert.False(t, IsUsage(err))
	assert.True(t, errors.Is(err, ErrProgramFailed))
	assert.Equal(t, "compare --run: backend failed: nccl-ep (1 of 2)", err.Error())

	assert.Contains(t, errOut, "epbench: warning: ep-lib=nccl-ep failed (exit code 3); left out of the table\n")
	assert.Contains(t, errOut, "epbench: warning: last lines of its stderr:\n")
	assert.Contains(t, errOut, "  | fake ep_bench: NCCL error: unhandled cuda error\n")
	assert.Contains(t, out, "=== Unified EP Low-Latency Summary (kernel-only, us) ===\nmetric                         epbench\n")
	assert.Contains(t, out, "Kernel Dispatch avg              32.06\n")
	assert.NotContains(t, out, "D+C ratio")

	rf := readRunFile(t, jsonPath)
	require.Len(t, rf.Results, 2)
	assert.True(t, rf.Results[0].OK)
	assert.False(t, rf.Results[1].OK)
	assert.Equal(t, 3, rf.Results[1].ExitCode)
	assert.Equal(t, "exit code 3", rf.Results[1].Error)
	assert.Nil(t, rf.Results[1].Summary)
}

// Exit 0 without a summary is a failure too.
func TestRunProgramWithoutSummary(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	out, errOut, err := mainRun(t, 0, runArgs(dir, "fake_ep_bench_nosummary.sh", "fake_ep_bench.sh")...)
	require.Error(t, err)
	assert.Equal(t, "compare --run: backend failed: epbench (1 of 2)", err.Error())
	assert.Contains(t, errOut, "epbench: warning: ep-lib=epbench failed (exit code 0 but no usable summary: "+
		report.ErrNoSummary.Error()+"); left out of the table\n")
	assert.Contains(t, errOut, "  | fake ep_bench: nothing measured\n")
	assert.Contains(t, out, "metric                         nccl-ep\n")
}

func TestRunAllProgramsFail(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	out, _, err := mainRun(t, 0, runArgs(dir, "fake_ep_bench_fail.sh", "fake_ep_bench_fail.sh")...)
	require.Error(t, err)
	assert.Equal(t, "compare --run: backend failed: epbench, nccl-ep (2 of 2)", err.Error())
	assert.NotContains(t, out, "Unified")
}

// The hostfile of a run on named nodes exists while the programs run and is
// removed after. mpirun is replaced by a script that records it.
func TestRunRemovesHostfile(t *testing.T) {
	fixedEnv(t)
	dir := fakes(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	seen := filepath.Join(t.TempDir(), "seen")
	launcher := filepath.Join(dir, "mpirun.sh")
	require.NoError(t, os.WriteFile(launcher, []byte(`#!/bin/sh
while [ $# -gt 0 ]; do
	if [ "$1" = --hostfile ]; then cat "$2" >> "`+seen+`"; fi
	shift
done
exit 0
`), 0o755))
	_, errOut, err := mainRun(t, 0, "--run", "--ep-lib", "epbench", "--hpcx", "none", "--nproc-per-node", "2",
		"--nodes", "h1 h2", "--mpirun", launcher, "--epbench", filepath.Join(dir, "fake_ep_bench.sh"))
	require.Error(t, err, "the stand-in launcher prints no summary")
	assert.Contains(t, errOut, "no usable summary")
	b, rerr := os.ReadFile(seen)
	require.NoError(t, rerr)
	assert.Equal(t, "h1 slots=2\nh2 slots=2\n", string(b))
	left, rerr := os.ReadDir(tmp)
	require.NoError(t, rerr)
	assert.Empty(t, left, "hostfile removed")
}

func TestRunRejectsUnwritableJSON(t *testing.T) {
	fixedEnv(t)
	dir := fakes(t)
	_, _, err := mainRun(t, 0, "--run", "--ep-lib", "epbench", "--hpcx", "none", "--nproc-per-node", "2",
		"--mpirun", filepath.Join(dir, "fake_ep_bench.sh"), "--epbench", filepath.Join(dir, "fake_ep_bench.sh"),
		"--json", filepath.Join(dir, "no", "such", "dir", "r.json"))
	require.Error(t, err)
	assert.True(t, IsUsage(err))
	assert.Contains(t, err.Error(), "compare --run: --json: open ")
}

// One real epbench run on the CPU backend, through compare --run and mpirun.
func TestRunRealEpbench(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	exe, err := filepath.Abs(filepath.Join("..", "bin", "epbench"))
	require.NoError(t, err)
	if _, err := os.Stat(exe); err != nil {
		t.Skipf("%s is not built (make build): %v", exe, err)
	}
	out, errOut, err := mainRun(t, 0, "--run", "--ep-lib", "epbench", "--hpcx", "none", "--nproc-per-node", "2",
		"--mpirun-args", "--oversubscribe", "--epbench", exe, "--epbench-args", "--backend cpu -V",
		"-t", "8", "-d", "1024", "-k", "4", "-e", "16", "-w", "1", "-i", "3")
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "=== epbench Performance Benchmark ===")
	assert.Contains(t, out, "Backend:         cpu")
	assert.Contains(t, out, "Byte counts: dispatch=")
	assert.Contains(t, out, "=== Unified EP Low-Latency Summary (host-observed, us) ===\nmetric                         epbench\n")
	assert.Contains(t, out, "\nHost D+C avg ")
}

// readRunFile reads and decodes the --json file of a compare --run.
func readRunFile(t *testing.T, path string) runFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rf runFile
	require.NoError(t, json.Unmarshal(b, &rf))
	return rf
}
