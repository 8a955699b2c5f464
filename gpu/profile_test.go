package gpu

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
)

// nvtxRecorder is the injection library's source (built by the test, which
// may run from any directory).
//
//go:embed testdata/nvtxrec.c
var nvtxRecorder []byte

// nvtxInclude is a directory holding nvtx3/nvToolsExt.h: $CUDA_HOME's, the
// toolkit's, or the extracted build headers'.
func nvtxInclude() string {
	dirs := []string{filepath.Join(os.Getenv("CUDA_HOME"), "include"), "/usr/local/cuda/include", "../.deps/cuda/include", "/usr/include"}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "nvtx3", "nvToolsExt.h")); err == nil {
			return d
		}
	}
	return ""
}

// -p's ranges as a profiler sees them: the test's injection library
// (testdata/nvtxrec.c, built here with the C compiler) records every push
// and pop, and the names and nesting must be ep_bench's: HandleCreate, then
// the paired range holding Dispatch and Combine once per iteration, on
// every rank.
func TestProfileRanges(t *testing.T) {
	inc := nvtxInclude()
	cc, err := exec.LookPath("cc")
	if inc == "" || err != nil {
		t.Skipf("no C compiler (%v) or NVTX headers (%q) to build the injection library", err, inc)
	}
	dir := t.TempDir()
	lib, src := filepath.Join(dir, "libnvtxrec.so"), filepath.Join(dir, "nvtxrec.c")
	if err := os.WriteFile(src, nvtxRecorder, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-Wall", "-Werror", "-I", inc, "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the injection library: %v\n%s", err, out)
	}
	log := filepath.Join(dir, "ranges")
	// Read by NVTX at the process's first range (none before this test).
	t.Setenv("NVTX_INJECTION64_PATH", lib)
	t.Setenv("EPBENCH_NVTX_LOG", log)
	const iters = 3
	onGPU(t, func(w *bench.World, dev *Device) error {
		cfg := testConfig()
		cfg.Profile, cfg.Warmup, cfg.Iters, cfg.Validate = true, 1, iters, true
		open := func(cfg *config.Config) (*bench.Platform, error) { return Hooks{}.Platform(w, cfg) }
		res, err := bench.Benchmark(w, cfg, open, 0)
		if err != nil {
			return err
		}
		if res.Failed() || !res.Config.ProfileMode {
			return fmt.Errorf("validation %+v, header profile mode %v", res.Validation, res.Config.ProfileMode)
		}
		got, err := os.ReadFile(fmt.Sprintf("%s.%d", log, os.Getpid()))
		if err != nil {
			return fmt.Errorf("the injection library recorded nothing: %w", err)
		}
		want := []string{"push 0 HandleCreate", "pop 0", "push 0 Paired Dispatch+Combine Benchmark"}
		for range iters {
			want = append(want, "push 1 Dispatch", "pop 1", "push 1 Combine", "pop 1")
		}
		want = append(want, "pop 0")
		if lines := strings.Split(strings.TrimSpace(string(got)), "\n"); !slices.Equal(lines, want) {
			return fmt.Errorf("rank %d's ranges:\n%s\nwant\n%s", w.Rank, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		return nil
	})
}
