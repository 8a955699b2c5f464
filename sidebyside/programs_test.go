package sidebyside

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// emptyPath leaves nothing to find in PATH: no benchmark, no Python, no
// mpirun.
func emptyPath(t *testing.T) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
}

// commandLines returns the "$ " lines of a dry run by the banner above
// each.
func commandLines(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := map[string]string{}
	var lib string
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(l, "########## ep-lib="); ok {
			lib = strings.TrimSuffix(name, " ##########")
			continue
		}
		if cmd, ok := strings.CutPrefix(l, "$ "); ok && lib != "" {
			require.NotContains(t, lines, lib, "two commands for %s", lib)
			lines[lib] = cmd
		}
	}
	return lines
}

// With nothing installed, the dry run of every program prints its launch
// line, one line each, the programs by their names as PATH would find them.
func TestDryRunAllWithNothingInstalled(t *testing.T) {
	fixedEnv(t)
	asRoot(t, false)
	emptyPath(t)
	self, err := os.Executable()
	require.NoError(t, err)
	out, errOut, err := mainRun(t, 0, "--run", "--dry-run", "--ep-lib", "all", "--nproc-per-node", "2", "--hpcx", "none")
	require.NoError(t, err)
	assert.Empty(t, errOut)
	mpi := "mpirun -np 2 --map-by ppr:2:node --bind-to none -mca pml ob1 -mca btl self,vader,tcp " +
		"-mca coll_hcoll_enable 0 -mca coll_ucc_enable 0"
	assert.Equal(t, map[string]string{
		"epbench": "env NCCL_NVLS_ENABLE=0 " + mpi + " -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE " + shellQuote(self) +
			" -a ll -L em -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 --combine-mode rank_local_reduce",
		"nccl-ep": "env NCCL_NVLS_ENABLE=0 CUDA_HOME=/usr/local/cuda-13.0 UCX_TLS=tcp,sm,self,cuda_copy UCX_HANDLE_ERRORS=none " +
			"NCCL_NET_PLUGIN=none NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0 " + mpi + " -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE " +
			"-x CUDA_HOME -x UCX_TLS -x UCX_HANDLE_ERRORS -x NCCL_NET_PLUGIN -x NCCL_IB_DISABLE -x NCCL_MNNVL_ENABLE " +
			"ep_bench -a ll -L em -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50",
		"mscclpp": "env NCCL_NVLS_ENABLE=0 python3 -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 " +
			"ep_bench_ll.py -a ll -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 --combine-mode rank_local_reduce " +
			"--num-blocks 130 --no-kernel-timing",
		"mscclpp-cpp": "env NCCL_NVLS_ENABLE=0 " + mpi + " -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE " +
			"mscclpp_ep_bench -a ll -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 --combine-mode rank_local_reduce " +
			"--num-blocks 130",
	}, commandLines(t, out))
	libs := []string{"epbench", "nccl-ep", "mscclpp", "mscclpp-cpp"}
	last := -1
	for _, l := range libs {
		i := strings.Index(out, "########## ep-lib="+l+" ")
		assert.Greater(t, i, last, "%s in the order of --ep-lib all", l)
		last = i
	}
}

// Without --dry-run a program that is not there is a usage error naming
// its flag, before anything starts; a program that runs no mpirun needs
// none.
func TestMissingProgramsAreRefusedFirst(t *testing.T) {
	fixedEnv(t)
	dir := fakes(t)
	emptyPath(t)
	script := filepath.Join(dir, "ep_bench_ll.py")
	require.NoError(t, os.WriteFile(script, []byte("# MSCCL++'s benchmark\n"), 0o644))
	python := filepath.Join(dir, "fake_python.sh")
	base := []string{"--run", "--hpcx", "none", "--nproc-per-node", "2"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ep-lib", "mscclpp"}, "--mscclpp-bench: not given, and ep_bench_ll.py is not in PATH"},
		{[]string{"--ep-lib", "mscclpp", "--mscclpp-bench", filepath.Join(dir, "nope.py")},
			"--mscclpp-bench: stat " + filepath.Join(dir, "nope.py") + ": no such file or directory"},
		{[]string{"--ep-lib", "mscclpp", "--mscclpp-bench", script}, "--python: not given, and python3 is not in PATH"},
		{[]string{"--ep-lib", "mscclpp", "--mscclpp-bench", script, "--python", "python3.12"}, "--python: python3.12 is not in PATH"},
		{[]string{"--ep-lib", "mscclpp", "--mscclpp-bench", script, "--python", python}, ""},
		{[]string{"--ep-lib", "mscclpp", "--mscclpp-bench", script, "--conda-prefix", dir, "--conda-env", "ep"},
			"--conda-env: stat " + filepath.Join(dir, "envs", "ep", "bin", "python") + ": no such file or directory"},
		{[]string{"--ep-lib", "mscclpp-cpp"}, "--mscclpp-cpp-bench: not given, and mscclpp_ep_bench is not in PATH"},
		{[]string{"--ep-lib", "mscclpp-cpp", "--mscclpp-cpp-bench", filepath.Join(dir, "fake_mscclpp_ep_bench.sh")},
			"--mpirun: mpirun is not in PATH"},
		{[]string{"--ep-lib", "nccl-ep"}, "--nccl-ep-bench: not given, and ep_bench is not in PATH"},
	} {
		parseCase(t, base, tc.args, tc.want)
	}

	// Found in PATH: the path found is launched.
	bin := t.TempDir()
	for _, name := range []string{"ep_bench_ll.py", "python3"} {
		require.NoError(t, os.Symlink(map[string]string{"ep_bench_ll.py": script, "python3": python}[name], filepath.Join(bin, name)))
	}
	require.NoError(t, os.Chmod(script, 0o644), "a script need not be executable")
	t.Setenv("PATH", bin)
	o, err := Parse(append(base, "--ep-lib", "mscclpp"), Env{})
	require.NoError(t, err)
	c := o.command(programs["mscclpp"], nil, os.LookupEnv)
	assert.Equal(t, filepath.Join(bin, "python3"), c.Argv[0])
	assert.Equal(t, filepath.Join(bin, "ep_bench_ll.py"), c.Argv[6])
}

// The seed driver's launches of MSCCL++'s benchmarks, with every option
// that changes them.
func TestCommandsMSCCLPP(t *testing.T) {
	fixedEnv(t)
	asRoot(t, false)
	cuda := t.TempDir()
	t.Setenv("CUDA_HOME", cuda)
	o, cmds := commandsFor(t, "--ep-lib", "mscclpp,mscclpp-cpp", "--nproc-per-node", "4", "-e", "64", "-t", "32",
		"--mscclpp-bench", "/opt/mscclpp/test/python/ep/ep_bench_ll.py", "--python", "/usr/bin/python3.12",
		"--mscclpp-cpp-bench", "/opt/mscclpp/build/mscclpp_ep_bench", "--iface", "eth1", "--hca", "mlx5_0,mlx5_1",
		"--combine-mode", "direct_send", "--num-blocks", "64", "--dispatch-dtype", "fp8_e4m3", "--kernel-only")
	assert.Empty(t, o.CUPTILib, "no CUPTI under "+cuda)
	flags := "-a ll -t 32 -d 7168 -k 8 -e 64 -w 10 -i 50 --dispatch-dtype fp8_e4m3 --combine-mode direct_send --num-blocks 64"
	py := cmds["mscclpp"]
	assert.Equal(t, []string{"NCCL_NVLS_ENABLE=0", "NCCL_SOCKET_IFNAME=eth1", "GLOO_SOCKET_IFNAME=eth1",
		"MSCCLPP_SOCKET_IFNAME=eth1", "MSCCLPP_HCA_DEVICES=mlx5_0,mlx5_1"}, py.Env)
	assert.Equal(t, "/usr/bin/python3.12 -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=4 "+
		"/opt/mscclpp/test/python/ep/ep_bench_ll.py "+flags+" --cupti-inproc", strings.Join(py.Argv, " "))
	cpp := cmds["mscclpp-cpp"]
	assert.Equal(t, []string{"NCCL_NVLS_ENABLE=0", "MSCCLPP_HCA_DEVICES=mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME=eth1",
		"MSCCLPP_SOCKET_IFNAME=eth1"}, cpp.Env, "no CUPTI folder to add")
	assert.Equal(t, concat(mpiPrefix("4", "4")[:len(mpiPrefix("4", "4"))-6],
		[]string{"-mca", "btl_tcp_if_include", "eth1", "-mca", "coll_hcoll_enable", "0", "-mca", "coll_ucc_enable", "0",
			"-x", "LD_LIBRARY_PATH", "-x", "PATH", "-x", "NCCL_NVLS_ENABLE", "-x", "MSCCLPP_HCA_DEVICES", "-x", "NCCL_SOCKET_IFNAME",
			"-x", "MSCCLPP_SOCKET_IFNAME", "/opt/mscclpp/build/mscclpp_ep_bench"},
		strings.Fields(flags), []string{"--kernel-timing"}), cpp.Argv)

	// CUPTI found under CUDA_HOME goes first on the library path; the
	// torch.profiler pass adds no flag; no kernel timing asked for is
	// --no-kernel-timing.
	lib := filepath.Join(cuda, "targets", "x86_64-linux", "lib")
	require.NoError(t, os.MkdirAll(lib, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libcupti.so.13"), nil, 0o644))
	_, cmds = commandsFor(t, "--ep-lib", "mscclpp,mscclpp-cpp", "--nproc-per-node", "2", "--cupti-inproc")
	assert.Contains(t, cmds["mscclpp"].Env, "LD_LIBRARY_PATH="+lib+":/usr/lib/mpi")
	assert.Equal(t, "--cupti-inproc", cmds["mscclpp"].Argv[len(cmds["mscclpp"].Argv)-1])
	assert.Contains(t, cmds["mscclpp-cpp"].Env, "LD_LIBRARY_PATH="+lib+":/usr/lib/mpi")
	assert.Equal(t, "--kernel-timing", cmds["mscclpp-cpp"].Argv[len(cmds["mscclpp-cpp"].Argv)-1])
	_, cmds = commandsFor(t, "--ep-lib", "mscclpp", "--nproc-per-node", "2", "--torch-profiler")
	assert.Equal(t, "130", cmds["mscclpp"].Argv[len(cmds["mscclpp"].Argv)-1], "no timing flag")
	assert.NotContains(t, strings.Join(cmds["mscclpp"].Env, " "), "LD_LIBRARY_PATH", "CUPTI only for its timing")
	_, cmds = commandsFor(t, "--ep-lib", "mscclpp", "--nproc-per-node", "2")
	assert.Equal(t, "--no-kernel-timing", cmds["mscclpp"].Argv[len(cmds["mscclpp"].Argv)-1])
	_, cmds = commandsFor(t, "--ep-lib", "mscclpp-cpp", "--nproc-per-node", "2")
	assert.Equal(t, "130", cmds["mscclpp-cpp"].Argv[len(cmds["mscclpp-cpp"].Argv)-1], "no kernel timing")
	assert.Contains(t, cmds["mscclpp-cpp"].Env, "LD_LIBRARY_PATH="+lib+":/usr/lib/mpi", "CUPTI where found")
}

// A Conda environment's bin/python runs the benchmark, its bin first on
// PATH, nothing through a shell.
func TestCommandsConda(t *testing.T) {
	fixedEnv(t)
	conda := t.TempDir()
	env := filepath.Join(conda, "envs", "mscclpp")
	require.NoError(t, os.MkdirAll(filepath.Join(env, "bin"), 0o755))
	for _, exe := range []string{"python", "torchrun"} {
		require.NoError(t, os.WriteFile(filepath.Join(env, "bin", exe), []byte("#!/bin/sh\n"), 0o755))
	}
	t.Setenv("PATH", "/usr/bin")
	script := filepath.Join(t.TempDir(), "ep_bench_ll.py")
	require.NoError(t, os.WriteFile(script, nil, 0o644))
	o, err := Parse([]string{"--run", "--ep-lib", "mscclpp", "--hpcx", "none", "--nproc-per-node", "2",
		"--mscclpp-bench", script, "--conda-prefix", conda, "--conda-env", "mscclpp"}, Env{})
	require.NoError(t, err)
	c := o.command(programs["mscclpp"], nil, os.LookupEnv)
	assert.Equal(t, filepath.Join(env, "bin", "python"), c.Argv[0])
	assert.Equal(t, []string{"NCCL_NVLS_ENABLE=0", "PATH=" + filepath.Join(env, "bin") + ":/usr/bin", "CONDA_PREFIX=" + env}, c.Env)

	o, err = Parse([]string{"--run", "--ep-lib", "mscclpp", "--hpcx", "none", "--nproc-per-node", "2",
		"--mscclpp-bench", script, "--conda-prefix", conda, "--conda-env", "base", "--dry-run"}, Env{})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(conda, "bin", "python"), o.Python, "the base environment is the install")

	require.NoError(t, os.Remove(filepath.Join(env, "bin", "torchrun")))
	_, err = Parse([]string{"--run", "--ep-lib", "mscclpp", "--hpcx", "none", "--nproc-per-node", "2",
		"--mscclpp-bench", script, "--conda-prefix", conda, "--conda-env", "mscclpp"}, Env{})
	require.Error(t, err)
	assert.Equal(t, "--conda-env: "+env+" has no bin/torchrun: install PyTorch there", err.Error())
}

// The pass-through options reach the programs that take them and are
// refused for one that does not.
func TestPassThroughOptions(t *testing.T) {
	fixedEnv(t)
	base := []string{"--run", "--dry-run", "--hpcx", "none", "--nproc-per-node", "2"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ep-lib", "both", "--combine-mode", "direct_send"}, "--combine-mode: cannot be given to nccl-ep: its ep_bench has no such option"},
		{[]string{"--ep-lib", "all", "--combine-mode", "rank_local_reduce"}, "--combine-mode: cannot be given to nccl-ep: its ep_bench has no such option"},
		{[]string{"--ep-lib", "nccl-ep", "--num-blocks", "64"}, "--num-blocks: cannot be given to nccl-ep: its ep_bench has no such option"},
		{[]string{"--ep-lib", "all", "--dispatch-dtype", "fp8_e4m3"},
			"--dispatch-dtype: fp8_e4m3 cannot be compared with nccl-ep: its ep_bench command runs BF16 dispatch"},
		{[]string{"--ep-lib", "epbench", "--combine-mode", "sum"}, `--combine-mode: unknown value "sum" (want rank_local_reduce or direct_send)`},
		{[]string{"--ep-lib", "epbench", "--num-blocks", "0"}, `--num-blocks: must be a positive integer, got "0"`},
		{[]string{"--ep-lib", "both", "--cupti-inproc"}, "--cupti-inproc: only mscclpp and mscclpp-cpp take it (epbench and nccl-ep always time kernels in process)"},
		{[]string{"--ep-lib", "epbench,mscclpp-cpp", "--torch-profiler"}, "--torch-profiler: only mscclpp takes it"},
		{[]string{"--ep-lib", "epbench", "--hca", "mlx5_0"}, "--hca: only mscclpp and mscclpp-cpp take it"},
		{[]string{"--ep-lib", "mscclpp", "--hca", "mlx5_0 mlx5_1"}, `--hca: "mlx5_0 mlx5_1" is not a comma-separated list of device names`},
		{[]string{"--ep-lib", "mscclpp", "--num-blocks", "3"}, "--num-blocks: 3 cannot be given to mscclpp: it takes 4 (ranks + 2) to 130"},
		{[]string{"--ep-lib", "mscclpp-cpp", "--num-blocks", "131"}, "--num-blocks: 131 cannot be given to mscclpp-cpp: it takes 4 (ranks + 2) to 130"},
		{[]string{"--ep-lib", "mscclpp", "-d", "1024"}, "--hidden: 1024 cannot be compared with mscclpp: it takes 4096, 7168, 8192 or 9216"},
		{[]string{"--ep-lib", "mscclpp-cpp", "-k", "10"}, "--num-topk: 10 cannot be compared with mscclpp-cpp: it takes 1 to 9"},
		{[]string{"--ep-lib", "mscclpp", "-L", "rm"}, "--layout: rm cannot be compared with mscclpp: it runs the expert-major layout (em) only"},
		{[]string{"--ep-lib", "mscclpp", "--nodes", "h1 h2"}, "--nodes: mscclpp runs on this node only (torchrun --standalone); leave out --nodes, or use mscclpp-cpp"},
		{[]string{"--ep-lib", "mscclpp", "--conda-env", "ep"}, "--conda-env: needs --conda-prefix (the Conda install)"},
		{[]string{"--ep-lib", "mscclpp", "--conda-prefix", "/opt/conda"}, "--conda-prefix: needs --conda-env"},
		{[]string{"--ep-lib", "mscclpp", "--conda-prefix", "/opt/conda", "--conda-env", "ep", "--python", "python3"},
			"--python: cannot be given with --conda-env, whose bin/python runs the benchmark"},
		{[]string{"--ep-lib", "mscclpp", "--conda-prefix", "/opt/conda", "--conda-env", "../x"}, `--conda-env: "../x" is not an environment name`},
		{[]string{"--ep-lib", "epbench", "--combine-mode", "direct_send", "--epbench-args", "--combine-mode rank_local_reduce"},
			"--epbench-args: changes --combine-mode, which every backend shares; give --combine-mode to compare --run instead"},
		{[]string{"--ep-lib", "epbench", "--num-blocks", "64", "--epbench-args", "--num-blocks 32"},
			"--epbench-args: changes --num-blocks, which every backend shares; give --num-blocks to compare --run instead"},
		{[]string{"--ep-lib", "epbench", "--epbench-args", "--num-blocks 32"}, ""},
		{[]string{"--ep-lib", "epbench,mscclpp,mscclpp-cpp", "--combine-mode", "direct_send", "--num-blocks", "64", "--cupti-inproc"}, ""},
	} {
		parseCase(t, base, tc.args, tc.want)
	}

	_, cmds := commandsFor(t, "--ep-lib", "epbench", "--nproc-per-node", "2", "--combine-mode", "direct_send", "--num-blocks", "64")
	assert.Equal(t, "--dispatch-dtype bf16 --combine-mode direct_send --num-blocks 64",
		strings.Join(cmds["epbench"].Argv[len(cmds["epbench"].Argv)-6:], " "))
}

// MSCCL++'s Python benchmark, through a stand-in Python: its output
// streams under its banner and its summary (the seed's format, with the
// representative kernel rows) makes the table; no mpirun is involved.
func TestRunMSCCLPP(t *testing.T) {
	fixedEnv(t)
	dir := fakes(t)
	script := filepath.Join(dir, "ep_bench_ll.py")
	require.NoError(t, os.WriteFile(script, nil, 0o644))
	emptyPath(t)
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	out, errOut, err := mainRun(t, 0, "--run", "--ep-lib", "mscclpp", "--hpcx", "none", "--nproc-per-node", "2",
		"--python", filepath.Join(dir, "fake_python.sh"), "--mscclpp-bench", script, "--kernel-only", "--json", jsonPath)
	require.NoError(t, err, "stderr:\n%s", errOut)
	assert.Contains(t, errOut, "fake python: NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/lib/mpi PATH=")
	assert.Contains(t, errOut, " args: -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 "+script+
		" -a ll -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 --combine-mode rank_local_reduce --num-blocks 130 --cupti-inproc\n")
	assert.Contains(t, out, "\n########## ep-lib=mscclpp ##########\n$ env NCCL_NVLS_ENABLE=0 "+filepath.Join(dir, "fake_python.sh")+" -m torch.distributed.run ")
	assert.Contains(t, out, "=== Unified EP Low-Latency Summary (kernel-only, us) ===\nmetric                         mscclpp\n")
	assert.Contains(t, out, "Kernel Dispatch avg              35.50\n")
	assert.Contains(t, out, "Kernel Dispatch repr             30.12\n")
	assert.Contains(t, out, "Kernel Combine repr              33.00\n")

	rf := readRunFile(t, jsonPath)
	require.Len(t, rf.Results, 1)
	assert.Equal(t, "ep_bench_ll.py", rf.Results[0].Format)
	assert.True(t, rf.Results[0].OK && rf.Results[0].InTable)
	assert.Equal(t, filepath.Join(dir, "fake_python.sh"), rf.Results[0].Argv[0])
}

// Every program at once, each through its stand-in: four banners, one
// table of four columns, exit 0.
func TestRunAllFour(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	script := filepath.Join(dir, "ep_bench_ll.py")
	require.NoError(t, os.WriteFile(script, nil, 0o644))
	out, errOut, err := mainRun(t, 0, "--run", "--ep-lib", "all", "--hpcx", "none", "--nproc-per-node", "2",
		"--mpirun-args", "--oversubscribe", "--hca", "mlx5_0",
		"--epbench", filepath.Join(dir, "fake_ep_bench.sh"), "--nccl-ep-bench", filepath.Join(dir, "fake_ep_bench.sh"),
		"--python", filepath.Join(dir, "fake_python.sh"), "--mscclpp-bench", script,
		"--mscclpp-cpp-bench", filepath.Join(dir, "fake_mscclpp_ep_bench.sh"))
	require.NoError(t, err, "stderr:\n%s", errOut)
	assert.Contains(t, out, "metric                         epbench       nccl-ep       mscclpp   mscclpp-cpp\n")
	assert.Contains(t, out, "Host Dispatch avg                40.40         40.40         45.49         45.49\n")
	assert.Contains(t, errOut, "fake mscclpp_ep_bench rank 1: MSCCLPP_HCA_DEVICES=mlx5_0 ")
	assert.Contains(t, errOut, "args: -a ll -t 128 -d 7168 -k 8 -e 256 -w 10 -i 50 --dispatch-dtype bf16 "+
		"--combine-mode rank_local_reduce --num-blocks 130\n")
	assert.NotContains(t, out, "D+C ratio", "a ratio is for two")
	assert.NotContains(t, errOut, "warning")
}

// A program that fails after printing its summary stays in the table,
// marked, with a note and a warning, as the seed driver keeps it; the
// command still exits 1.
func TestRunFailureAfterSummary(t *testing.T) {
	requireMPI(t)
	fixedEnv(t)
	dir := fakes(t)
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	out, errOut, err := mainRun(t, 0, runArgs(dir, "fake_ep_bench.sh", "fake_ep_bench_after_summary.sh", "--json", jsonPath)...)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrProgramFailed))
	assert.False(t, IsUsage(err))
	assert.Equal(t, "compare --run: backend failed: nccl-ep (1 of 2)", err.Error())
	assert.Contains(t, errOut, "epbench: warning: ep-lib=nccl-ep failed (exit code 7) after printing its summary; in the table as nccl-ep*\n")
	assert.Contains(t, errOut, "  | fake ep_bench: ncclCommDestroy failed: unhandled system error\n")
	assert.Contains(t, out, "metric                         epbench      nccl-ep*\n")
	assert.Contains(t, out, "  NOTE: nccl-ep* failed after printing its summary (exit code 7)\n")
	assert.Contains(t, out, "\nHost D+C ratio epbench/nccl-ep* = 1.00x\n")

	rf := readRunFile(t, jsonPath)
	require.Len(t, rf.Results, 2)
	r := rf.Results[1]
	assert.False(t, r.OK)
	assert.True(t, r.InTable)
	assert.Equal(t, 7, r.ExitCode)
	assert.Equal(t, "exit code 7", r.Error)
	require.NotNil(t, r.Summary)
	assert.Equal(t, 97.01, r.Summary.Host.Total.LatencyUS.Avg)
}

// parseCase parses base followed by args: want "" is success, else the
// usage error's exact text.
func parseCase(t *testing.T, base, args []string, want string) {
	t.Helper()
	_, err := Parse(append(append([]string{}, base...), args...), Env{})
	if want == "" {
		assert.NoError(t, err, "%q", args)
		return
	}
	if assert.Error(t, err, "%q", args) {
		assert.Equal(t, want, err.Error(), "%q", args)
		assert.True(t, IsUsage(err), "%q: %v is not a usage error", args, err)
	}
}
