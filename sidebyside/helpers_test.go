package sidebyside

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireMPI skips a test that launches mpirun where there is none.
func requireMPI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun is not in PATH: install Open MPI to run the launch tests")
	}
}

// fakes copies the fake ep_bench scripts and the reference output they
// print into a temporary folder, executable whatever the checkout kept of
// their modes, and returns that folder.
func fakes(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"fake_ep_bench.sh", "fake_ep_bench_fail.sh", "fake_ep_bench_nosummary.sh",
		"fake_ep_bench_after_summary.sh", "fake_python.sh", "fake_mscclpp_ep_bench.sh",
		"ll_t128_i50.ep_bench.out", "seed_inproc.out"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
	}
	return dir
}

// fixedEnv pins the variables commands copy from the environment, so the
// expected commands do not depend on the machine.
func fixedEnv(t *testing.T) {
	t.Helper()
	t.Setenv("LD_LIBRARY_PATH", "/usr/lib/mpi")
	t.Setenv("CUDA_HOME", "/usr/local/cuda-13.0")
	t.Setenv("HPCX_HOME", "")
	t.Setenv("NCCL_LIB_PATH", "")
	t.Setenv("NCCL_EP_BENCH", "")
	t.Setenv("TMPDIR", "/tmp")
	for _, n := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if _, ok := os.LookupEnv(n); ok {
			t.Skipf("%s is set: the test runs under an MPI launcher", n)
		}
	}
}

// asRoot makes mpirun commands look as they would for root (or not).
func asRoot(t *testing.T, root bool) {
	t.Helper()
	saved := isRoot
	isRoot = func() bool { return root }
	t.Cleanup(func() { isRoot = saved })
}

// mainRun runs Main and returns its stdout, stderr and error.
func mainRun(t *testing.T, gpus int, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Main(args, Env{Stdout: &out, Stderr: &errOut, GPUCount: func() int { return gpus }})
	return out.String(), errOut.String(), err
}
