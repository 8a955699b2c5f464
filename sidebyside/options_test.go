package sidebyside

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequested(t *testing.T) {
	assert.True(t, Requested([]string{"--run"}))
	assert.True(t, Requested([]string{"--kernel-only", "--run=true"}))
	assert.False(t, Requested([]string{"a.out", "b.out"}))
	assert.False(t, Requested([]string{"--", "--run"}), "a file named --run")
	assert.False(t, Requested([]string{"--running"}))
}

func TestParseDefaults(t *testing.T) {
	fixedEnv(t)
	o, err := Parse([]string{"--run", "--ep-lib", "epbench", "--hpcx", "none", "--dry-run"}, Env{GPUCount: func() int { return 8 }})
	require.NoError(t, err)
	assert.Equal(t, Problem{Algorithm: "ll", Layout: "em", DispatchDtype: "bf16",
		Tokens: 128, Hidden: 7168, TopK: 8, Experts: 256, Warmup: 10, Iters: 50}, o.Problem)
	assert.Equal(t, 8, o.RanksPerNode, "one rank per local GPU")
	assert.Equal(t, 8, o.Ranks())
	assert.Equal(t, "mpirun", o.MPIRun)
	self, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, self, o.Epbench, "this executable")
	assert.Equal(t, []string{"epbench"}, o.Libs)
}

func TestParseLibs(t *testing.T) {
	for in, want := range map[string][]string{
		"epbench":         {"epbench"},
		"nccl-ep":         {"nccl-ep"},
		"both":            {"epbench", "nccl-ep"},
		"nccl-ep,epbench": {"nccl-ep", "epbench"},
	} {
		got, err := parseLibs(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

func TestParseEnvironmentFallbacks(t *testing.T) {
	fixedEnv(t)
	t.Setenv("NCCL_EP_BENCH", "/nccl/build/test/nccl_ep/ep_bench")
	o, err := Parse([]string{"--ep-lib", "nccl-ep", "--hpcx", "none", "--dry-run", "--nproc-per-node", "2"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, "/nccl/build/test/nccl_ep/ep_bench", o.NCCLEPBench)
	assert.Equal(t, "/nccl/build/lib", o.NCCLLibPath, "the lib folder of the build tree")

	t.Setenv("NCCL_LIB_PATH", "/other/lib")
	o, err = Parse([]string{"--ep-lib", "nccl-ep", "--hpcx", "none", "--dry-run", "--nproc-per-node", "2"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, "/other/lib", o.NCCLLibPath)

	o, err = Parse([]string{"--ep-lib", "nccl-ep", "--hpcx", "none", "--dry-run", "--nproc-per-node", "2",
		"--nccl-lib-path", "/flag/lib", "--nccl-ep-bench", "/flag/ep_bench"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, "/flag/lib", o.NCCLLibPath, "the flag wins")
	assert.Equal(t, "/flag/ep_bench", o.NCCLEPBench)
}

func TestHPCXDetection(t *testing.T) {
	fixedEnv(t)
	root := t.TempDir()
	fake := func(name string) string {
		dir := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "ompi", "bin"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ompi", "bin", "mpirun"), []byte("#!/bin/sh\n"), 0o755))
		return dir
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "hpcx-v2.0-broken"), 0o755))
	v21 := fake("hpcx-v2.21")
	fake("hpcx-v2.22")
	saved := hpcxPattern
	hpcxPattern = filepath.Join(root, "hpcx-*")
	t.Cleanup(func() { hpcxPattern = saved })

	dir, err := resolveHPCX("auto")
	require.NoError(t, err)
	assert.Equal(t, v21, dir, "the first complete install in name order")

	t.Setenv("HPCX_HOME", filepath.Join(root, "hpcx-v2.22"))
	dir, err = resolveHPCX("auto")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "hpcx-v2.22"), dir, "HPCX_HOME first")

	dir, err = resolveHPCX("none")
	require.NoError(t, err)
	assert.Empty(t, dir)

	hpcxPattern = filepath.Join(root, "nothing-*")
	t.Setenv("HPCX_HOME", "")
	dir, err = resolveHPCX("auto")
	require.NoError(t, err)
	assert.Empty(t, dir, "no HPC-X: plain mpirun")

	o, err := Parse([]string{"--ep-lib", "epbench", "--hpcx", v21, "--dry-run", "--nproc-per-node", "2"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(v21, "ompi", "bin", "mpirun"), o.MPIRun)
	o, err = Parse([]string{"--ep-lib", "epbench", "--hpcx", v21, "--mpirun", "/my/mpirun", "--dry-run", "--nproc-per-node", "2"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, "/my/mpirun", o.MPIRun, "--mpirun wins")
}

// Every bad input is refused with a usage error naming it, before anything
// runs; the free-form values that reach mpirun or the hostfile are held to
// host and interface names.
func TestParseRejects(t *testing.T) {
	fixedEnv(t)
	dir := fakes(t)
	bench := filepath.Join(dir, "fake_ep_bench.sh")
	base := []string{"--run", "--hpcx", "none", "--nproc-per-node", "2"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--ep-lib: required: epbench, mscclpp, mscclpp-cpp, nccl-ep, both, all, or a comma-separated list"},
		{[]string{"--ep-lib", "mscclpp-py"}, `--ep-lib: unknown library "mscclpp-py" (want epbench, mscclpp, mscclpp-cpp, nccl-ep, both or all)`},
		{[]string{"--ep-lib", "epbench;id"}, `--ep-lib: unknown library "epbench;id" (want epbench, mscclpp, mscclpp-cpp, nccl-ep, both or all)`},
		{[]string{"--ep-lib", "both,epbench"}, "--ep-lib: epbench is listed twice"},
		{[]string{"--ep-lib", "all,mscclpp"}, "--ep-lib: mscclpp is listed twice"},
		{[]string{"--ep-lib", "epbench", "a.out"}, `"a.out": unexpected argument: --run takes no summary files`},
		{[]string{"--ep-lib", "epbench", "--run=false"}, "--run: must be true here; leave it out to compare files"},
		{[]string{"--ep-lib", "epbench", "--bogus"}, "--bogus: unknown flag"},
		{[]string{"--ep-lib", "epbench", "-Z"}, "-Z: unknown flag"},
		{[]string{"--ep-lib", "epbench", "-test.v"}, "-test.v: unknown flag"},
		{[]string{"--ep-lib", "epbench", "--nodes"}, "--nodes: requires a value"},
		{[]string{"--ep-lib", "epbench", "-t", "0"}, `--num-tokens: must be a positive integer, got "0"`},
		{[]string{"--ep-lib", "epbench", "-t", "1;id"}, `--num-tokens: must be a positive integer, got "1;id"`},
		{[]string{"--ep-lib", "epbench", "-w", "-1"}, `--num-warmup: must be a non-negative integer, got "-1"`},
		{[]string{"--ep-lib", "epbench", "-i", "99999999999"}, "--num-iters: must be at most 1000000, got 99999999999"},
		{[]string{"--ep-lib", "epbench", "-a", "ht"}, "--algorithm: high-throughput mode is not supported"},
		{[]string{"--ep-lib", "epbench", "-a", "xx"}, `--algorithm: unknown value "xx" (want ll or low-latency)`},
		{[]string{"--ep-lib", "epbench", "-L", "xm"}, `--layout: unknown value "xm" (want em, rm or fl)`},
		{[]string{"--ep-lib", "epbench", "--dispatch-dtype", "fp16"}, `--dispatch-dtype: unknown value "fp16" (want bf16 or fp8_e4m3)`},
		{[]string{"--ep-lib", "epbench", "-k", "9", "-e", "8"}, "--num-topk: must not exceed --num-experts, got 9 > 8"},
		{[]string{"--ep-lib", "epbench", "-e", "7", "-k", "1"}, "--num-experts: must be divisible by the number of ranks, got 7 experts over 2 ranks"},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1 h2", "-e", "4", "-k", "2", "--nproc-per-node", "4"},
			"--num-experts: must be divisible by the number of ranks, got 4 experts over 8 ranks"},

		// Injection attempts and other malformed free-form values.
		{[]string{"--ep-lib", "epbench", "--nodes", "h1;rm -rf /"}, `--nodes: "h1;rm" is not a host name or IP`},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1 $(id)"}, `--nodes: "$(id)" is not a host name or IP`},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1 `id`"}, "--nodes: \"`id`\" is not a host name or IP"},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1\nh2 slots=99"}, `--nodes: must be host names or IPs separated by spaces, got "h1\nh2 slots=99"`},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1\th2"}, `--nodes: must be host names or IPs separated by spaces, got "h1\th2"`},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1 slots=99"}, `--nodes: "slots=99" is not a host name or IP`},
		{[]string{"--ep-lib", "epbench", "--nodes", "-oProxyCommand=id"}, `--nodes: "-oProxyCommand=id" is not a host name or IP`},
		{[]string{"--ep-lib", "epbench", "--nodes", "h1 h1"}, "--nodes: h1 is listed twice"},
		{[]string{"--ep-lib", "epbench", "--nodes", "  "}, "--nodes: names no host"},
		{[]string{"--ep-lib", "epbench", "--nodes", strings.Repeat("h", 254)}, `--nodes: "` + strings.Repeat("h", 254) + `" is not a host name or IP`},
		{[]string{"--ep-lib", "epbench", "--iface", "eth0;id"}, `--iface: "eth0;id" is not a network interface name`},
		{[]string{"--ep-lib", "epbench", "--iface", "eth0 eth1"}, `--iface: "eth0 eth1" is not a network interface name`},
		{[]string{"--ep-lib", "epbench", "--iface", "-eth0"}, `--iface: "-eth0" is not a network interface name`},
		{[]string{"--ep-lib", "epbench", "--iface", "$IFACE"}, `--iface: "$IFACE" is not a network interface name`},
		{[]string{"--ep-lib", "epbench", "--iface", "a234567890123456"}, `--iface: "a234567890123456" is not a network interface name`},
		{[]string{"--ep-lib", "epbench", "--mpirun-args", "--oversubscribe\x1b[2J"}, `--mpirun-args: "--oversubscribe\x1b[2J" holds a control character`},
		{[]string{"--ep-lib", "nccl-ep", "--nccl-ep-bench", bench, "--nccl-lib-path", "/a:/b"}, `--nccl-lib-path: must be one directory, got "/a:/b"`},

		// Launch.
		{[]string{"--ep-lib", "epbench", "--nproc-per-node", "0"}, `--nproc-per-node: must be a positive integer, got "0"`},
		{[]string{"--ep-lib", "epbench", "--hpcx", ""}, "--hpcx: must name a directory, auto or none"},
		{[]string{"--ep-lib", "epbench", "--hpcx", "/no/such/hpcx"}, "--hpcx: /no/such/hpcx holds no ompi/bin/mpirun"},
		{[]string{"--ep-lib", "epbench", "--mpirun", "/no/such/mpirun"}, "--mpirun: stat /no/such/mpirun: no such file or directory"},
		{[]string{"--ep-lib", "epbench", "--mpirun", "no-such-mpirun-here"}, "--mpirun: no-such-mpirun-here is not in PATH"},
		{[]string{"--ep-lib", "epbench", "--mpirun", bench, "--epbench", dir}, "--epbench: " + dir + " is not an executable file"},

		// What a program cannot run.
		{[]string{"--ep-lib", "nccl-ep", "--mpirun", bench}, "--nccl-ep-bench: not given, and ep_bench is not in PATH"},
		{[]string{"--ep-lib", "nccl-ep", "--mpirun", bench, "--nccl-ep-bench", "my_ep_bench"}, "--nccl-ep-bench: my_ep_bench is not in PATH"},
		{[]string{"--ep-lib", "nccl-ep", "--dry-run"}, ""},
		{[]string{"--ep-lib", "nccl-ep", "--nccl-ep-bench", "/no/such/ep_bench", "--dry-run"}, ""},
		{[]string{"--ep-lib", "nccl-ep", "--nccl-ep-bench", "/no/such/ep_bench", "--mpirun", bench}, "--nccl-ep-bench: stat /no/such/ep_bench: no such file or directory"},
		{[]string{"--ep-lib", "both", "--nccl-ep-bench", bench, "--dispatch-dtype", "fp8_e4m3"},
			"--dispatch-dtype: fp8_e4m3 cannot be compared with nccl-ep: its ep_bench command runs BF16 dispatch"},
		{[]string{"--ep-lib", "epbench", "--dispatch-dtype", "fp8_e4m3", "--dry-run"}, ""},
		{[]string{"--ep-lib", "epbench", "-L", "fl"}, "--ep-lib=epbench: cannot run this problem: --layout: flat layout belongs to high-throughput mode, which is not supported"},
		{[]string{"--ep-lib", "epbench", "--nproc-per-node", "512", "-e", "512"}, "--ep-lib=epbench: cannot run this problem: ranks: must be at most 256, got 512"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "-t 64"}, "--epbench-args: changes --num-tokens, which every backend shares; give -t to compare --run instead"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--dispatch-dtype=fp8_e4m3"}, "--epbench-args: changes --dispatch-dtype, which every backend shares; give --dispatch-dtype to compare --run instead"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--backend gpu"}, `--epbench-args: --backend: unknown value "gpu" (want cuda, cpu or auto)`},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--help"}, "--epbench-args: --help is not a benchmark flag"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--version"}, "--epbench-args: --version is not a benchmark flag"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "extra"}, `--epbench-args: "extra": unexpected positional argument`},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--num-blocks=-1"}, `--epbench-args: --num-blocks: must be a non-negative integer, got "-1"`},
	} {
		args := append(append([]string{}, base...), tc.args...)
		_, err := Parse(args, Env{})
		if tc.want == "" {
			assert.NoError(t, err, "%q", tc.args)
			continue
		}
		if assert.Error(t, err, "%q", tc.args) {
			assert.Equal(t, tc.want, err.Error(), "%q", tc.args)
			assert.True(t, IsUsage(err), "%q: %v is not a usage error", tc.args, err)
		}
	}
}

// The problem flags are epbench's (package config): the same aliases,
// ranges and messages, whichever programs run the problem.
func TestParseProblemFlagsAreEpbenchs(t *testing.T) {
	fixedEnv(t)
	base := []string{"--run", "--hpcx", "none", "--nproc-per-node", "2", "--dry-run",
		"--ep-lib", "nccl-ep", "--nccl-ep-bench", "/no/such/ep_bench"}
	o, err := Parse(append(base, "--tokens", "64", "--top-k", "4", "--experts", "32", "--warmup", "0", "--iters", "7",
		"-L", "rank-major", "-a", "low-latency"), Env{})
	require.NoError(t, err)
	assert.Equal(t, Problem{Algorithm: "ll", Layout: "rm", DispatchDtype: "bf16",
		Tokens: 64, Hidden: 7168, TopK: 4, Experts: 32, Warmup: 0, Iters: 7}, o.Problem)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "100"}, "--hidden: must be a multiple of 128, got 100"},
		{[]string{"--hidden", "32768"}, "--hidden: must be at most 16384, got 32768"},
		{[]string{"-t", "5000"}, "--num-tokens: must be at most 4096, got 5000"},
		{[]string{"--tokens", "5000"}, "--num-tokens: must be at most 4096, got 5000"},
		{[]string{"--top-k", "33"}, "--num-topk: must be at most 32, got 33"},
		{[]string{"--experts", "8192"}, "--num-experts: must be at most 4096, got 8192"},
		{[]string{"--iters", "0"}, `--num-iters: must be a positive integer, got "0"`},
		{[]string{"--warmup", "1000001"}, "--num-warmup: must be at most 1000000, got 1000001"},
		{[]string{"-L", "xm"}, `--layout: unknown value "xm" (want em, rm or fl)`},
		{[]string{"--nproc-per-node", "x"}, `--nproc-per-node: must be a positive integer, got "x"`},
		{[]string{"--dry-run=maybe"}, `--dry-run: must be true or false, got "maybe"`},
	} {
		require.NotEmpty(t, tc.want)
		parseCase(t, base, tc.args, tc.want)
	}

	// Through the command, with its prefix, as the user sees it.
	_, _, err = mainRun(t, 2, "--run", "--dry-run", "--hpcx", "none", "--ep-lib", "epbench", "-d", "100")
	require.Error(t, err)
	assert.Equal(t, "compare --run: --hidden: must be a multiple of 128, got 100", err.Error())
}

func TestParseNeedsRanksPerNodeWithoutGPU(t *testing.T) {
	fixedEnv(t)
	_, err := Parse([]string{"--ep-lib", "epbench", "--hpcx", "none"}, Env{GPUCount: func() int { return 0 }})
	require.Error(t, err)
	assert.Equal(t, "--nproc-per-node: no GPU found on this node; give the ranks per node", err.Error())
	assert.True(t, IsUsage(err))
}

func TestParseRefusesToRunUnderMPI(t *testing.T) {
	fixedEnv(t)
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, err := Parse([]string{"--ep-lib", "epbench", "--nproc-per-node", "2"}, Env{})
	require.Error(t, err)
	assert.Equal(t, "compare --run: starts mpirun itself; run it directly, not under mpirun", err.Error())
}

func TestHelp(t *testing.T) {
	out, _, err := mainRun(t, 0, "--run", "--help")
	require.NoError(t, err)
	assert.Equal(t, Usage(), out)
	for _, flag := range []string{"--ep-lib", "--nccl-ep-bench", "--nccl-lib-path", "--nproc-per-node", "--nodes",
		"--iface", "--hpcx", "--dry-run", "--json", "--kernel-only", "--epbench-args", "--layout", "--dispatch-dtype"} {
		assert.Contains(t, out, flag)
	}
}
