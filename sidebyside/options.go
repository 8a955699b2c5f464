package sidebyside

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/mpi"
)

// Problem is what every program runs, in ep_bench's terms.
type Problem struct {
	Algorithm     string `json:"algorithm"`      // ll
	Layout        string `json:"layout"`         // em, rm or fl
	DispatchDtype string `json:"dispatch_dtype"` // bf16 or fp8_e4m3
	Tokens        int    `json:"tokens"`         // per rank
	Hidden        int    `json:"hidden"`
	TopK          int    `json:"top_k"`
	Experts       int    `json:"experts"` // across all ranks
	Warmup        int    `json:"warmup_iters"`
	Iters         int    `json:"bench_iters"`
}

// Options is one "compare --run" command line, checked and with its
// defaults resolved.
type Options struct {
	Libs    []string // program names (--ep-lib), in run order
	Problem Problem

	RanksPerNode int
	Nodes        []string // empty: this node only
	Iface        string   // network interface for MPI's TCP and the programs' sockets
	HPCX         string   // HPC-X install, or "" for none
	MPIRun       string   // the mpirun executable
	MPIRunArgs   []string // appended to the launcher's options

	Epbench     string   // the epbench executable
	EpbenchArgs []string // more epbench flags
	NCCLEPBench string   // NCCL-EP's ep_bench
	NCCLLibPath string   // libnccl.so and libnccl_ep.so for ep_bench

	// The seed driver's pass-through options, for the programs that take
	// them. CombineModeSet and NumBlocks > 0 say they were given.
	CombineMode    string // rank_local_reduce or direct_send
	CombineModeSet bool
	NumBlocks      int // 0: each program's default
	CUPTIInproc    bool
	TorchProfiler  bool
	HCA            string // MSCCL++'s IB devices, comma-separated

	// MSCCL++'s benchmarks: the Python one (run by Python through torchrun)
	// and the C++ one, with the Conda environment it may run in ("" for
	// none) and the CUPTI library folder found for them ("" for none).
	MSCCLPPBench    string
	Python          string
	CondaEnv        string
	MSCCLPPCppBench string
	CUPTILib        string

	KernelOnly bool
	JSONPath   string
	DryRun     bool
}

// Ranks is the world size of every launch.
func (o *Options) Ranks() int {
	return max(1, len(o.Nodes)) * o.RanksPerNode
}

// Env is what "compare --run" needs from the process around it.
type Env struct {
	Stdout, Stderr io.Writer
	// GPUCount reports this node's GPUs, the default ranks per node; nil
	// counts none.
	GPUCount func() int
}

// ErrHelp is returned by Parse for -h or --help.
var ErrHelp = errors.New("help requested")

// IsUsage reports whether err is a usage error (bad flag or value).
func IsUsage(err error) bool {
	var ue *config.UsageError
	return errors.As(err, &ue)
}

func usageErr(flag, format string, a ...any) error {
	return &config.UsageError{Flag: flag, Why: fmt.Sprintf(format, a...)}
}

// Requested reports whether a "compare" command line asks for --run.
func Requested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--run" || strings.HasPrefix(a, "--run=") {
			return true
		}
	}
	return false
}

// Patterns for the free-form values that reach mpirun's command line or a
// hostfile. They are never seen by a shell, but a host name with a space
// or a newline would still change what mpirun reads, so only the characters
// of host names, IPv4/IPv6 addresses and interface names (namePattern) are
// let through, starting with a letter or digit so nothing reads as an
// option.
var (
	namePattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._:-]*$`)
	hcaPattern  = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]*(,[0-9A-Za-z][0-9A-Za-z._-]*)*$`)
)

const (
	maxHostLen  = 253 // DNS name
	maxIfaceLen = 15  // IFNAMSIZ - 1
)

// hpcxPattern is where HPC-X is looked for when --hpcx is auto and
// HPCX_HOME is unset (as the seed driver does).
var hpcxPattern = "/opt/hpcx-*"

// flags holds the raw command line before checks.
type flags struct {
	run                       bool
	epLib                     string
	nodes, iface, hpcx, hca   string
	mpirun, mpirunArgs        string
	epbench, epbenchArgs      string
	ncclEPBench, ncclLib      string
	mscclppBench, python      string
	condaPrefix, condaEnv     string
	mscclppCppBench           string
	combineMode               string
	numBlocks                 int
	cuptiInproc, torchProfile bool
	jsonPath                  string
	kernelOnly, dryRun        bool
	help                      bool
	problem                   config.Config // the problem fields only
	ranksPerNode              int
	ranksPerNodeSetByUser     bool
	combineModeSetByUser      bool
}

// newFlagSet defines the flags of "compare --run": the problem flags are
// epbench's (package config), with their ranges, aliases and messages.
func newFlagSet(f *flags) *pflag.FlagSet {
	fs := config.NewFlagSet("compare --run")
	config.BindSwitch(fs, &f.run, "run", "", "run the benchmarks instead of reading files")
	fs.StringVar(&f.epLib, "ep-lib", "", "`LIBS` to run: "+strings.Join(programNames(), ", ")+
		", both (= epbench,nccl-ep; the seed driver's both is mscclpp,nccl-ep), all (the four), or a comma-separated list")
	config.BindProblem(fs, &f.problem)
	fs.StringVar(&f.combineMode, "combine-mode", "rank_local_reduce", "combine `MODE`: rank_local_reduce or direct_send "+
		"(epbench, mscclpp, mscclpp-cpp; nccl-ep has no such option)")
	config.BindCount(fs, &f.numBlocks, "num-blocks", "", true, math.MaxInt32,
		"thread blocks `N` per dispatch/combine kernel (epbench: default automatic; mscclpp and mscclpp-cpp: default "+
			strconv.Itoa(mscclppBlocks)+", from ranks+2 to "+strconv.Itoa(mscclppBlocks)+"; nccl-ep has no such option)")
	config.BindSwitch(fs, &f.cuptiInproc, "cupti-inproc", "", "MSCCL++'s in-process CUPTI kernel timing (mscclpp: "+
		"--cupti-inproc, mscclpp-cpp: --kernel-timing); epbench and nccl-ep always time kernels so")
	config.BindSwitch(fs, &f.torchProfile, "torch-profiler", "", "mscclpp: the torch.profiler kernel pass "+
		"(otherwise it runs --no-kernel-timing unless --cupti-inproc or --kernel-only)")
	config.BindCount(fs, &f.ranksPerNode, "nproc-per-node", "", true, math.MaxInt32,
		"ranks (GPUs) per node (default: this node's GPU count)")
	fs.StringVar(&f.nodes, "nodes", "", "`HOSTS` to run on, names or IPs separated by spaces, e.g. \"h1 h2\" (default: this node only)")
	fs.StringVar(&f.iface, "iface", "", "network interface `NAME` for MPI's TCP transport and the backends' sockets")
	fs.StringVar(&f.hpcx, "hpcx", "auto", "HPC-X install `DIR`, auto ($HPCX_HOME, else "+hpcxPattern+") or none")
	fs.StringVar(&f.mpirun, "mpirun", "", "mpirun `PATH` (default: HPC-X's, else mpirun from PATH)")
	fs.StringVar(&f.mpirunArgs, "mpirun-args", "", "mpirun options `ARGS` to add, split at white space (e.g. \"--oversubscribe\")")
	fs.StringVar(&f.epbench, "epbench", "", "epbench executable `PATH` (default: this one)")
	fs.StringVar(&f.epbenchArgs, "epbench-args", "", "epbench flags `ARGS` to add, split at white space (e.g. \"--backend cpu\")")
	fs.StringVar(&f.ncclEPBench, "nccl-ep-bench", "", "NCCL-EP ep_bench `PATH` (default: $NCCL_EP_BENCH, else ep_bench in PATH)")
	fs.StringVar(&f.ncclLib, "nccl-lib-path", "", "`DIR` with libnccl.so and libnccl_ep.so, put first on ep_bench's "+
		"LD_LIBRARY_PATH (default: $NCCL_LIB_PATH, else the lib folder of ep_bench's build tree)")
	fs.StringVar(&f.mscclppBench, "mscclpp-bench", "", "MSCCL++'s Python benchmark `PATH` (default: "+mscclppScript+" in PATH)")
	fs.StringVar(&f.python, "python", "", "Python `PATH` that runs it through torchrun (default: python3 in PATH)")
	fs.StringVar(&f.condaPrefix, "conda-prefix", "", "Conda install `DIR`, for --conda-env")
	fs.StringVar(&f.condaEnv, "conda-env", "", "Conda environment `NAME` with PyTorch and MSCCL++: its bin/python "+
		"runs the Python benchmark, its bin first on PATH")
	fs.StringVar(&f.mscclppCppBench, "mscclpp-cpp-bench", "", "MSCCL++'s C++ benchmark `PATH` (default: "+mscclppCppExe+" in PATH)")
	fs.StringVar(&f.hca, "hca", "", "MSCCL++'s IB `DEVICES`, comma-separated (MSCCLPP_HCA_DEVICES)")
	config.BindSwitch(fs, &f.kernelOnly, "kernel-only", "", "lead the table with kernel-only times, then the seed's "+
		"representative rows (the minimum over ranks); MSCCL++'s benchmarks time their kernels as with --cupti-inproc")
	fs.StringVar(&f.jsonPath, "json", "", "also write every backend's parsed result to `FILE` (not with --dry-run)")
	config.BindSwitch(fs, &f.dryRun, "dry-run", "", "print the commands and run nothing")
	config.BindSwitch(fs, &f.help, "help", "h", "print this help and exit")
	return fs
}

// Usage is the help text of "epbench compare --run".
func Usage() string {
	fs := newFlagSet(&flags{})
	var b strings.Builder
	b.WriteString(`usage: epbench compare --run --ep-lib LIBS [flags]

Runs the same low-latency problem on several EP benchmarks, one after the
other (under mpirun; mscclpp through torchrun), streams each one's output
under a banner, then prints one table of their summaries (as "epbench
compare FILE..." does) and, for two, the host D+C ratio. A backend that
fails after printing its summary stays in the table, marked with a *.
Exits 1 if any backend failed or printed no summary, 2 on a bad flag or
value.

Flags:
`)
	b.WriteString(fs.FlagUsagesWrapped(100))
	b.WriteString(`
Programs: epbench runs under mpirun; nccl-ep is NCCL-EP's ep_bench (-a ll -L em ...)
under mpirun; mscclpp is MSCCL++'s Python benchmark (ep_bench_ll.py), run by
Python through torchrun on this node; mscclpp-cpp is its C++ benchmark
(mscclpp_ep_bench) under mpirun. A program not given by its flag is looked up
in PATH; without --dry-run a missing one is an error before anything starts.
With --cupti-inproc or --kernel-only the Python benchmark loads
build/libcupti_kernel_timer.so beside it (build it from cupti_kernel_timer.cpp
first); CUPTI's library folder, where one is found under $CUDA_HOME, is put on
the MSCCL++ programs' LD_LIBRARY_PATH.

Environment: NCCL_EP_BENCH and NCCL_LIB_PATH stand in for --nccl-ep-bench and
--nccl-lib-path; HPCX_HOME names HPC-X for --hpcx auto; CUDA_HOME is where
CUPTI is looked for (default /usr/local/cuda); every launch sets
NCCL_NVLS_ENABLE=0.
`)
	return b.String()
}

// Parse reads a "compare --run" command line (with or without --run) and
// resolves its defaults from env and the process environment. Errors are
// *config.UsageError, or ErrHelp.
func Parse(args []string, env Env) (*Options, error) {
	var f flags
	fs := newFlagSet(&f)
	for _, a := range args {
		if a == "--" {
			break
		}
		// pflag skips "go test" style flags without a word.
		if strings.HasPrefix(a, "-test.") {
			name, _, _ := strings.Cut(a, "=")
			return nil, usageErr(name, "unknown flag")
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, config.FromPflag(err)
	}
	if f.help {
		return nil, ErrHelp
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, usageErr(strconv.Quote(rest[0]), "unexpected argument: --run takes no summary files")
	}
	if fs.Changed("run") && !f.run {
		return nil, usageErr("--run", "must be true here; leave it out to compare files")
	}
	f.ranksPerNodeSetByUser = fs.Changed("nproc-per-node")
	f.combineModeSetByUser = fs.Changed("combine-mode")
	return f.resolve(env)
}

// resolve checks the flags and fills in the defaults.
func (f *flags) resolve(env Env) (*Options, error) {
	if mpi.UnderLauncher() {
		return nil, usageErr("compare --run", "starts mpirun itself; run it directly, not under mpirun")
	}
	o := &Options{Problem: problemOf(&f.problem), KernelOnly: f.kernelOnly, JSONPath: f.jsonPath, DryRun: f.dryRun,
		CombineMode: f.combineMode, CombineModeSet: f.combineModeSetByUser, NumBlocks: f.numBlocks,
		CUPTIInproc: f.cuptiInproc, TorchProfiler: f.torchProfile}
	if _, err := config.ParseCombineMode(f.combineMode); err != nil {
		return nil, usageErr("--combine-mode", "%v", err)
	}
	var err error
	if o.Libs, err = parseLibs(f.epLib); err != nil {
		return nil, err
	}
	if o.Nodes, err = parseNodes(f.nodes); err != nil {
		return nil, err
	}
	if f.iface != "" && (len(f.iface) > maxIfaceLen || !namePattern.MatchString(f.iface)) {
		return nil, usageErr("--iface", "%q is not a network interface name", f.iface)
	}
	o.Iface = f.iface
	if f.hca != "" && !hcaPattern.MatchString(f.hca) {
		return nil, usageErr("--hca", "%q is not a comma-separated list of device names", f.hca)
	}
	o.HCA = f.hca

	o.RanksPerNode = f.ranksPerNode
	if !f.ranksPerNodeSetByUser {
		if env.GPUCount != nil {
			o.RanksPerNode = env.GPUCount()
		}
		if o.RanksPerNode < 1 {
			return nil, usageErr("--nproc-per-node", "no GPU found on this node; give the ranks per node")
		}
	}
	if o.Ranks() > math.MaxInt32 {
		return nil, usageErr("--nproc-per-node", "%d ranks on each of %d nodes are too many", o.RanksPerNode, len(o.Nodes))
	}
	if err := f.problem.CheckProblem(o.Ranks()); err != nil {
		return nil, err
	}

	if o.HPCX, err = resolveHPCX(f.hpcx); err != nil {
		return nil, err
	}
	o.MPIRun = f.mpirun
	if o.MPIRun == "" {
		o.MPIRun = "mpirun"
		if o.HPCX != "" {
			o.MPIRun = filepath.Join(o.HPCX, "ompi", "bin", "mpirun")
		}
	}
	o.MPIRunArgs = strings.Fields(f.mpirunArgs)
	if err := checkWords("--mpirun-args", o.MPIRunArgs); err != nil {
		return nil, err
	}
	o.EpbenchArgs = strings.Fields(f.epbenchArgs)
	if err := checkWords("--epbench-args", o.EpbenchArgs); err != nil {
		return nil, err
	}

	o.Epbench = f.epbench
	if o.Epbench == "" && o.uses("epbench") {
		if o.Epbench, err = os.Executable(); err != nil {
			return nil, usageErr("--epbench", "cannot find this executable (%v); give its path", err)
		}
	}
	o.NCCLEPBench = firstSet(f.ncclEPBench, os.Getenv("NCCL_EP_BENCH"))
	o.NCCLLibPath = firstSet(f.ncclLib, os.Getenv("NCCL_LIB_PATH"))
	if o.NCCLLibPath != "" && strings.ContainsAny(o.NCCLLibPath, ":\n") {
		return nil, usageErr("--nccl-lib-path", "must be one directory, got %q", o.NCCLLibPath)
	}
	o.MSCCLPPBench, o.MSCCLPPCppBench = f.mscclppBench, f.mscclppCppBench
	if o.Python, o.CondaEnv, err = resolveConda(f.python, f.condaPrefix, f.condaEnv); err != nil {
		return nil, err
	}
	if err := o.checkPassThrough(); err != nil {
		return nil, err
	}

	for _, name := range o.Libs {
		if err := programs[name].Prepare(o); err != nil {
			return nil, err
		}
	}
	if !o.DryRun && o.mpirunLaunches() {
		if err := checkExecutable("--mpirun", o.MPIRun); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// checkPassThrough refuses the seed driver's options that no program run
// here takes, or that one of them cannot take.
func (o *Options) checkPassThrough() error {
	takes := func(names ...string) bool {
		for _, n := range names {
			if o.uses(n) {
				return true
			}
		}
		return false
	}
	if o.uses("nccl-ep") {
		switch {
		case o.CombineModeSet:
			return usageErr("--combine-mode", "cannot be given to nccl-ep: its ep_bench has no such option")
		case o.NumBlocks > 0:
			return usageErr("--num-blocks", "cannot be given to nccl-ep: its ep_bench has no such option")
		}
	}
	switch {
	case o.CUPTIInproc && !takes("mscclpp", "mscclpp-cpp"):
		return usageErr("--cupti-inproc", "only mscclpp and mscclpp-cpp take it (epbench and nccl-ep always time kernels in process)")
	case o.TorchProfiler && !o.uses("mscclpp"):
		return usageErr("--torch-profiler", "only mscclpp takes it")
	case o.HCA != "" && !takes("mscclpp", "mscclpp-cpp"):
		return usageErr("--hca", "only mscclpp and mscclpp-cpp take it")
	}
	return nil
}

// mpirunLaunches reports whether some program runs under mpirun.
func (o *Options) mpirunLaunches() bool {
	for _, l := range o.Libs {
		if _, own := programs[l].(standalone); !own {
			return true
		}
	}
	return false
}

// resolveConda picks the Python of the MSCCL++ benchmark: --python ("" for
// the default), or the bin/python of a Conda environment (the base one is
// the install itself); the environment's folder is returned too, "" for
// none.
func resolveConda(python, prefix, env string) (string, string, error) {
	switch {
	case env == "" && prefix != "":
		return "", "", usageErr("--conda-prefix", "needs --conda-env")
	case env == "":
		return python, "", nil
	case prefix == "":
		return "", "", usageErr("--conda-env", "needs --conda-prefix (the Conda install)")
	case python != "":
		return "", "", usageErr("--python", "cannot be given with --conda-env, whose bin/python runs the benchmark")
	case strings.ContainsAny(env, "/\x00") || env == "." || env == "..":
		return "", "", usageErr("--conda-env", "%q is not an environment name", env)
	}
	dir := filepath.Join(prefix, "envs", env)
	if env == "base" {
		dir = prefix
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Join(dir, "bin", "python"), dir, nil
}

func (o *Options) uses(lib string) bool {
	for _, l := range o.Libs {
		if l == lib {
			return true
		}
	}
	return false
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// libGroups are the names that stand for several programs: both is
// epbench and nccl-ep (the seed driver's both is mscclpp and nccl-ep, which
// "mscclpp,nccl-ep" runs), all is every program.
var libGroups = map[string][]string{
	"both": {"epbench", "nccl-ep"},
	"all":  {"epbench", "nccl-ep", "mscclpp", "mscclpp-cpp"},
}

// parseLibs reads --ep-lib: names, both or all, comma-separated, no repeats.
func parseLibs(s string) ([]string, error) {
	if s == "" {
		return nil, usageErr("--ep-lib", "required: %s, both, all, or a comma-separated list", strings.Join(programNames(), ", "))
	}
	var libs []string
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		names := []string{part}
		if g, ok := libGroups[part]; ok {
			names = g
		}
		for _, n := range names {
			if _, ok := programs[n]; !ok {
				return nil, usageErr("--ep-lib", "unknown library %q (want %s, both or all)", part, strings.Join(programNames(), ", "))
			}
			if seen[n] {
				return nil, usageErr("--ep-lib", "%s is listed twice", n)
			}
			seen[n] = true
			libs = append(libs, n)
		}
	}
	return libs, nil
}

// parseNodes reads --nodes: host names separated by spaces.
func parseNodes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		if s != "" {
			return nil, usageErr("--nodes", "names no host")
		}
		return nil, nil
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && (r < '!' || r > '~') }) {
		return nil, usageErr("--nodes", "must be host names or IPs separated by spaces, got %q", s)
	}
	hosts := strings.Fields(s)
	seen := map[string]bool{}
	for _, h := range hosts {
		if len(h) > maxHostLen || !namePattern.MatchString(h) {
			return nil, usageErr("--nodes", "%q is not a host name or IP", h)
		}
		if seen[h] {
			return nil, usageErr("--nodes", "%s is listed twice", h)
		}
		seen[h] = true
	}
	return hosts, nil
}

// problemOf is the problem c describes, in ep_bench's spelling.
func problemOf(c *config.Config) Problem {
	return Problem{
		Algorithm:     c.Algorithm.Flag(),
		Layout:        c.Layout.Flag(),
		DispatchDtype: c.DispatchDtype.Flag(),
		Tokens:        c.Tokens,
		Hidden:        c.Hidden,
		TopK:          c.TopK,
		Experts:       c.Experts,
		Warmup:        c.Warmup,
		Iters:         c.Iters,
	}
}

// checkWords refuses control characters in pass-through arguments, which
// only a mistake puts there.
func checkWords(flag string, words []string) error {
	for _, w := range words {
		if strings.ContainsFunc(w, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return usageErr(flag, "%q holds a control character", w)
		}
	}
	return nil
}

// resolveHPCX finds HPC-X: a directory, "none", or "auto": $HPCX_HOME, else
// the first /opt/hpcx-* in name order that holds ompi/bin/mpirun.
func resolveHPCX(s string) (string, error) {
	switch s {
	case "none":
		return "", nil
	case "auto":
		if home := os.Getenv("HPCX_HOME"); home != "" {
			if !isHPCX(home) {
				return "", usageErr("--hpcx", "HPCX_HOME=%s holds no ompi/bin/mpirun; give --hpcx DIR or none", home)
			}
			return filepath.Clean(home), nil
		}
		dirs, _ := filepath.Glob(hpcxPattern)
		sort.Strings(dirs)
		for _, d := range dirs {
			if isHPCX(d) {
				return d, nil
			}
		}
		return "", nil
	case "":
		return "", usageErr("--hpcx", "must name a directory, auto or none")
	}
	if !isHPCX(s) {
		return "", usageErr("--hpcx", "%s holds no ompi/bin/mpirun", s)
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", usageErr("--hpcx", "%v", err)
	}
	return abs, nil
}

func isHPCX(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "ompi", "bin", "mpirun"))
	return err == nil && st.Mode().IsRegular()
}

// checkExecutable refuses a program that cannot be started, before anything
// runs: a path must be an executable file, a bare name must be in PATH.
func checkExecutable(flag, path string) error {
	if path == "" {
		return usageErr(flag, "must name an executable")
	}
	if !strings.Contains(path, "/") {
		if _, err := lookPath(path); err != nil {
			return usageErr(flag, "%s is not in PATH", path)
		}
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return usageErr(flag, "%v", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return usageErr(flag, "%s is not an executable file", path)
	}
	return nil
}
