package sidebyside_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/app"
)

// The exit codes of "epbench compare --run" as the command returns them:
// 2 for every refused input (injection attempts included), 1 when a
// program failed, 0 when every program produced a summary.
func TestExitCodes(t *testing.T) {
	for _, n := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if _, ok := os.LookupEnv(n); ok {
			t.Skipf("%s is set: the test runs under an MPI launcher", n)
		}
	}
	t.Setenv("HPCX_HOME", "")
	dir := t.TempDir()
	for _, name := range []string{"fake_ep_bench.sh", "fake_ep_bench_fail.sh", "fake_ep_bench_after_summary.sh", "ll_t128_i50.ep_bench.out"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
	}
	ok := filepath.Join(dir, "fake_ep_bench.sh")
	fail := filepath.Join(dir, "fake_ep_bench_fail.sh")
	common := []string{"compare", "--run", "--hpcx", "none", "--nproc-per-node", "2", "--epbench", ok}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"nodes with a command", []string{"--ep-lib", "epbench", "--dry-run", "--nodes", "h1 $(reboot)"}, app.ExitUsage},
		{"nodes with a separator", []string{"--ep-lib", "epbench", "--dry-run", "--nodes", "h1;reboot"}, app.ExitUsage},
		{"nodes with a newline", []string{"--ep-lib", "epbench", "--dry-run", "--nodes", "h1\nh2 slots=64"}, app.ExitUsage},
		{"nodes as an option", []string{"--ep-lib", "epbench", "--dry-run", "--nodes", "--oversubscribe"}, app.ExitUsage},
		{"iface with a command", []string{"--ep-lib", "epbench", "--dry-run", "--iface", "eth0`reboot`"}, app.ExitUsage},
		{"iface with a space", []string{"--ep-lib", "epbench", "--dry-run", "--iface", "eth0 -x LD_PRELOAD=/tmp/x.so"}, app.ExitUsage},
		{"ep-lib with a command", []string{"--ep-lib", "epbench&&reboot", "--dry-run"}, app.ExitUsage},
		{"library path list", []string{"--ep-lib", "nccl-ep", "--dry-run", "--nccl-ep-bench", ok, "--nccl-lib-path", "/x:/tmp/evil"}, app.ExitUsage},
		{"fp8 with nccl-ep", []string{"--ep-lib", "both", "--dry-run", "--nccl-ep-bench", ok, "--dispatch-dtype", "fp8_e4m3"}, app.ExitUsage},
		{"dry run", []string{"--ep-lib", "both", "--dry-run", "--nccl-ep-bench", ok}, app.ExitOK},
		{"dry run of every program", []string{"--ep-lib", "all", "--dry-run"}, app.ExitOK},
		{"a program not installed", []string{"--ep-lib", "mscclpp-cpp"}, app.ExitUsage},
		{"combine mode for nccl-ep", []string{"--ep-lib", "all", "--dry-run", "--combine-mode", "direct_send"}, app.ExitUsage},
	} {
		code := app.Main(append(append([]string{}, common...), tc.args...), app.Options{})
		assert.Equal(t, tc.code, code, tc.name)
	}

	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not in PATH: install Open MPI to run the launch tests")
	}
	launch := append(append([]string{}, common...), "--mpirun-args", "--oversubscribe", "--ep-lib", "both")
	assert.Equal(t, app.ExitOK, app.Main(append(launch, "--nccl-ep-bench", ok), app.Options{}), "both produced a summary")
	assert.Equal(t, app.ExitRuntime, app.Main(append(launch, "--nccl-ep-bench", fail), app.Options{}), "one program failed")
	assert.Equal(t, app.ExitRuntime, app.Main(append(launch, "--nccl-ep-bench", filepath.Join(dir, "fake_ep_bench_after_summary.sh")),
		app.Options{}), "one program failed after its summary")
}
