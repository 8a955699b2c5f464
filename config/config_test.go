package config

import (
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// envOf returns a getenv over a fixed map.
func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// hostileEnv sets every fallback variable to garbage: a test that passes
// with it shows the value came from the command line.
var hostileEnv = envOf(map[string]string{
	"EPBENCH_TOKENS": "x", "EPBENCH_HIDDEN": "x", "EPBENCH_TOPK": "x",
	"EPBENCH_EXPERTS": "x", "EPBENCH_WARMUP": "x", "EPBENCH_ITERS": "x",
})

func TestDefaults(t *testing.T) {
	c, err := Parse(nil, nil)
	noErr(t, err)
	equal(t, Default(), c)

	equal(t, LowLatency, c.Algorithm)
	equal(t, ExpertMajor, c.Layout)
	equal(t, 128, c.Tokens)
	equal(t, 7168, c.Hidden)
	equal(t, 8, c.TopK)
	equal(t, 256, c.Experts)
	equal(t, 10, c.Warmup)
	equal(t, 50, c.Iters)
	equal(t, DtypeBF16, c.DispatchDtype)
	equal(t, RankLocalReduce, c.CombineMode)
	equal(t, 0, c.NumBlocks)
	equal(t, true, c.KernelTiming)
	equal(t, false, c.CUPTIRegion)
	equal(t, false, c.Validate)
	equal(t, 0, c.ValidateEvery)
	equal(t, uint32(1), c.Seed)
	equal(t, 1, c.Reroute)
	equal(t, 5000, c.TimeoutMs)
	equal(t, 5*time.Second, c.Timeout())
	equal(t, "", c.JSONPath)
	equal(t, ComputeAuto, c.Compute)
	equal(t, "", c.PTXDir)
	equal(t, false, c.ShowVersion)
	noErr(t, c.Check())
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		// non-numeric, non-positive and out-of-range sizes
		{[]string{"-t", "abc"}, nil, `--num-tokens: must be a positive integer, got "abc"`},
		{[]string{"--tokens", "abc"}, nil, `--num-tokens: must be a positive integer, got "abc"`},
		{[]string{"--num-tokens=1.5"}, nil, `--num-tokens: must be a positive integer, got "1.5"`},
		{[]string{"-t", ""}, nil, `--num-tokens: must be a positive integer, got ""`},
		{[]string{"-t", "0"}, nil, `--num-tokens: must be a positive integer, got "0"`},
		{[]string{"-t", "-5"}, nil, `--num-tokens: must be a positive integer, got "-5"`},
		{[]string{"-t", "4097"}, nil, `--num-tokens: must be at most 4096, got 4097`},
		{[]string{"-t", "99999999999999999999"}, nil, `--num-tokens: must be at most 4096, got 99999999999999999999`},
		{[]string{"-t", "-99999999999999999999"}, nil, `--num-tokens: must be a positive integer, got "-99999999999999999999"`},
		{[]string{"-d", "x"}, nil, `--hidden: must be a positive integer, got "x"`},
		{[]string{"-d", "0"}, nil, `--hidden: must be a positive integer, got "0"`},
		{[]string{"-d", "100"}, nil, `--hidden: must be a multiple of 128, got 100`},
		{[]string{"--hidden", "7200"}, nil, `--hidden: must be a multiple of 128, got 7200`},
		{[]string{"-d", "16512"}, nil, `--hidden: must be at most 16384, got 16512`},
		{[]string{"-k", "two"}, nil, `--num-topk: must be a positive integer, got "two"`},
		{[]string{"-k", "0"}, nil, `--num-topk: must be a positive integer, got "0"`},
		{[]string{"--top-k", "33"}, nil, `--num-topk: must be at most 32, got 33`},
		{[]string{"-k", "9", "-e", "8"}, nil, `--num-topk: must not exceed --num-experts, got 9 > 8`},
		{[]string{"-e", "many"}, nil, `--num-experts: must be a positive integer, got "many"`},
		{[]string{"--experts", "0"}, nil, `--num-experts: must be a positive integer, got "0"`},
		{[]string{"-e", "4097"}, nil, `--num-experts: must be at most 4096, got 4097`},
		{[]string{"-w", "-1"}, nil, `--num-warmup: must be a non-negative integer, got "-1"`},
		{[]string{"--warmup", "ten"}, nil, `--num-warmup: must be a non-negative integer, got "ten"`},
		{[]string{"-i", "0"}, nil, `--num-iters: must be a positive integer, got "0"`},
		{[]string{"--iters", "-3"}, nil, `--num-iters: must be a positive integer, got "-3"`},
		{[]string{"-i", "1000001"}, nil, `--num-iters: must be at most 1000000, got 1000001`},
		{[]string{"--num-blocks", "-1"}, nil, `--num-blocks: must be a non-negative integer, got "-1"`},
		{[]string{"--validate-every", "-2"}, nil, `--validate-every: must be a non-negative integer, got "-2"`},
		{[]string{"--reroute", "0"}, nil, `--reroute: must be a positive integer, got "0"`},
		{[]string{"--timeout-ms", "0"}, nil, `--timeout-ms: must be a positive integer, got "0"`},
		{[]string{"--timeout-ms", "2147483648"}, nil, `--timeout-ms: must be at most 2147483647, got 2147483648`},
		{[]string{"--seed", "-1"}, nil, `--seed: must be an unsigned 32-bit integer, got "-1"`},
		{[]string{"--seed", "4294967296"}, nil, `--seed: must be an unsigned 32-bit integer, got "4294967296"`},
		{[]string{"--seed", "0xZZ"}, nil, `--seed: must be an unsigned 32-bit integer, got "0xZZ"`},
		{[]string{"--seed="}, nil, `--seed: must be an unsigned 32-bit integer, got ""`},

		// a token row carries its index in its last 128 channels: hidden from 256; --validate-every within --num-iters
		{[]string{"-d", "128"}, nil, `--hidden: must be at least 256 (a token row carries its token index in its last 128 channels), got 128`},
		{[]string{"-V", "-d", "128"}, nil, `--hidden: must be at least 256 (a token row carries its token index in its last 128 channels), got 128`},
		{[]string{"--validate-every", "100", "-i", "10"}, nil, `--validate-every: must not exceed --num-iters, got 100 > 10: no timed iteration would be checked`},

		// choices
		{[]string{"-a", "ht"}, nil, `--algorithm: high-throughput mode is not supported`},
		{[]string{"--algorithm", "high-throughput"}, nil, `--algorithm: high-throughput mode is not supported`},
		{[]string{"-a", "fast"}, nil, `--algorithm: unknown value "fast" (want ll or low-latency)`},
		{[]string{"--jitter-us", "-1"}, nil, `--jitter-us: must be a non-negative integer, got "-1"`},
		{[]string{"--jitter-us", "2000000"}, nil, `--jitter-us: must be at most 1000000, got 2000000`},
		{[]string{"--back-to-back=maybe"}, nil, `--back-to-back: must be true or false, got "maybe"`},
		{[]string{"-L", "rm", "--combine-mode", "direct_send"}, nil, `--combine-mode: direct_send does not apply to the rank-major layout (its combine sums one row per rank)`},
		{[]string{"-l", "200"}, nil, `--dispatch-less-than-max-tokens: must be at most --num-tokens, got 200 > 128`},
		{[]string{"-l", "0"}, nil, `--dispatch-less-than-max-tokens: must be at least 1, got 0 (leave the flag out for its default)`},
		{[]string{"-l", "64", "-N"}, nil, `--dispatch-less-than-max-tokens: and --non-uniform-tokens exclude each other`},
		{[]string{"-D"}, nil, `--dispatch-only: needs --validate (it validates the dispatch alone)`},
		{[]string{"-S", "-1"}, nil, `--max-num-sms: must be a non-negative integer, got "-1"`},
		{[]string{"--backend", "cpu", "--ptx-dir", "k"}, nil, `--ptx-dir needs the CUDA backend`},
		{[]string{"--backend", "cpu", "-S", "8"}, nil, `--max-num-sms needs the CUDA backend`},
		{[]string{"--backend", "cpu", "-p"}, nil, `--profile needs the CUDA backend`},
		{[]string{"--backend", "cpu", "--protocol", "fenced"}, nil, `--protocol needs the CUDA backend`},
		{[]string{"--backend", "cpu", "--num-blocks", "8"}, nil, `--num-blocks needs the CUDA backend`},
		{[]string{"--backend", "cpu", "--cupti-region"}, nil, `--cupti-region needs the CUDA backend`},
		{[]string{"--backend", "cpu", "--transport", "nccl"}, nil, `--transport needs the CUDA backend`},
		{[]string{"--backend", "cpu", "--transport", "ipc"}, nil, `--transport needs the CUDA backend`},
		{[]string{"--backend", "cpu", "-n"}, nil, `--disable-nvlink needs the CUDA backend`},
		{[]string{"--transport", "nvshmem"}, nil, `--transport: unknown value "nvshmem" (want auto, ipc or nccl)`},
		{[]string{"-L", "flat"}, nil, `--layout: flat layout belongs to high-throughput mode, which is not supported`},
		{[]string{"-L", "EM"}, nil, `--layout: unknown value "EM" (want em, expert-major, rm or rank-major)`},
		{[]string{"--dispatch-dtype", "fp16"}, nil, `--dispatch-dtype: unknown value "fp16" (want bf16 or fp8_e4m3)`},
		{[]string{"--combine-mode", "allreduce"}, nil, `--combine-mode: unknown value "allreduce" (want rank_local_reduce or direct_send)`},
		{[]string{"--backend", "gpu"}, nil, `--backend: unknown value "gpu" (want cuda, cpu or auto)`},
		{[]string{"--protocol", "ll"}, nil, `--protocol: unknown value "ll" (want auto, inline, fenced or lines)`},
		{[]string{"--protocol", "inline"}, nil, `--protocol: inline takes at most 15 tokens per rank (--num-tokens), got 128; auto uses it for the smallest operations`},
		{[]string{"--protocol", "inline", "-t", "16"}, nil, `--protocol: inline takes at most 15 tokens per rank (--num-tokens), got 16; auto uses it for the smallest operations`},
		{[]string{"--json="}, nil, `--json: must name a file`},
		{[]string{"--ptx-dir", ""}, nil, `--ptx-dir: must name a directory`},
		{[]string{"--cupti-inproc=false"}, nil, `--cupti-inproc: in-process CUPTI is the only kernel timer; use --no-kernel-timing to turn it off`},
		{[]string{"-V=maybe"}, nil, `--validate: must be true or false, got "maybe"`},
		{[]string{"--no-kernel-timing=2"}, nil, `--no-kernel-timing: must be true or false, got "2"`},

		// fault injection
		{[]string{"--fault", "skip-dispatch"}, nil, `--fault: unknown value "skip-dispatch" (want skip-dispatch=RANK or skip-combine=RANK)`},
		{[]string{"--fault=skip-x=1"}, nil, `--fault: unknown value "skip-x=1" (want skip-dispatch=RANK or skip-combine=RANK)`},
		{[]string{"--fault="}, nil, `--fault: unknown value "" (want skip-dispatch=RANK or skip-combine=RANK)`},
		{[]string{"--fault", "skip-dispatch=-1"}, nil, `--fault: "skip-dispatch=-1": RANK must be an integer in [0, 256)`},
		{[]string{"--fault", "skip-combine=a"}, nil, `--fault: "skip-combine=a": RANK must be an integer in [0, 256)`},
		{[]string{"--fault", "skip-combine=256"}, nil, `--fault: "skip-combine=256": RANK must be an integer in [0, 256)`},
		{[]string{"--fault", "skip-combine=1", "--fault", "skip-dispatch=2"}, nil, `--fault: given more than once (one fault per run)`},

		// flags and arguments that do not belong
		{[]string{"--bogus"}, nil, `--bogus: unknown flag`},
		{[]string{"--bogus=1", "-t", "4"}, nil, `--bogus: unknown flag`},
		{[]string{"-x"}, nil, `-x: unknown flag`},
		{[]string{"-Vx"}, nil, `-x: unknown flag`},
		{[]string{"-Q"}, nil, `-Q: unknown flag`},
		{[]string{"-test.v"}, nil, `-test.v: unknown flag`},
		{[]string{"-Vtest.run=x"}, nil, `-test.run: unknown flag`},
		{[]string{"---t", "4"}, nil, `---t: bad flag syntax`},
		{[]string{"--=4"}, nil, `--=4: bad flag syntax`},
		{[]string{"-t"}, nil, `--num-tokens: requires a value`},
		{[]string{"--tokens"}, nil, `--num-tokens: requires a value`},
		{[]string{"-V", "--json"}, nil, `--json: requires a value`},
		{[]string{"foo"}, nil, `"foo": unexpected positional argument`},
		{[]string{"-t", "4", "routing"}, nil, `"routing": unexpected positional argument`},
		{[]string{"--", "-t", "4"}, nil, `"-t": unexpected positional argument`},
		{[]string{""}, nil, `"": unexpected positional argument`},

		// environment fallbacks name the variable
		{nil, map[string]string{"EPBENCH_TOKENS": "abc"}, `EPBENCH_TOKENS: must be a positive integer, got "abc"`},
		{nil, map[string]string{"EPBENCH_TOKENS": "0"}, `EPBENCH_TOKENS: must be a positive integer, got "0"`},
		{nil, map[string]string{"EPBENCH_TOKENS": "5000"}, `EPBENCH_TOKENS: must be at most 4096, got 5000`},
		{nil, map[string]string{"EPBENCH_HIDDEN": "100"}, `EPBENCH_HIDDEN: must be a multiple of 128, got 100`},
		{nil, map[string]string{"EPBENCH_TOPK": "40"}, `EPBENCH_TOPK: must be at most 32, got 40`},
		{nil, map[string]string{"EPBENCH_EXPERTS": "-1"}, `EPBENCH_EXPERTS: must be a positive integer, got "-1"`},
		{nil, map[string]string{"EPBENCH_WARMUP": "-1"}, `EPBENCH_WARMUP: must be a non-negative integer, got "-1"`},
		{nil, map[string]string{"EPBENCH_ITERS": "0"}, `EPBENCH_ITERS: must be a positive integer, got "0"`},
		{nil, map[string]string{"EPBENCH_EXPERTS": "4"}, `--num-topk: must not exceed EPBENCH_EXPERTS, got 8 > 4`},
		{[]string{"-e", "4"}, map[string]string{"EPBENCH_TOPK": "6"}, `EPBENCH_TOPK: must not exceed --num-experts, got 6 > 4`},
		{[]string{"-V"}, map[string]string{"EPBENCH_HIDDEN": "128"}, `EPBENCH_HIDDEN: must be at least 256 (a token row carries its token index in its last 128 channels), got 128`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " ")+"|"+envString(tc.env), func(t *testing.T) {
			c, err := Parse(tc.args, envOf(tc.env))
			errText(t, err, tc.want)
			if c != nil {
				t.Errorf("got a config with an error: %+v", c)
			}
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not a *UsageError", err)
			}
			sep := ": "
			if ue.Bare {
				sep = " "
			}
			equal(t, ue.Flag+sep+ue.Why, err.Error())
		})
	}
}

func envString(env map[string]string) string {
	var parts []string
	for k, v := range env {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		args  []string
		check func(t *testing.T, c *Config)
	}{
		{[]string{"-t", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"-t64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"-t=64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"--num-tokens", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"--num-tokens=64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"--tokens", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"--tokens=64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Tokens) }},
		{[]string{"-t", "4096"}, func(t *testing.T, c *Config) { equal(t, 4096, c.Tokens) }},
		{[]string{"-t", "1", "--tokens", "2"}, func(t *testing.T, c *Config) { equal(t, 2, c.Tokens) }},
		{[]string{"-d", "4096"}, func(t *testing.T, c *Config) { equal(t, 4096, c.Hidden) }},
		{[]string{"--hidden=16384"}, func(t *testing.T, c *Config) { equal(t, 16384, c.Hidden) }},
		{[]string{"-d", "256"}, func(t *testing.T, c *Config) { equal(t, 256, c.Hidden) }},
		{[]string{"-k", "4"}, func(t *testing.T, c *Config) { equal(t, 4, c.TopK) }},
		{[]string{"--num-topk", "4"}, func(t *testing.T, c *Config) { equal(t, 4, c.TopK) }},
		{[]string{"--top-k", "32"}, func(t *testing.T, c *Config) { equal(t, 32, c.TopK) }},
		{[]string{"-k", "8", "-e", "8"}, func(t *testing.T, c *Config) { equal(t, 8, c.Experts) }},
		{[]string{"-e", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Experts) }},
		{[]string{"--num-experts", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Experts) }},
		{[]string{"--experts", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.Experts) }},
		{[]string{"-w", "0"}, func(t *testing.T, c *Config) { equal(t, 0, c.Warmup) }},
		{[]string{"--num-warmup", "3"}, func(t *testing.T, c *Config) { equal(t, 3, c.Warmup) }},
		{[]string{"--warmup", "3"}, func(t *testing.T, c *Config) { equal(t, 3, c.Warmup) }},
		{[]string{"-i", "1"}, func(t *testing.T, c *Config) { equal(t, 1, c.Iters) }},
		{[]string{"--num-iters", "200"}, func(t *testing.T, c *Config) { equal(t, 200, c.Iters) }},
		{[]string{"--iters", "200"}, func(t *testing.T, c *Config) { equal(t, 200, c.Iters) }},
		{[]string{"-a", "ll"}, func(t *testing.T, c *Config) { equal(t, LowLatency, c.Algorithm) }},
		{[]string{"--algorithm", "low-latency"}, func(t *testing.T, c *Config) { equal(t, LowLatency, c.Algorithm) }},
		{[]string{"-L", "em"}, func(t *testing.T, c *Config) { equal(t, ExpertMajor, c.Layout) }},
		{[]string{"--layout", "expert-major"}, func(t *testing.T, c *Config) { equal(t, ExpertMajor, c.Layout) }},
		{[]string{"--dispatch-dtype", "fp8_e4m3"}, func(t *testing.T, c *Config) { equal(t, DtypeFP8E4M3, c.DispatchDtype) }},
		{[]string{"--dispatch-dtype=bf16"}, func(t *testing.T, c *Config) { equal(t, DtypeBF16, c.DispatchDtype) }},
		{[]string{"--combine-mode", "direct_send"}, func(t *testing.T, c *Config) { equal(t, DirectSend, c.CombineMode) }},
		{[]string{"--num-blocks", "64"}, func(t *testing.T, c *Config) { equal(t, 64, c.NumBlocks) }},
		{[]string{"--protocol", "inline", "-t", "15"}, func(t *testing.T, c *Config) { equal(t, ProtocolInline, c.Protocol) }},
		{[]string{"--protocol=fenced"}, func(t *testing.T, c *Config) { equal(t, ProtocolFenced, c.Protocol) }},
		{[]string{"--protocol=lines"}, func(t *testing.T, c *Config) { equal(t, ProtocolLines, c.Protocol) }},
		{nil, func(t *testing.T, c *Config) { equal(t, ProtocolAuto, c.Protocol) }},
		{[]string{"--no-kernel-timing"}, func(t *testing.T, c *Config) { equal(t, false, c.KernelTiming) }},
		{[]string{"--no-kernel-timing=false"}, func(t *testing.T, c *Config) { equal(t, true, c.KernelTiming) }},
		{[]string{"--cupti-region"}, func(t *testing.T, c *Config) { equal(t, true, c.CUPTIRegion) }},
		{[]string{"--cuda-graph"}, func(t *testing.T, c *Config) { equal(t, true, c.CUDAGraph) }},
		{nil, func(t *testing.T, c *Config) { equal(t, false, c.CUDAGraph) }},
		{[]string{"--cupti-inproc"}, func(t *testing.T, c *Config) { equal(t, true, c.KernelTiming) }},
		{[]string{"-V"}, func(t *testing.T, c *Config) { equal(t, true, c.Validate) }},
		{[]string{"--validate"}, func(t *testing.T, c *Config) { equal(t, true, c.Validate) }},
		{[]string{"-Vt", "4"}, func(t *testing.T, c *Config) { equal(t, true, c.Validate); equal(t, 4, c.Tokens) }},
		{[]string{"-V", "-d", "256"}, func(t *testing.T, c *Config) { equal(t, 256, c.Hidden) }},
		{[]string{"--validate-every", "10"}, func(t *testing.T, c *Config) { equal(t, 10, c.ValidateEvery) }},
		{[]string{"--seed", "0"}, func(t *testing.T, c *Config) { equal(t, uint32(0), c.Seed) }},
		{[]string{"--seed", "4294967295"}, func(t *testing.T, c *Config) { equal(t, uint32(4294967295), c.Seed) }},
		{[]string{"--seed", "0xB3C4"}, func(t *testing.T, c *Config) { equal(t, uint32(0xB3C4), c.Seed) }},
		{[]string{"--reroute", "4"}, func(t *testing.T, c *Config) { equal(t, 4, c.Reroute) }},
		{[]string{"--timeout-ms", "250"}, func(t *testing.T, c *Config) { equal(t, 250*time.Millisecond, c.Timeout()) }},
		{[]string{"--json", "out.json"}, func(t *testing.T, c *Config) { equal(t, "out.json", c.JSONPath) }},
		{[]string{"--json=-"}, func(t *testing.T, c *Config) { equal(t, "-", c.JSONPath) }},
		{[]string{"--backend", "cpu"}, func(t *testing.T, c *Config) { equal(t, ComputeCPU, c.Compute) }},
		{[]string{"--backend", "cuda"}, func(t *testing.T, c *Config) { equal(t, ComputeCUDA, c.Compute) }},
		{[]string{"--backend", "cpu", "--backend", "auto"}, func(t *testing.T, c *Config) { equal(t, ComputeAuto, c.Compute) }},
		{[]string{"--ptx-dir", "kernels/ptx"}, func(t *testing.T, c *Config) { equal(t, "kernels/ptx", c.PTXDir) }},
		{[]string{"--"}, func(t *testing.T, c *Config) { equal(t, Default(), c) }},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := Parse(tc.args, nil)
			noErr(t, err)
			tc.check(t, c)
		})
	}
}

func TestEnvFallbacks(t *testing.T) {
	env := envOf(map[string]string{
		"EPBENCH_TOKENS": "32", "EPBENCH_HIDDEN": "4096", "EPBENCH_TOPK": "4",
		"EPBENCH_EXPERTS": "64", "EPBENCH_WARMUP": "2", "EPBENCH_ITERS": "7",
	})
	c, err := Parse(nil, env)
	noErr(t, err)
	equal(t, []int{32, 4096, 4, 64, 2, 7},
		[]int{c.Tokens, c.Hidden, c.TopK, c.Experts, c.Warmup, c.Iters})

	// Every spelling of a flag beats its variable.
	c, err = Parse([]string{"-t", "16", "--hidden=2048", "--top-k", "2", "--experts", "16", "-w0", "--num-iters", "3"}, env)
	noErr(t, err)
	equal(t, []int{16, 2048, 2, 16, 0, 3},
		[]int{c.Tokens, c.Hidden, c.TopK, c.Experts, c.Warmup, c.Iters})

	// A flag also hides a bad variable.
	c, err = Parse([]string{"-t", "16", "-d", "2048", "-k", "2", "-e", "16", "-w", "1", "-i", "3"}, hostileEnv)
	noErr(t, err)
	equal(t, 16, c.Tokens)

	// Surrounding blanks are ignored; an empty or blank variable is unset.
	c, err = Parse(nil, envOf(map[string]string{"EPBENCH_TOKENS": " 256\n", "EPBENCH_HIDDEN": "", "EPBENCH_ITERS": "  "}))
	noErr(t, err)
	equal(t, 256, c.Tokens)
	equal(t, 7168, c.Hidden)
	equal(t, 50, c.Iters)

	// Only the listed variables are read, each under its name and the
	// seed's.
	var asked []string
	_, err = Parse(nil, func(name string) string { asked = append(asked, name); return "" })
	noErr(t, err)
	sort.Strings(asked)
	equal(t, []string{"EPBENCH_EXPERTS", "EPBENCH_HIDDEN", "EPBENCH_ITERS",
		"EPBENCH_TOKENS", "EPBENCH_TOPK", "EPBENCH_WARMUP", "MSCCLPP_EP_BENCH_EXPERTS", "MSCCLPP_EP_BENCH_HIDDEN",
		"MSCCLPP_EP_BENCH_ITERS", "MSCCLPP_EP_BENCH_TOKENS", "MSCCLPP_EP_BENCH_TOPK", "MSCCLPP_EP_BENCH_WARMUP"}, asked)
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"-t", "4", "-h"}, {"-Vh"}, {"-h", "stray"}, {"--help=true"},
	} {
		c, err := Parse(args, hostileEnv)
		if c != nil || !errors.Is(err, ErrHelp) {
			t.Errorf("%q: got %v, %v; want nil, ErrHelp", args, c, err)
		}
	}
	// --help=false is no request for help.
	_, err := Parse([]string{"--help=false"}, nil)
	noErr(t, err)

	u := Usage()
	var help bool
	fs := newFlagSet("epbench")
	bindConfig(fs, Default(), &help, nil)
	n := 0
	fs.VisitAll(func(f *pflagFlag) {
		n++
		contains(t, u, "--"+f.Name, "help lists every flag")
		if f.Shorthand != "" {
			contains(t, u, "-"+f.Shorthand+", --"+f.Name)
		}
	})
	equal(t, 37, n)
	for alias, canonical := range aliases {
		contains(t, u, "--"+alias, "alias of --%s", canonical)
	}
	for _, want := range []string{
		"EPBENCH_TOKENS", "EPBENCH_HIDDEN", "EPBENCH_TOPK", "EPBENCH_EXPERTS", "EPBENCH_WARMUP", "EPBENCH_ITERS",
		"(default 128)", "(default 7168)", "(default 8)", "(default 256)", "(default 10)", "(default 50)",
		"(default 5000)", `"rank_local_reduce")`,
		"0  success", "1  runtime error", "2  usage error", "3  validation failed", "4  a peer did not arrive",
	} {
		contains(t, u, want)
	}
	for _, sub := range Subcommands {
		contains(t, u, "\n  "+sub+" ")
	}
	// Aliases are mentioned, never listed as flags of their own.
	if strings.Contains(u, "--tokens int") {
		t.Error("alias listed as a flag of its own")
	}
}

func TestVersion(t *testing.T) {
	c, err := Parse([]string{"--version"}, hostileEnv)
	noErr(t, err)
	equal(t, true, c.ShowVersion)
	c, err = Parse([]string{"--version", "extra"}, nil)
	noErr(t, err)
	equal(t, true, c.ShowVersion)
	// A malformed flag is still an error.
	_, err = Parse([]string{"--version", "-t", "x"}, nil)
	errText(t, err, `--num-tokens: must be a positive integer, got "x"`)
}

// Parse must keep pflag from writing anything; the caller prints the
// single message.
func TestParseIsQuiet(t *testing.T) {
	r, w, err := os.Pipe()
	noErr(t, err)
	saveOut, saveErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	for _, args := range [][]string{{"--bogus"}, {"-t"}, {"-t", "x"}, {"-h"}, {"--help"}, {"-x"}, {"---"}, {"-V=1", "-test.v"}} {
		_, _ = Parse(args, nil)
		_, _ = ParseRouting(args)
	}
	_ = Usage()
	os.Stdout, os.Stderr = saveOut, saveErr
	noErr(t, w.Close())
	out, err := io.ReadAll(r)
	noErr(t, err)
	equal(t, "", string(out))
}

func TestArgs(t *testing.T) {
	equal(t, []string{
		"--algorithm=ll", "--layout=em",
		"--num-tokens=128", "--hidden=7168", "--num-topk=8", "--num-experts=256",
		"--num-warmup=10", "--num-iters=50", "--num-blocks=0", "--validate-every=0",
		"--reroute=1", "--timeout-ms=5000", "--max-num-sms=0", "--jitter-us=0",
		"--dispatch-dtype=bf16", "--combine-mode=rank_local_reduce", "--protocol=auto", "--seed=1",
	}, Default().Args())

	full := &Config{
		Tokens: 4096, Hidden: 16384, TopK: 32, Experts: 32, Warmup: 0, Iters: 3,
		DispatchDtype: DtypeFP8E4M3, CombineMode: RankLocalReduce, NumBlocks: 24,
		KernelTiming: false, CUPTIRegion: true, Validate: true, ValidateEvery: 3,
		Seed: 0xFFFFFFFF, Reroute: 5, TimeoutMs: 1, JSONPath: "-weird=name.json",
		Compute: ComputeCUDA, PTXDir: "--dir", BackToBack: true, JitterUs: 20, MaxNumSMs: 100, DispatchTokens: 7,
		DispatchOnly: true, Profile: true, Layout: RankMajor, Transport: TransportNCCL, DisableNVLink: true,
	}
	configs := []*Config{Default(), full}
	for _, args := range [][]string{
		{"-t", "1", "-d", "256", "-k", "1", "-e", "1", "-w", "0", "-i", "1"},
		{"--no-kernel-timing", "--seed", "0x10", "--backend", "cuda"},
		{"--cuda-graph", "--protocol", "lines"},
		{"--back-to-back", "--jitter-us", "20", "--validate-every", "50"},
		{"-N", "-T", "-L", "rm"},
		{"--transport", "ipc"},
		{"--transport", "nccl", "-n"},
		{"--version", "-t", "7"},
	} {
		c, err := Parse(args, nil)
		noErr(t, err)
		configs = append(configs, c)
	}
	for _, c := range configs {
		got, err := Parse(c.Args(), hostileEnv)
		noErr(t, err, c.Args())
		equal(t, c, got, c.Args())
	}
}

func TestCheck(t *testing.T) {
	errText(t, (&Config{}).Check(), `--num-tokens: must be a positive integer, got "0"`)

	c := Default()
	c.TopK = 40
	errText(t, c.Check(), `--num-topk: must be at most 32, got 40`)

	c = Default()
	c.Compute = "auto"
	errText(t, c.Check(), `--backend: unknown value "auto" (want cuda, cpu or auto)`)
	c = Default()
	c.Compute, c.CUDAGraph = ComputeCPU, true
	errText(t, c.Check(), `--cuda-graph needs the CUDA backend`)
	c.Compute = ComputeAuto
	noErr(t, c.Check())

	c = Default()
	c.DispatchDtype = DispatchDtype(7)
	errText(t, c.Check(), `--dispatch-dtype: unknown value "7" (want bf16 or fp8_e4m3)`)

	c = Default()
	c.CombineMode = CombineMode(-1)
	errText(t, c.Check(), `--combine-mode: unknown value "CombineMode(-1)" (want rank_local_reduce or direct_send)`)

	c = Default()
	c.Algorithm = Algorithm(1)
	errText(t, c.Check(), `--algorithm: unknown value "1" (want ll or low-latency)`)

	c = Default()
	c.Layout = Layout(7)
	errText(t, c.Check(), `--layout: unknown layout Layout(7)`)

	c = Default()
	c.Layout = Flat
	errText(t, c.Check(), `--layout: flat layout belongs to high-throughput mode, which is not supported`)

	c = Default()
	c.Hidden = 128
	errText(t, c.Check(), `--hidden: must be at least 256 (a token row carries its token index in its last 128 channels), got 128`)
}

func TestCheckRanks(t *testing.T) {
	cases := []struct {
		experts, ranks int
		want           string
	}{
		{256, 1, ""},
		{256, 8, ""},
		{256, 256, ""},
		{8, 8, ""},
		{256, 0, `ranks: must be at least 1, got 0`},
		{256, -4, `ranks: must be at least 1, got -4`},
		{512, 257, `ranks: must be at most 256, got 257`},
		{256, 3, `--num-experts: must be divisible by the number of ranks, got 256 experts over 3 ranks`},
		{4, 8, `--num-experts: must be divisible by the number of ranks, got 4 experts over 8 ranks`},
	}
	for _, tc := range cases {
		c := Default()
		c.Experts = tc.experts
		err := c.CheckRanks(tc.ranks)
		if tc.want == "" {
			noErr(t, err)
			equal(t, tc.experts/tc.ranks, c.LocalExperts(tc.ranks))
			continue
		}
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("ranks %d: error %v is not a *UsageError", tc.ranks, err)
		}
		errText(t, err, tc.want)
	}
	equal(t, 32, Default().LocalExperts(8))
	equal(t, 0, Default().LocalExperts(0))
	equal(t, 0, Default().LocalExperts(-1))
}

func TestCheckNumBlocks(t *testing.T) {
	c := Default()
	noErr(t, c.CheckNumBlocks(132), "automatic always fits")
	noErr(t, c.CheckNumBlocks(0), "automatic always fits")

	c.NumBlocks = 132
	noErr(t, c.CheckNumBlocks(132))
	c.NumBlocks = 133
	err := c.CheckNumBlocks(132)
	var ue *UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("error %v is not a *UsageError", err)
	}
	errText(t, err, `--num-blocks: must be at most the device's 132 SMs, got 133`)

	err = c.CheckNumBlocks(0)
	if err == nil {
		t.Fatal("SM count 0 accepted")
	}
	equal(t, false, errors.As(err, &ue), "a bad SM count is the caller's bug, not a usage error")
}

func TestEnumStrings(t *testing.T) {
	equal(t, "LOW_LATENCY", LowLatency.String())
	equal(t, "expert-major", ExpertMajor.String())
	equal(t, "BF16", DtypeBF16.String())
	equal(t, "FP8_E4M3", DtypeFP8E4M3.String())
	equal(t, "rank_local_reduce", RankLocalReduce.String())
	equal(t, "direct_send", DirectSend.String())
	equal(t, "Algorithm(3)", Algorithm(3).String())
	equal(t, "Layout(3)", Layout(3).String())
	equal(t, "DispatchDtype(3)", DispatchDtype(3).String())
	equal(t, "CombineMode(3)", CombineMode(3).String())
}

type pflagFlag = pflag.Flag

func TestFault(t *testing.T) {
	c, err := Parse([]string{"--fault", "skip-combine=3"}, nil)
	noErr(t, err)
	equal(t, Fault{Op: FaultCombine, Rank: 3}, c.Fault)
	equal(t, true, c.Fault.Skips(FaultCombine, 3))
	equal(t, false, c.Fault.Skips(FaultDispatch, 3))
	equal(t, false, c.Fault.Skips(FaultCombine, 2))
	equal(t, false, Default().Fault.Skips(FaultDispatch, 0), "no fault by default")
	noErr(t, c.CheckRanks(4))
	errText(t, c.CheckRanks(2), "--fault: rank 3 does not exist in a job of 2 ranks")
	back, err := Parse(c.Args(), hostileEnv)
	noErr(t, err)
	equal(t, c, back, "Args round trip")

	c.Fault = Fault{Op: "restart", Rank: 1}
	errText(t, c.Check(), `--fault: unknown operation "restart" (want dispatch or combine)`)
	c.Fault = Fault{Op: FaultDispatch, Rank: -1}
	errText(t, c.Check(), "--fault: rank -1 is outside [0, 256)")
}

func TestProtocolNamesRoundTrip(t *testing.T) {
	for p := ProtocolAuto; p <= ProtocolLines; p++ {
		got, err := parseProtocol(p.String())
		if err != nil || got != p {
			t.Errorf("parseProtocol(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	equal(t, "Protocol(9)", Protocol(9).String())
}

func TestTransportFor(t *testing.T) {
	for _, c := range []struct {
		flag     Transport
		sameNode bool
		want     Transport
	}{
		{TransportAuto, true, TransportIPC},
		{TransportAuto, false, TransportNCCL},
		{TransportIPC, false, TransportIPC},
		{TransportIPC, true, TransportIPC},
		{TransportNCCL, true, TransportNCCL},
		{TransportNCCL, false, TransportNCCL},
	} {
		equal(t, c.want, (&Config{Transport: c.flag}).TransportFor(c.sameNode), c.flag, c.sameNode)
	}
	for _, s := range []string{"auto", "ipc", "nccl"} {
		c, err := Parse([]string{"--transport", s}, nil)
		noErr(t, err)
		equal(t, s, c.Transport.String())
	}
}

func TestDisableNVLinkChecks(t *testing.T) {
	c, err := Parse([]string{"--transport", "nccl"}, nil)
	noErr(t, err)
	equal(t, c.TransportFor(true), TransportNCCL)
	for _, ok := range [][]string{{"-n"}, {"-n", "--transport", "nccl"}, {"-n", "--protocol", "fenced"}, {"-n", "-L", "rm"}} {
		c, err = Parse(ok, nil)
		noErr(t, err)
		equal(t, c.TransportFor(true), TransportNCCL)
		noErr(t, c.CheckRanks(2))
		errText(t, c.CheckRanks(1), "--disable-nvlink: needs at least 2 ranks (the own rank is never reached through GIN), got 1")
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "--transport", "ipc"}, "--disable-nvlink: sends every peer through NCCL's GIN, which needs --transport nccl (or auto)"},
		{[]string{"-n", "--combine-mode", "direct_send"}, "--combine-mode: with --disable-nvlink: the kernels that put through GIN combine with rank_local_reduce only, not direct_send"},
		{[]string{"-n", "--protocol", "lines"}, "--protocol: with --disable-nvlink: the kernels that put through GIN use the fenced protocol only: --protocol auto or fenced"},
		{[]string{"-n", "--protocol", "inline", "-t", "4"}, "--protocol: with --disable-nvlink: the kernels that put through GIN use the fenced protocol only: --protocol auto or fenced"},
	} {
		_, err = Parse(bad.args, nil)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("%v: error %v is not a *UsageError", bad.args, err)
		}
		errText(t, err, bad.want)
	}
	c, err = Parse(nil, nil)
	noErr(t, err)
	noErr(t, c.CheckRanks(1))
	equal(t, c.TransportFor(true), TransportIPC)
	equal(t, c.TransportFor(false), TransportNCCL)
}
