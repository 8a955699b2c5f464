package e2e

import (
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
		r := runWithCUDA(t, time.Minute, cudaExe, args[0], args[1:]...)
		if strings.Contains(r.stdout, "=== Summary") {
			t.Skip("the CUDA driver loads here: the run measured")
		}
		assert.Equal(t, 1, r.code, "np %d: stderr %s", np, r.stderr)
		lines := errorLines(r.stderr)
		if assert.Len(t, lines, 1, "np %d: %q", np, r.stderr) {
			assert.True(t, strings.HasPrefix(lines[0], want), "np %d: %q", np, lines[0])
			assert.True(t, strings.HasSuffix(lines[0], "; --backend cpu runs without it"), "np %d: %q", np, lines[0])
		}
		assert.NotContains(t, r.stderr, "error while loading shared libraries", "np %d", np)
	}
}
