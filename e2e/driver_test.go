package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where the CUDA executable exists but the CUDA driver does not, the CUDA
// backend is refused on one line, once for the whole job, with exit 1:
// not with the loader's message on every rank (exit 127).
func TestCUDABackendWithoutDriver(t *testing.T) {
	// The real CUDA executable, which the loader refuses without libcuda.so.1.
	cudaExe := filepath.Join(t.TempDir(), "epbench-cuda")
	build := exec.Command("go", "build", "-o", cudaExe, "../cmd/epbench-cuda")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building epbench-cuda (make test sets the CUDA build flags): %s", out)
	want := "epbench: error: the CUDA backend needs the NVIDIA driver, which cannot be loaded here (libcuda.so.1: "
	for _, np := range []int{0, 1, 2} {
		args := []string{epbench(), "--backend", "cuda", "-t", "8", "-e", "8"}
		if np > 0 {
			args = append([]string{"mpirun", "-np", strconv.Itoa(np)}, args...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
			"OMPI_MCA_rmaps_base_oversubscribe=1", "EPBENCH_CUDA_EXE="+cudaExe)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if strings.Contains(stdout.String(), "=== Summary") {
			t.Skip("the CUDA driver loads here: the run measured")
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, 1, code, "np %d: stderr %s", np, stderr.String())
		lines := errorLines(stderr.String())
		if assert.Len(t, lines, 1, "np %d: %q", np, stderr.String()) {
			assert.True(t, strings.HasPrefix(lines[0], want), "np %d: %q", np, lines[0])
			assert.True(t, strings.HasSuffix(lines[0], "; --backend cpu runs without it"), "np %d: %q", np, lines[0])
		}
		assert.NotContains(t, stderr.String(), "error while loading shared libraries", "np %d", np)
	}
}
