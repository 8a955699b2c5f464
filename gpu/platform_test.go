package gpu

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/report"
)

// The CUDA wiring end to end: the platform of every rank measures ep_bench's
// paired loop with the kernel timer and validates, at token counts of each
// protocol, and a token sweep re-targets one set-up.
func TestPlatformMeasuresAndValidates(t *testing.T) {
	onGPU(t, func(w *bench.World, dev *Device) error {
		open := func(cfg *config.Config) (*bench.Platform, error) { return Hooks{}.Platform(w, cfg) }
		for _, c := range []struct {
			tokens int
			edit   func(*config.Config)
		}{
			{1, nil}, {16, nil}, {128, nil},
			{8, func(c *config.Config) { c.DispatchDtype, c.CombineMode = config.DtypeFP8E4M3, config.DirectSend }},
			{32, func(c *config.Config) { c.Protocol, c.CUDAGraph = config.ProtocolFenced, true }},
			// Back to back with jitter, validated in the stream, every protocol.
			{128, backToBack},
			{1, backToBack},
			{32, func(c *config.Config) { backToBack(c); c.Protocol, c.CUDAGraph = config.ProtocolFenced, true }},
			{8, func(c *config.Config) { backToBack(c); c.DispatchDtype = config.DtypeFP8E4M3 }},
			// ep_bench's sub-tests: the rank-major layout in every protocol,
			// fewer and uneven tokens (a rank with none), the SM cap.
			{128, rankMajor},
			{1, rankMajor},
			{32, func(c *config.Config) { rankMajor(c); c.Protocol = config.ProtocolFenced }},
			{8, func(c *config.Config) { rankMajor(c); c.Protocol = config.ProtocolFenced }},
			{128, func(c *config.Config) { rankMajor(c); c.DispatchDtype = config.DtypeFP8E4M3 }},
			{128, func(c *config.Config) { rankMajor(c); backToBack(c) }},
			{128, func(c *config.Config) { c.DispatchTokens = 64 }},
			{128, func(c *config.Config) { c.DispatchTokens = 5 }},
			{128, func(c *config.Config) { c.NonUniform = true }},
			{128, func(c *config.Config) { rankMajor(c); c.NonUniform = true }},
			{32, func(c *config.Config) { c.NonUniform, c.Protocol = true, config.ProtocolFenced }},
			{2, func(c *config.Config) { rankMajor(c); c.NonUniform = true }},
			{128, func(c *config.Config) { c.MaxNumSMs = 20 }},
		} {
			cfg := testConfig()
			cfg.Tokens, cfg.Validate, cfg.Warmup, cfg.Iters = c.tokens, true, 2, 10
			if c.edit != nil {
				c.edit(cfg)
			}
			res, err := bench.Benchmark(w, cfg, open, 0)
			if err != nil {
				return fmt.Errorf("%d tokens: %w", c.tokens, err)
			}
			if res.Failed() || res.Validation == nil {
				return fmt.Errorf("%d tokens: validation %+v", c.tokens, res.Validation)
			}
			if res.Summary.Kernel == nil {
				return fmt.Errorf("%d tokens: no kernel times: %s", c.tokens, res.Summary.KernelNote)
			}
			if res.Memory == nil || len(res.Topology) < 2 || !strings.Contains(res.Topology[len(res.Topology)-1], "signalling: dispatch") {
				return fmt.Errorf("%d tokens: memory %v, topology %q", c.tokens, res.Memory, res.Topology)
			}
			if m := cfg.MaxNumSMs; m > 0 && !strings.Contains(res.Topology[len(res.Topology)-1], fmt.Sprintf("kernels: %d blocks", m)) {
				return fmt.Errorf("-S %d: topology %q", m, res.Topology)
			}
		}
		for _, args := range [][]string{{"-t", "1,2,4,64", "-V", "-w", "1", "-i", "4"}, {"-t", "1,16,64", "-L", "rm", "-N", "-V", "-w", "1", "-i", "4"}} {
			sw, err := config.ParseSweep(args, nil)
			if err != nil {
				return err
			}
			for _, c := range sw.Points {
				c.PTXDir = testConfig().PTXDir
			}
			out, err := bench.Sweep(w, sw, open, func(int, *report.Sweep, report.SweepPoint) error { return nil })
			if err != nil {
				return fmt.Errorf("sweep %q: %w", args, err)
			}
			for _, p := range out.Points {
				if p.Result.Failed() {
					return fmt.Errorf("sweep %q at %d tokens: validation failed", args, p.Tokens)
				}
			}
		}
		return nil
	})
}

// rankMajor makes a configuration use the rank-major layout.
func rankMajor(c *config.Config) { c.Layout = config.RankMajor }

// backToBack makes a configuration run its timed pairs back to back with
// jitter, every fifth validated in the stream.
func backToBack(c *config.Config) {
	c.BackToBack, c.JitterUs, c.ValidateEvery, c.Iters = true, 20, 5, 40
}

// The listing names every rank and its GPU.
func TestDevicesListsEveryRank(t *testing.T) {
	onGPU(t, func(w *bench.World, dev *Device) error {
		var out bytes.Buffer
		if err := (Hooks{}).Devices(w, &out); err != nil {
			return err
		}
		if w.Rank != 0 {
			return nil
		}
		s := out.String()
		if !strings.Contains(s, fmt.Sprintf("=== epbench devices (%d ranks) ===", w.Size)) {
			return fmt.Errorf("no header:\n%s", s)
		}
		for r := 0; r < w.Size; r++ {
			if !strings.Contains(s, fmt.Sprintf("rank %d (", r)) || !strings.Contains(s, dev.Info.Name) {
				return fmt.Errorf("rank %d or the GPU name missing:\n%s", r, s)
			}
		}
		return nil
	})
}
