package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/routing"
)

func TestCodeOf(t *testing.T) {
	assert.Equal(t, ExitOK, CodeOf(nil))
	assert.Equal(t, ExitRuntime, CodeOf(errors.New("x")))
	assert.Equal(t, ExitUsage, CodeOf(Usagef("bad")))
	assert.Equal(t, ExitUsage, CodeOf(fmt.Errorf("wrapped: %w", Usagef("bad"))))
	assert.Equal(t, ExitValidation, CodeOf(&ExitError{Code: ExitValidation, Err: errors.New("v")}))
}

func TestReportIsOneLine(t *testing.T) {
	var b bytes.Buffer
	Report(&b, Usagef("--num-tokens: must be a positive integer"))
	assert.Equal(t, "epbench: error: --num-tokens: must be a positive integer\n", b.String())
}

func TestRoutingCommandPrintsTopK(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, routingCmd([]string{"-t", "5", "-k", "3", "-e", "16", "--rank", "1", "--seed", "7"}, &out))
	want, err := routing.TopK(5, 16, 3, routing.GenSeed(7, 1, 1, 0))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 5)
	for i, line := range lines {
		f := strings.Split(line, " ")
		require.Len(t, f, 3, "line %d: %q", i, line)
		for k, v := range f {
			assert.Equal(t, fmt.Sprint(want[i*3+k]), v)
		}
	}
}

func TestRoutingCommandRejectsBadInput(t *testing.T) {
	err := routingCmd([]string{"-t", "x", "-k", "3", "-e", "16", "--rank", "0"}, &bytes.Buffer{})
	assert.Equal(t, ExitUsage, CodeOf(err))
}

const reference = "../report/testdata/reference/ll_t128_i50.ep_bench.out"

func TestCompareTwoInputs(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, compareCmd([]string{"--label", "a", "--label", "b", reference, reference}, &out))
	assert.Contains(t, out.String(), "Host D+C ratio a/b = 1.00x")
}

func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.txt")
	require.NoError(t, os.WriteFile(junk, []byte("nothing here\n"), 0o644))
	for _, args := range [][]string{
		{},
		{filepath.Join(dir, "missing.out")},
		{junk},
		{"--label", "a", "--label", "b", junk},
		{"--bogus", junk},
	} {
		err := compareCmd(args, &bytes.Buffer{})
		assert.Equal(t, ExitUsage, CodeOf(err), "args %q: %v", args, err)
	}
}

func TestCUDAExecutableOverride(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "epbench-cuda")
	t.Setenv(CUDAExeEnv, exe)
	_, err := cudaExecutable()
	require.ErrorIs(t, err, ErrNoCUDAExecutable)
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	p, err := cudaExecutable()
	require.NoError(t, err)
	assert.Equal(t, exe, p)
}

func TestHandOverRefusesLoop(t *testing.T) {
	t.Setenv(handoffEnv, "1")
	err := handOver([]string{"devices"})
	require.Error(t, err)
	assert.Equal(t, ExitRuntime, CodeOf(err))
}

func TestUnknownSubcommandIsUsageError(t *testing.T) {
	assert.Equal(t, ExitUsage, Main([]string{"--num-tokens", "abc"}, Options{}))
}

// --cuda-graph where auto resolves to the CPU reference (no GPU usable) is a
// usage error, not a run that ignores the flag.
func TestCUDAGraphNeedsAGPU(t *testing.T) {
	if gpuCount() > 0 {
		t.Skip("a GPU is usable here: auto picks CUDA")
	}
	cfg := config.Default()
	cfg.CUDAGraph = true
	_, err := chooseCompute(cfg, Options{}, nil)
	assert.Equal(t, ExitUsage, CodeOf(err))
	assert.ErrorContains(t, err, "--cuda-graph needs the CUDA backend")
	cfg.CUDAGraph = false
	backend, err := chooseCompute(cfg, Options{}, nil)
	require.NoError(t, err)
	assert.Equal(t, config.ComputeCPU, backend)
}
