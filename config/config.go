package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/epbench/epbench/routing"
)

// Limits enforced by Parse and Check.
const (
	// MaxTokens bounds tokens per rank. Each local expert receives up to
	// ranks*tokens tokens, so at 4096 tokens, 8 ranks and hidden 7168 one
	// local expert's BF16 receive buffer is already 470 MB; low-latency
	// decoding batches are far smaller.
	MaxTokens = 4096
	// MaxHidden is the largest hidden size the low-latency kernels support.
	MaxHidden = 16384
	// HiddenAlign: hidden must be a whole number of 128-channel blocks,
	// the unit of vectorised copies and of FP8 scales.
	HiddenAlign = 128
	// MinHidden: every token row carries its token index in the last 128
	// channels and the sender's rank in the others (they are the rows
	// validation checks, and the backends send them in every run), so a row
	// needs at least two blocks: the narrowest multiple of HiddenAlign that
	// holds routing.MinValidationHidden channels.
	MinHidden = (routing.MinValidationHidden + HiddenAlign - 1) / HiddenAlign * HiddenAlign
	// MaxTopK is the most experts one token may select.
	MaxTopK = 32
	// MaxExperts bounds the global expert count, well above any published
	// model, so per-expert arrays stay small.
	MaxExperts = 4096
	// MaxIters bounds warm-up and timed iterations and --reroute: four
	// CUDA events per timed iteration are created up front.
	MaxIters = 1000000
	// MaxRanks: validation encodes (rank-128) in BF16, which holds
	// integers exactly only up to 256 in magnitude.
	MaxRanks = 256
	// MaxJitterUs bounds --jitter-us: one second.
	MaxJitterUs = 1000000
)

// Config is one benchmark run. Parse fills it from the command line and
// the environment; Default gives ep_bench's defaults.
type Config struct {
	Algorithm Algorithm
	Layout    Layout

	Tokens  int // tokens per rank (ep_bench's max_dispatch_tokens_per_rank)
	Hidden  int // channels per token
	TopK    int // experts selected per token
	Experts int // experts across all ranks
	Warmup  int // paired dispatch+combine iterations before timing
	Iters   int // timed paired iterations; the first is dropped when Iters > 1

	DispatchDtype DispatchDtype
	CombineMode   CombineMode
	Protocol      Protocol // GPU: how peers learn that data is in place
	NumBlocks     int      // dispatch/combine grid size; 0 = chosen by the backend
	MaxNumSMs     int      // -S: a cap on the automatic grid; 0 = none
	CUDAGraph     bool     // GPU: launch each operation as a CUDA graph captured once
	Transport     Transport
	// DisableNVLink (-n): ep_bench's every peer through NCCL's GIN, none
	// by load/store.
	DisableNVLink bool

	// DispatchTokens (-l) is the tokens every rank dispatches, buffers
	// sized for Tokens; 0 = Tokens.
	DispatchTokens int
	// NonUniform (-N): each rank dispatches its own count (RankTokens).
	NonUniform   bool
	DispatchOnly bool // -D: validate dispatch alone
	Profile      bool // -p: an extra loop in NVTX ranges, inside the profiler range
	MaskTest     bool // -T: elastic EP's active-mask test

	BackToBack bool // timed pairs follow each other with no host sync or barrier between them
	JitterUs   int  // testing: every operation starts after a random delay of 0..JitterUs us

	KernelTiming bool // measure kernel-only times with in-process CUPTI
	CUPTIRegion  bool // bracket only the timed loop with cuProfilerStart/Stop

	Validate      bool   // check dispatch and combine results after timing
	ValidateEvery int    // also check every N timed iterations; 0 = never
	Seed          uint32 // routing seed; rank r draws from Seed+r
	Reroute       int    // distinct routing draws cycled through; 1 = fixed routing
	TimeoutMs     int    // how long a spin-wait or barrier waits for a peer
	Fault         Fault  // injected fault (--fault), for testing peer-failure handling

	JSONPath    string  // write the result as JSON here as well
	Compute     Compute // --backend: ComputeAuto, ComputeCUDA or ComputeCPU
	PTXDir      string  // development: load kernels from here instead of the embedded PTX
	ShowVersion bool    // print the version and exit
}

// configInt ties an integer flag to its Config field.
type configInt struct {
	intFlag
	field func(*Config) *int
}

var configInts = []configInt{
	{intFlag{name: "num-tokens", short: "t", alias: "tokens", env: "EPBENCH_TOKENS",
		def: 128, lo: 1, hi: MaxTokens, usage: "tokens per rank"},
		func(c *Config) *int { return &c.Tokens }},
	{intFlag{name: "hidden", short: "d", env: "EPBENCH_HIDDEN",
		def: 7168, lo: 1, hi: MaxHidden, multiple: HiddenAlign, usage: "hidden size, a multiple of 128 (epbench runs from 256)"},
		func(c *Config) *int { return &c.Hidden }},
	{intFlag{name: "num-topk", short: "k", alias: "top-k", env: "EPBENCH_TOPK",
		def: 8, lo: 1, hi: MaxTopK, usage: "experts selected per token"},
		func(c *Config) *int { return &c.TopK }},
	{intFlag{name: "num-experts", short: "e", alias: "experts", env: "EPBENCH_EXPERTS",
		def: 256, lo: 1, hi: MaxExperts, usage: "experts across all ranks, divisible by the rank count"},
		func(c *Config) *int { return &c.Experts }},
	{intFlag{name: "num-warmup", short: "w", alias: "warmup", env: "EPBENCH_WARMUP",
		def: 10, lo: 0, hi: MaxIters, usage: "untimed paired iterations"},
		func(c *Config) *int { return &c.Warmup }},
	{intFlag{name: "num-iters", short: "i", alias: "iters", env: "EPBENCH_ITERS",
		def: 50, lo: 1, hi: MaxIters, usage: "timed paired iterations"},
		func(c *Config) *int { return &c.Iters }},
	{intFlag{name: "num-blocks", def: 0, lo: 0, hi: maxCount,
		usage: "thread blocks per dispatch/combine kernel; 0 = automatic (one per SM; 16 per token for an inline operation)"},
		func(c *Config) *int { return &c.NumBlocks }},
	{intFlag{name: "validate-every", def: 0, lo: 0, hi: maxCount,
		usage: "also validate every `N` timed iterations; 0 = never"},
		func(c *Config) *int { return &c.ValidateEvery }},
	{intFlag{name: "reroute", def: 1, lo: 1, hi: MaxIters,
		usage: "distinct routing draws cycled through the iterations"},
		func(c *Config) *int { return &c.Reroute }},
	{intFlag{name: "timeout-ms", def: 5000, lo: 1, hi: maxCount,
		usage: "milliseconds to wait for a peer before giving up"},
		func(c *Config) *int { return &c.TimeoutMs }},
	{intFlag{name: "max-num-sms", short: "S", def: 0, lo: 0, hi: maxCount,
		usage: "a cap on the blocks the kernels use; 0 = auto (--num-blocks, the exact grid, wins)"},
		func(c *Config) *int { return &c.MaxNumSMs }},
	{intFlag{name: "dispatch-less-than-max-tokens", short: "l", def: 0, lo: 0, hi: MaxTokens, zeroUnset: true,
		usage: "every rank dispatches `M` tokens (1..--num-tokens), buffers sized for --num-tokens"},
		func(c *Config) *int { return &c.DispatchTokens }},
	{intFlag{name: "jitter-us", def: 0, lo: 0, hi: MaxJitterUs,
		usage: "testing: every dispatch and combine starts after a random delay of 0..`N` us (on the GPU, in the kernel), drawn per rank and call"},
		func(c *Config) *int { return &c.JitterUs }},
}

// configIntNamed is the integer flag of that name; every caller names one
// of configInts.
func configIntNamed(name string) configInt {
	for _, f := range configInts {
		if f.name == name {
			return f
		}
	}
	panic("config: no integer flag " + name)
}

// Default returns ep_bench's low-latency defaults.
func Default() *Config {
	c := &Config{
		Algorithm:     LowLatency,
		Layout:        ExpertMajor,
		DispatchDtype: DtypeBF16,
		CombineMode:   RankLocalReduce,
		KernelTiming:  true,
		Seed:          1,
	}
	for _, f := range configInts {
		*f.field(c) = f.def
	}
	return c
}

// bindConfig defines the benchmark's flags on fs, writing into c. The
// integer flags named in lists take a comma-separated list instead (a
// sweep's), each value checked as the flag checks one.
func bindConfig(fs *pflag.FlagSet, c *Config, help *bool, lists map[string]*[]int) {
	bindInts := func(names ...string) {
		for _, name := range names {
			f := configIntNamed(name)
			if l, ok := lists[name]; ok {
				f.bindList(fs, f.field(c), l)
			} else {
				f.bind(fs, f.field(c))
			}
		}
	}
	bindChoice(fs, "algorithm", "a", "algorithm `MODE`: ll (or low-latency); high-throughput is not supported",
		func() string { return c.Algorithm.flagValue() },
		func(s string) (err error) { c.Algorithm, err = parseAlgorithm(s); return err })
	bindChoice(fs, "layout", "L", "receive `LAYOUT`: em (expert-major) or rm (rank-major)",
		func() string { return c.Layout.flagValue() },
		func(s string) (err error) { c.Layout, err = parseLayout(s); return err })
	bindInts("num-tokens", "hidden", "num-topk", "num-experts", "num-warmup", "num-iters")
	bindChoice(fs, "dispatch-dtype", "", "dispatch payload `DTYPE`: bf16 or fp8_e4m3",
		func() string { return c.DispatchDtype.flagValue() },
		func(s string) (err error) { c.DispatchDtype, err = parseDispatchDtype(s); return err })
	bindChoice(fs, "combine-mode", "", "combine `MODE`: rank_local_reduce or direct_send",
		func() string { return c.CombineMode.String() },
		func(s string) (err error) { c.CombineMode, err = ParseCombineMode(s); return err })
	bindChoice(fs, "protocol", "", "GPU signalling `PROTO`: inline (data carries a flag; up to 15 tokens per rank), fenced (one fence and release per operation), lines (128-byte lines that carry a flag: dispatch rows, combine's partials in rank_local_reduce and expert rows in direct_send), or auto (inline up to 32 KiB of token rows per rank; above, on one GPU or over NVLink between GPUs of compute capability 9.0, lines for a BF16 dispatch and for either combine mode, else fenced)",
		func() string { return c.Protocol.String() },
		func(s string) (err error) { c.Protocol, err = parseProtocol(s); return err })
	bindInts("num-blocks", "max-num-sms", "dispatch-less-than-max-tokens")
	bindChoice(fs, "transport", "", "how ranks reach each other's GPU memory, `TRANSPORT`: ipc (CUDA IPC, one node), nccl (NCCL 2.30+ symmetric windows, found through NCCL_HOME or LD_LIBRARY_PATH; docs/MULTINODE.md) or auto (ipc when every rank is on one node and -n is not given, else nccl)",
		func() string { return c.Transport.String() },
		func(s string) (err error) { c.Transport, err = parseTransport(s); return err })
	bindBool(fs, &c.DisableNVLink, "disable-nvlink", "n", false,
		"every peer through NCCL's GIN (GPU-initiated networking) instead of NVLink, as ep_bench's -n: the NCCL transport and the GIN build of the fenced kernels (docs/MULTINODE.md)")
	bindBool(fs, &c.NonUniform, "non-uniform-tokens", "N", false,
		"each rank dispatches its own count of tokens, drawn as ep_bench draws them in [0, --num-tokens] (rank 0 all, the last rank none)")
	bindBool(fs, &c.DispatchOnly, "dispatch-only", "D", false, "with -V: validate the dispatch alone (the timed loop still runs both)")
	bindBool(fs, &c.Profile, "profile", "p", false,
		"an extra loop after the timed one in NVTX ranges (ep_bench's names), inside cuProfilerStart/Stop")
	bindBool(fs, &c.MaskTest, "mask-test", "T", false,
		"elastic EP's active-mask test (at least 4 ranks; implies -V): rank 1 skips a dispatch, ranks 1 and 3 a combine; the masks and the others' combine outputs are checked")
	bindBool(fs, &c.CUDAGraph, "cuda-graph", "", false,
		"launch dispatch and combine as CUDA graphs, each captured once (the kernels keep the call count on the device)")
	bindBool(fs, &c.BackToBack, "back-to-back", "", false,
		"time pairs that follow each other on the stream with no host sync or MPI barrier between them, as a model's decode loop calls them")
	bindInts("jitter-us")
	bindBool(fs, &c.KernelTiming, "no-kernel-timing", "", true, "skip the kernel-only (CUPTI) measurement")
	bindBool(fs, &c.CUPTIRegion, "cupti-region", "", false,
		"bracket only the timed loop with cuProfilerStart/Stop, for nsys --capture-range=cudaProfilerApi")
	// --cupti-inproc names the only kernel timer there is; it is accepted
	// for command lines written for the Python benchmark.
	v := &value{
		kind: "bool",
		get:  func() string { return "true" },
		set: func(s string) error {
			b, err := parseBool(s)
			if err != nil {
				return err
			}
			if !b {
				return fmt.Errorf("in-process CUPTI is the only kernel timer; use --no-kernel-timing to turn it off")
			}
			return nil
		},
	}
	fs.VarPF(v, "cupti-inproc", "", "time kernels with the in-process CUPTI collector (always on)").NoOptDefVal = "true"
	bindBool(fs, &c.Validate, "validate", "V", false, "check dispatch and combine results after timing")
	bindInts("validate-every")
	bindSeed(fs, &c.Seed, "routing seed; rank r draws from seed+r (decimal or 0x hex)")
	bindInts("reroute", "timeout-ms")
	bindPath(fs, &c.JSONPath, "json", "file", "also write the result as JSON to `FILE`")
	bindChoice(fs, "backend", "", "compute `BACKEND`: cuda, cpu or auto (default auto: cuda when a GPU is usable)",
		func() string { return string(c.Compute) },
		func(s string) (err error) { c.Compute, err = parseCompute(s); return err })
	bindPath(fs, &c.PTXDir, "ptx-dir", "directory", "development: load kernel PTX from `DIR`")
	fs.VarP(&value{
		kind: "fault",
		get:  func() string { return c.Fault.String() },
		set: func(s string) error {
			if c.Fault.Op != "" {
				return fmt.Errorf("given more than once (one fault per run)")
			}
			f, err := parseFault(s)
			c.Fault = f
			return err
		},
	}, "fault", "", "testing: `skip-dispatch=RANK` or skip-combine=RANK: that rank skips the operation, "+
		"the others must report it within --timeout-ms (exit 4)")
	bindBool(fs, help, "help", "h", false, "print this help and exit")
	bindBool(fs, &c.ShowVersion, "version", "", false, "print the version and exit")
}

// Parse reads the benchmark's flags from args (without the program name)
// and fills the problem size from EPBENCH_* variables, looked up with
// getenv, for any size flag that args does not set; getenv may be nil.
//
// With -h/--help it returns ErrHelp. With --version it returns a Config
// with ShowVersion set and skips the environment and all cross-flag
// checks. Every other error is a *UsageError.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	c, _, err := parse(args, getenv, nil, nil)
	return c, err
}

// parse is Parse with the list-valued flags of a sweep (bindConfig) and
// more flags bound by extra; it also returns where each value came from.
func parse(args []string, getenv func(string) string, lists map[string]*[]int, extra func(*pflag.FlagSet)) (*Config, map[string]string, error) {
	c := Default()
	var help bool
	fs := newFlagSet("epbench")
	bindConfig(fs, c, &help, lists)
	if extra != nil {
		extra(fs)
	}
	if err := rejectTestFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, fromPflag(err)
	}
	if help {
		return nil, nil, ErrHelp
	}
	if c.ShowVersion {
		return c, nil, nil
	}
	if c.MaskTest {
		c.Validate = true // -T implies -V
	}
	for _, f := range configInts {
		if f.zeroUnset && fs.Changed(f.name) && *f.field(c) == 0 {
			return nil, nil, usageErr("--"+f.name, "must be at least 1, got 0 (leave the flag out for its default)")
		}
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, nil, usageErr(strconv.Quote(rest[0]), "unexpected positional argument")
	}
	source := map[string]string{}
	if getenv != nil {
		for _, f := range configInts {
			if f.env == "" || fs.Changed(f.name) {
				continue
			}
			raw, name := envValue(getenv, f.env)
			if raw == "" {
				continue
			}
			n, err := f.parse(raw)
			if err != nil {
				return nil, nil, usageErr(name, err.Error())
			}
			*f.field(c) = n
			source[f.name] = name
		}
	}
	if err := c.check(source); err != nil {
		return nil, nil, err
	}
	return c, source, nil
}

// SeedEnvPrefix starts the seed benchmark's variables (MSCCLPP_EP_BENCH_TOKENS,
// _HIDDEN, _TOPK, _EXPERTS, _WARMUP, _ITERS), which name the same sizes as
// the EPBENCH_* ones, so the seed's launchers work unchanged.
const SeedEnvPrefix = "MSCCLPP_EP_BENCH_"

// envValue is the value of variable name (EPBENCH_*) and the name it came
// from: its own, or where that is unset or empty, the seed's name of it.
func envValue(getenv func(string) string, name string) (value, from string) {
	if v := strings.TrimSpace(getenv(name)); v != "" {
		return v, name
	}
	if rest, ok := strings.CutPrefix(name, "EPBENCH_"); ok {
		seed := SeedEnvPrefix + rest
		if v := strings.TrimSpace(getenv(seed)); v != "" {
			return v, seed
		}
	}
	return "", name
}

// Check reports the first problem with a Config built or changed in code
// (for example by a sweep), with the same messages Parse gives.
func (c *Config) Check() error {
	return c.check(nil)
}

// check validates every field. source maps a flag name to the environment
// variable its value came from, so messages name what the user set.
func (c *Config) check(source map[string]string) error {
	label := func(name string) string {
		if env, ok := source[name]; ok {
			return env
		}
		return "--" + name
	}
	if _, err := parseAlgorithm(c.Algorithm.flagValue()); err != nil {
		return usageErr("--algorithm", err.Error())
	}
	if err := c.Layout.runnable(); err != nil {
		return usageErr("--layout", err.Error())
	}
	for _, f := range configInts {
		if err := f.check(*f.field(c)); err != nil {
			return usageErr(label(f.name), err.Error())
		}
	}
	if _, err := parseDispatchDtype(c.DispatchDtype.flagValue()); err != nil {
		return usageErr("--dispatch-dtype", err.Error())
	}
	if _, err := ParseCombineMode(c.CombineMode.String()); err != nil {
		return usageErr("--combine-mode", err.Error())
	}
	if _, err := parseProtocol(c.Protocol.String()); err != nil {
		return usageErr("--protocol", err.Error())
	}
	if c.Protocol == ProtocolInline && c.Tokens > InlineMaxTokens {
		return usageErr("--protocol", fmt.Sprintf("inline takes at most %d tokens per rank (%s), got %d; auto uses it for the smallest operations",
			InlineMaxTokens, label("num-tokens"), c.Tokens))
	}
	switch c.Compute {
	case ComputeAuto, ComputeCUDA, ComputeCPU:
	default:
		return usageErr("--backend", fmt.Sprintf("unknown value %q (want cuda, cpu or auto)", c.Compute))
	}
	if err := c.CheckCompute(c.Compute); err != nil {
		return err
	}
	if err := c.checkGIN(); err != nil {
		return err
	}
	if c.DispatchTokens > c.Tokens {
		return usageErr("--dispatch-less-than-max-tokens",
			fmt.Sprintf("must be at most %s, got %d > %d", label("num-tokens"), c.DispatchTokens, c.Tokens))
	}
	if c.DispatchTokens > 0 && c.NonUniform {
		return usageErr("--dispatch-less-than-max-tokens", "and --non-uniform-tokens exclude each other")
	}
	if c.DispatchOnly && !c.Validate {
		return usageErr("--dispatch-only", "needs --validate (it validates the dispatch alone)")
	}
	if err := c.CombineLayoutError(); err != nil {
		return err
	}
	if c.TopK > c.Experts {
		return usageErr(label("num-topk"),
			fmt.Sprintf("must not exceed %s, got %d > %d", label("num-experts"), c.TopK, c.Experts))
	}
	if err := c.Fault.check(); err != nil {
		return usageErr("--fault", err.Error())
	}
	if c.ValidateEvery > c.Iters {
		return usageErr("--validate-every", fmt.Sprintf("must not exceed %s, got %d > %d: no timed iteration would be checked",
			label("num-iters"), c.ValidateEvery, c.Iters))
	}
	if c.Hidden < MinHidden {
		return usageErr(label("hidden"), fmt.Sprintf("must be at least %d (a token row carries its token index in its last 128 channels), got %d",
			MinHidden, c.Hidden))
	}
	return nil
}

// CheckRanks reports whether the configuration can run on ranks processes.
func (c *Config) CheckRanks(ranks int) error {
	if err := checkRanks(ranks, "ranks", c.Experts, "--num-experts"); err != nil {
		return err
	}
	if c.Fault.Op != "" && c.Fault.Rank >= ranks {
		return usageErr("--fault", fmt.Sprintf("rank %d does not exist in a job of %d ranks", c.Fault.Rank, ranks))
	}
	if c.MaskTest && ranks < MaskTestRanks {
		return usageErr("--mask-test", fmt.Sprintf("needs at least %d ranks (rank 1 skips a dispatch, ranks 1 and 3 a combine), got %d", MaskTestRanks, ranks))
	}
	if c.DisableNVLink && ranks < 2 {
		return usageErr("--disable-nvlink", fmt.Sprintf("needs at least 2 ranks (the own rank is never reached through GIN), got %d", ranks))
	}
	return nil
}

// MaskTestRanks is the fewest ranks -T runs on.
const MaskTestRanks = 4

// CheckCompute refuses, for the backend compute, the flags that only change
// how the GPU runs when they ask for anything (a value other than their
// default): "--FLAG needs the CUDA backend" (exit 2).
func (c *Config) CheckCompute(compute Compute) error {
	if compute != ComputeCPU {
		return nil
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"--num-blocks", c.NumBlocks != 0}, {"--max-num-sms", c.MaxNumSMs != 0}, {"--protocol", c.Protocol != ProtocolAuto},
		{"--cuda-graph", c.CUDAGraph}, {"--ptx-dir", c.PTXDir != ""}, {"--cupti-region", c.CUPTIRegion}, {"--profile", c.Profile},
		{"--transport", c.Transport != TransportAuto}, {"--disable-nvlink", c.DisableNVLink},
	} {
		if f.set {
			return &UsageError{Flag: f.name, Why: "needs the CUDA backend", Bare: true}
		}
	}
	return nil
}

// checkGIN refuses what no transport offers: -n/--disable-nvlink (every
// peer through NCCL's GIN) over CUDA IPC, or with what the GIN build of the
// kernels leaves out (direct_send, the inline and lines protocols).
func (c *Config) checkGIN() error {
	if !c.DisableNVLink {
		return nil
	}
	if c.Transport == TransportIPC {
		return &UsageError{Flag: "--disable-nvlink", Why: "sends every peer through NCCL's GIN, which needs --transport nccl (or auto)"}
	}
	if flag, why := c.GINUnsupported(); why != "" {
		return &UsageError{Flag: flag, Why: "with --disable-nvlink: " + why}
	}
	return nil
}

// GINUnsupported says what of this configuration the kernels that put
// through NCCL's GIN leave out (direct_send, the inline and lines
// protocols): the flag that asks for it and why, "" for nothing. The one
// rule for -n here and for peers outside the NVLink domain in
// kernels.NewPlan.
func (c *Config) GINUnsupported() (flag, why string) {
	switch {
	case c.CombineMode == DirectSend:
		return "--combine-mode", "the kernels that put through GIN combine with rank_local_reduce only, not direct_send"
	case c.Protocol == ProtocolInline || c.Protocol == ProtocolLines:
		return "--protocol", "the kernels that put through GIN use the fenced protocol only: --protocol auto or fenced"
	}
	return "", ""
}

// TransportFor is the transport a job takes: --transport, where auto is
// CUDA IPC when every rank is on one node (sameNode) and NCCL otherwise or
// with -n.
func (c *Config) TransportFor(sameNode bool) Transport {
	switch {
	case c.Transport != TransportAuto:
		return c.Transport
	case sameNode && !c.DisableNVLink:
		return TransportIPC
	}
	return TransportNCCL
}

func checkRanks(ranks int, ranksLabel string, experts int, expertsLabel string) error {
	if ranks < 1 {
		return usageErr(ranksLabel, fmt.Sprintf("must be at least 1, got %d", ranks))
	}
	if ranks > MaxRanks {
		return usageErr(ranksLabel, fmt.Sprintf("must be at most %d, got %d", MaxRanks, ranks))
	}
	if experts%ranks != 0 {
		return usageErr(expertsLabel,
			fmt.Sprintf("must be divisible by the number of ranks, got %d experts over %d ranks", experts, ranks))
	}
	return nil
}

// CheckNumBlocks reports whether an explicit --num-blocks fits a device
// with smCount streaming multiprocessors. Zero (automatic) always fits.
func (c *Config) CheckNumBlocks(smCount int) error {
	if c.NumBlocks == 0 {
		return nil
	}
	if smCount < 1 {
		return fmt.Errorf("config: SM count must be positive, got %d", smCount)
	}
	if c.NumBlocks > smCount {
		return usageErr("--num-blocks",
			fmt.Sprintf("must be at most the device's %d SMs, got %d", smCount, c.NumBlocks))
	}
	return nil
}

// LocalExperts is the number of experts each of ranks processes hosts, or
// 0 when ranks is not positive.
func (c *Config) LocalExperts(ranks int) int {
	if ranks < 1 {
		return 0
	}
	return c.Experts / ranks
}

// RankTokens is the tokens each of ranks dispatches: nil when every rank
// dispatches --num-tokens, all DispatchTokens with -l, ep_bench's draw
// with -N (routing.RankTokens).
func (c *Config) RankTokens(ranks int) []int {
	switch {
	case c.NonUniform:
		return routing.RankTokens(c.Tokens, ranks)
	case c.DispatchTokens > 0:
		return slices.Repeat([]int{c.DispatchTokens}, ranks)
	}
	return nil
}

// Timeout is TimeoutMs as a duration.
func (c *Config) Timeout() time.Duration {
	return time.Duration(c.TimeoutMs) * time.Millisecond
}

// Args renders c as a canonical argument list with long flag names and
// "--flag=value" spellings. Every value-taking flag is written out, so
// Parse(c.Args(), getenv) gives back c whatever the environment holds;
// switches appear only when they differ from the default.
func (c *Config) Args() []string {
	out := []string{
		"--algorithm=" + c.Algorithm.flagValue(),
		"--layout=" + c.Layout.flagValue(),
	}
	for _, f := range configInts {
		if f.zeroUnset && *f.field(c) == 0 {
			continue
		}
		out = append(out, "--"+f.name+"="+strconv.Itoa(*f.field(c)))
	}
	out = append(out,
		"--dispatch-dtype="+c.DispatchDtype.flagValue(),
		"--combine-mode="+c.CombineMode.String(),
		"--protocol="+c.Protocol.String(),
		"--seed="+strconv.FormatUint(uint64(c.Seed), 10),
	)
	if !c.KernelTiming {
		out = append(out, "--no-kernel-timing")
	}
	if c.CUPTIRegion {
		out = append(out, "--cupti-region")
	}
	if c.CUDAGraph {
		out = append(out, "--cuda-graph")
	}
	if c.Transport != TransportAuto {
		out = append(out, "--transport="+c.Transport.String())
	}
	if c.DisableNVLink {
		out = append(out, "--disable-nvlink")
	}
	if c.BackToBack {
		out = append(out, "--back-to-back")
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"--non-uniform-tokens", c.NonUniform}, {"--dispatch-only", c.DispatchOnly}, {"--profile", c.Profile}, {"--mask-test", c.MaskTest}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if c.Validate {
		out = append(out, "--validate")
	}
	if c.JSONPath != "" {
		out = append(out, "--json="+c.JSONPath)
	}
	if c.Compute != ComputeAuto {
		out = append(out, "--backend="+string(c.Compute))
	}
	if c.PTXDir != "" {
		out = append(out, "--ptx-dir="+c.PTXDir)
	}
	if c.Fault.Op != "" {
		out = append(out, "--fault="+c.Fault.String())
	}
	if c.ShowVersion {
		out = append(out, "--version")
	}
	return out
}

// DirectSendRankMajor is why direct_send and the rank-major layout exclude
// each other.
const DirectSendRankMajor = "direct_send does not apply to the rank-major layout (its combine sums one row per rank)"

// CombineLayoutError is the usage error of a combine mode the layout has no
// combine for (direct_send with rank-major), nil for every other pair.
// Validate refuses it, and so does kernels.NewPlan for a configuration built
// without Validate.
func (c *Config) CombineLayoutError() *UsageError {
	if c.Layout == RankMajor && c.CombineMode == DirectSend {
		return usageErr("--combine-mode", DirectSendRankMajor)
	}
	return nil
}
