package sidebyside

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/epbench/epbench/config"
)

// Program is one EP benchmark program "compare --run" can launch. Adding
// one is a type with these two methods and an entry in programs.
type Program interface {
	// Prepare refuses a problem or options the benchmark cannot run and
	// fills in its own defaults in o. It runs before anything is launched.
	Prepare(o *Options) error
	// Rank returns the argv every rank runs. Variables it sets in env are
	// set for mpirun and forwarded to every rank.
	Rank(o *Options, env *environment) []string
}

// standalone is a Program that starts its ranks itself instead of under
// mpirun: Launch returns the whole command, and the variables it sets in
// env are set for it.
type standalone interface {
	Launch(o *Options, env *environment) []string
}

// programs are the benchmarks by their --ep-lib name.
var programs = map[string]Program{
	"epbench":     epbenchProgram{},
	"nccl-ep":     ncclEPProgram{},
	"mscclpp":     mscclppProgram{},
	"mscclpp-cpp": mscclppCppProgram{},
}

func programNames() []string {
	names := make([]string, 0, len(programs))
	for n := range programs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// problemArgs are the shared problem flags in ep_bench's spelling, which
// both benchmarks read.
func problemArgs(p *Problem) []string {
	return append([]string{"-a", p.Algorithm, "-L", p.Layout}, sizeArgs(p)...)
}

// sizeArgs are the problem's sizes and iteration counts in ep_bench's
// spelling, which every benchmark reads.
func sizeArgs(p *Problem) []string {
	return []string{
		"-t", strconv.Itoa(p.Tokens),
		"-d", strconv.Itoa(p.Hidden),
		"-k", strconv.Itoa(p.TopK),
		"-e", strconv.Itoa(p.Experts),
		"-w", strconv.Itoa(p.Warmup),
		"-i", strconv.Itoa(p.Iters),
	}
}

// absProgram makes a program path absolute so every node finds the same
// file whatever its working directory; a bare name stays a PATH lookup.
func absProgram(path string) string {
	if filepath.Base(path) == path {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// locate resolves a program given by flag (path, "" for the default name
// def): a path is made absolute, a name is looked up in PATH (for a script,
// script set, any readable file; else an executable). Without dryRun the
// program must be there; with it, a name not found stays the name, to be
// printed.
func locate(flag, path, def string, script, dryRun bool) (string, error) {
	name := firstSet(path, def)
	if strings.Contains(name, "/") {
		name = absProgram(name)
		if dryRun {
			return name, nil
		}
		if script {
			return name, checkFile(flag, name)
		}
		return name, checkExecutable(flag, name)
	}
	found, err := lookPath(name)
	if script {
		found, err = lookFile(name)
	}
	switch {
	case err == nil:
		return found, nil
	case dryRun:
		return name, nil
	case path == "":
		return "", usageErr(flag, "not given, and %s is not in PATH", name)
	}
	return "", usageErr(flag, "%s is not in PATH", name)
}

// lookFile finds a regular file named name in PATH, as a shell finds a
// command but without needing it to be executable.
func lookFile(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return filepath.Abs(p)
		}
	}
	return "", os.ErrNotExist
}

// checkFile refuses a path that is not a regular file.
func checkFile(flag, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return usageErr(flag, "%v", err)
	}
	if !st.Mode().IsRegular() {
		return usageErr(flag, "%s is not a file", path)
	}
	return nil
}

// epbenchProgram is epbench itself.
type epbenchProgram struct{}

func (epbenchProgram) args(o *Options, extra bool) []string {
	args := append(problemArgs(&o.Problem), "--dispatch-dtype", o.Problem.DispatchDtype, "--combine-mode", o.CombineMode)
	if o.NumBlocks > 0 {
		args = append(args, "--num-blocks", strconv.Itoa(o.NumBlocks))
	}
	if extra {
		args = append(args, o.EpbenchArgs...)
	}
	return args
}

// Prepare runs epbench's own flag checks on the command each rank will get,
// so a problem epbench refuses is reported before any launch.
func (p epbenchProgram) Prepare(o *Options) error {
	shared, err := config.Parse(p.args(o, false), nil)
	if err == nil {
		err = shared.CheckRanks(o.Ranks())
	}
	if err != nil {
		return usageErr("--ep-lib=epbench", "cannot run this problem: %v", err)
	}
	full, err := config.Parse(p.args(o, true), nil)
	switch {
	case errors.Is(err, config.ErrHelp):
		return usageErr("--epbench-args", "--help is not a benchmark flag")
	case err != nil:
		return usageErr("--epbench-args", "%v", err)
	case full.ShowVersion:
		return usageErr("--epbench-args", "--version is not a benchmark flag")
	}
	if err := full.CheckRanks(o.Ranks()); err != nil {
		return usageErr("--epbench-args", "%v", err)
	}
	for _, f := range []struct {
		name      string
		same      bool
		sharedSet string
	}{
		{"--algorithm", full.Algorithm == shared.Algorithm, "-a"},
		{"--layout", full.Layout == shared.Layout, "-L"},
		{"--num-tokens", full.Tokens == shared.Tokens, "-t"},
		{"--hidden", full.Hidden == shared.Hidden, "-d"},
		{"--num-topk", full.TopK == shared.TopK, "-k"},
		{"--num-experts", full.Experts == shared.Experts, "-e"},
		{"--num-warmup", full.Warmup == shared.Warmup, "-w"},
		{"--num-iters", full.Iters == shared.Iters, "-i"},
		{"--dispatch-dtype", full.DispatchDtype == shared.DispatchDtype, "--dispatch-dtype"},
		{"--combine-mode", full.CombineMode == shared.CombineMode, "--combine-mode"},
		{"--num-blocks", o.NumBlocks == 0 || full.NumBlocks == shared.NumBlocks, "--num-blocks"},
	} {
		if !f.same {
			return usageErr("--epbench-args", "changes %s, which every backend shares; give %s to compare --run instead", f.name, f.sharedSet)
		}
	}
	o.Epbench = absProgram(o.Epbench)
	if !o.DryRun {
		return checkExecutable("--epbench", o.Epbench)
	}
	return nil
}

func (p epbenchProgram) Rank(o *Options, _ *environment) []string {
	return append([]string{o.Epbench}, p.args(o, true)...)
}

// ncclEPProgram is NVIDIA NCCL-EP's ep_bench (contrib/nccl_ep), which links
// libnccl.so and libnccl_ep.so dynamically.
type ncclEPProgram struct{}

func (ncclEPProgram) Prepare(o *Options) error {
	if o.Problem.DispatchDtype != "bf16" {
		return usageErr("--dispatch-dtype", "%s cannot be compared with nccl-ep: its ep_bench command runs BF16 dispatch", o.Problem.DispatchDtype)
	}
	var err error
	if o.NCCLEPBench, err = locate("--nccl-ep-bench", o.NCCLEPBench, "ep_bench", false, o.DryRun); err != nil {
		return err
	}
	switch {
	case o.NCCLLibPath != "":
		if abs, err := filepath.Abs(o.NCCLLibPath); err == nil {
			o.NCCLLibPath = abs
		}
	case strings.Contains(o.NCCLEPBench, "/"):
		// <build>/test/nccl_ep/ep_bench -> <build>/lib
		o.NCCLLibPath = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(o.NCCLEPBench))), "lib")
	}
	return nil
}

// Rank sets the environment of the seed driver's NCCL-EP launch: its NCCL
// first on the library path, sockets instead of IB and net plugins, and
// multi-node NVLink only across nodes.
func (ncclEPProgram) Rank(o *Options, env *environment) []string {
	if o.NCCLLibPath != "" {
		env.prepend("LD_LIBRARY_PATH", o.NCCLLibPath)
	}
	cudaHome, ok := env.get("CUDA_HOME")
	if !ok || cudaHome == "" {
		cudaHome = "/usr/local/cuda"
	}
	env.set("CUDA_HOME", cudaHome)
	if o.Iface != "" {
		env.set("UCX_NET_DEVICES", o.Iface)
		env.set("NCCL_SOCKET_IFNAME", o.Iface)
	}
	env.set("UCX_TLS", "tcp,sm,self,cuda_copy")
	env.set("UCX_HANDLE_ERRORS", "none")
	env.set("NCCL_NET_PLUGIN", "none")
	env.set("NCCL_IB_DISABLE", "1")
	mnnvl := "0"
	if len(o.Nodes) > 1 {
		mnnvl = "1"
	}
	env.set("NCCL_MNNVL_ENABLE", mnnvl)
	return append([]string{o.NCCLEPBench}, problemArgs(&o.Problem)...)
}
