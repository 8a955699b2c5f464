package sidebyside

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// The MSCCL++ benchmarks the seed driver runs, by their default names.
const (
	mscclppScript = "ep_bench_ll.py"
	mscclppCppExe = "mscclpp_ep_bench"
	// mscclppBlocks is their default and largest --num-blocks.
	mscclppBlocks = 130
)

// mscclppHidden are the hidden sizes MSCCL++'s benchmarks take.
var mscclppHidden = []int{4096, 7168, 8192, 9216}

// checkMSCCLPP refuses what MSCCL++'s benchmarks cannot run: another layout
// than expert-major, hidden sizes and top-k outside theirs, a block count
// outside [ranks+2, 130].
func checkMSCCLPP(name string, o *Options) error {
	p := &o.Problem
	if p.Layout != "em" {
		return usageErr("--layout", "%s cannot be compared with %s: it runs the expert-major layout (em) only", p.Layout, name)
	}
	if i := sort.SearchInts(mscclppHidden, p.Hidden); i == len(mscclppHidden) || mscclppHidden[i] != p.Hidden {
		return usageErr("--hidden", "%d cannot be compared with %s: it takes 4096, 7168, 8192 or 9216", p.Hidden, name)
	}
	if p.TopK > 9 {
		return usageErr("--num-topk", "%d cannot be compared with %s: it takes 1 to 9", p.TopK, name)
	}
	if b, lo := mscclppBlockCount(o), o.Ranks()+2; b < lo || b > mscclppBlocks {
		return usageErr("--num-blocks", "%d cannot be given to %s: it takes %d (ranks + 2) to %d", b, name, lo, mscclppBlocks)
	}
	return nil
}

// mscclppBlockCount is --num-blocks, or MSCCL++'s default.
func mscclppBlockCount(o *Options) int {
	if o.NumBlocks > 0 {
		return o.NumBlocks
	}
	return mscclppBlocks
}

// mscclppArgs are the flags both MSCCL++ benchmarks take, as the seed
// driver passes them.
func mscclppArgs(o *Options) []string {
	p := &o.Problem
	args := append([]string{"-a", p.Algorithm}, sizeArgs(p)...)
	return append(args, "--dispatch-dtype", p.DispatchDtype, "--combine-mode", o.CombineMode,
		"--num-blocks", strconv.Itoa(mscclppBlockCount(o)))
}

// cuptiLibDir is where the seed driver finds CUPTI's library: the first of
// $CUDA_HOME/targets/*/lib (in name order) and $CUDA_HOME/extras/CUPTI/lib64
// that holds a libcupti.so*; "" where there is none (a node without CUDA
// still runs the benchmarks' host timing).
func cuptiLibDir(cudaHome string) string {
	dirs, _ := filepath.Glob(filepath.Join(cudaHome, "targets", "*", "lib"))
	sort.Strings(dirs)
	for _, d := range append(dirs, filepath.Join(cudaHome, "extras", "CUPTI", "lib64")) {
		if m, _ := filepath.Glob(filepath.Join(d, "libcupti.so*")); len(m) > 0 {
			return d
		}
	}
	return ""
}

// findCUPTI sets o.CUPTILib from $CUDA_HOME (default /usr/local/cuda).
func findCUPTI(o *Options) {
	if o.CUPTILib == "" {
		o.CUPTILib = cuptiLibDir(firstSet(os.Getenv("CUDA_HOME"), "/usr/local/cuda"))
	}
}

// mscclppProgram is MSCCL++'s Python benchmark, ep_bench_ll.py, run by
// Python through torch.distributed.run (torchrun) on this node, as the
// seed driver runs it.
type mscclppProgram struct{}

func (mscclppProgram) Prepare(o *Options) error {
	if len(o.Nodes) > 0 {
		return usageErr("--nodes", "mscclpp runs on this node only (torchrun --standalone); leave out --nodes, or use mscclpp-cpp")
	}
	if err := checkMSCCLPP("mscclpp", o); err != nil {
		return err
	}
	var err error
	if o.MSCCLPPBench, err = locate("--mscclpp-bench", o.MSCCLPPBench, mscclppScript, true, o.DryRun); err != nil {
		return err
	}
	flag := "--python"
	if o.CondaEnv != "" {
		flag = "--conda-env"
	}
	if o.Python, err = locate(flag, o.Python, "python3", false, o.DryRun); err != nil {
		return err
	}
	if o.CondaEnv != "" && !o.DryRun {
		if err := checkExecutable("--conda-env", filepath.Join(o.CondaEnv, "bin", "torchrun")); err != nil {
			return usageErr("--conda-env", "%s has no bin/torchrun: install PyTorch there", o.CondaEnv)
		}
	}
	if o.CUPTIInproc || o.KernelOnly {
		findCUPTI(o)
	}
	return nil
}

// Rank is not used: the program starts its ranks itself (Launch).
func (mscclppProgram) Rank(*Options, *environment) []string { return nil }

// Launch is the seed driver's command: torch.distributed.run with one
// process per GPU of this node, the sockets on --iface, MSCCL++'s IB
// devices, and the kernel timing asked for (in-process CUPTI, the
// torch.profiler pass, or none).
func (mscclppProgram) Launch(o *Options, env *environment) []string {
	if o.Iface != "" {
		env.set("NCCL_SOCKET_IFNAME", o.Iface)
		env.set("GLOO_SOCKET_IFNAME", o.Iface)
		env.set("MSCCLPP_SOCKET_IFNAME", o.Iface)
	}
	if o.HCA != "" {
		env.set("MSCCLPP_HCA_DEVICES", o.HCA)
	}
	if o.CondaEnv != "" {
		env.prepend("PATH", filepath.Join(o.CondaEnv, "bin"))
		env.set("CONDA_PREFIX", o.CondaEnv)
	}
	argv := append([]string{o.Python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
		"--nproc_per_node=" + strconv.Itoa(o.RanksPerNode), o.MSCCLPPBench}, mscclppArgs(o)...)
	switch {
	case o.CUPTIInproc || o.KernelOnly:
		if o.CUPTILib != "" {
			env.prepend("LD_LIBRARY_PATH", o.CUPTILib)
		}
		argv = append(argv, "--cupti-inproc")
	case o.TorchProfiler:
	default:
		argv = append(argv, "--no-kernel-timing")
	}
	return argv
}

// mscclppCppProgram is MSCCL++'s C++ benchmark, mscclpp_ep_bench, under
// mpirun.
type mscclppCppProgram struct{}

func (mscclppCppProgram) Prepare(o *Options) error {
	if err := checkMSCCLPP("mscclpp-cpp", o); err != nil {
		return err
	}
	var err error
	if o.MSCCLPPCppBench, err = locate("--mscclpp-cpp-bench", o.MSCCLPPCppBench, mscclppCppExe, false, o.DryRun); err != nil {
		return err
	}
	findCUPTI(o)
	return nil
}

// Rank is the seed driver's command: CUPTI's library first on the library
// path where one was found, the sockets on --iface, MSCCL++'s IB devices,
// and its kernel timing with --kernel-only or --cupti-inproc.
func (mscclppCppProgram) Rank(o *Options, env *environment) []string {
	if o.CUPTILib != "" {
		env.prepend("LD_LIBRARY_PATH", o.CUPTILib)
	}
	if o.HCA != "" {
		env.set("MSCCLPP_HCA_DEVICES", o.HCA)
	}
	if o.Iface != "" {
		env.set("NCCL_SOCKET_IFNAME", o.Iface)
		env.set("MSCCLPP_SOCKET_IFNAME", o.Iface)
	}
	argv := append([]string{o.MSCCLPPCppBench}, mscclppArgs(o)...)
	if o.KernelOnly || o.CUPTIInproc {
		argv = append(argv, "--kernel-timing")
	}
	return argv
}
