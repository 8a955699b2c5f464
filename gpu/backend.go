package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"gorgonia.org/cu"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/ll"
)

// Backend is the CUDA implementation of bench.Backend for one rank: the
// buffers of its launch plan (kernels.Plan), the kernels of the plan's
// variants, and one stream.
type Backend struct {
	shape  ll.Shape // Tokens: the current count (SetTokens), at most the plan's
	cfg    *config.Config
	plan   *kernels.Plan
	dev    *Device
	stream Stream
	events [4]Event
	params *ParamBlock
	args   kernels.Args
	mem    memory

	modules map[kernels.Variant]kernelSet // loaded on first use
	cur     kernels.Launch                // the launch at the current token count (selectKernels)
	curD    Function                      // its entries
	curC    Function

	expectD, expectC uint64     // fenced calls so far: each source's arrival count
	callsD, callsC   uint64     // calls so far
	graphs           [2][]Graph // --cuda-graph: dispatch and combine of each routing, captured at first use
	traceGrids       [2][kernels.TraceCalls]int
}

// kernelSet is one variant's module and its entries.
type kernelSet struct {
	module  Module
	entries map[string]Function // by name: the variant's Entries()
}

// afterAlloc, when set (by tests), runs once the set-up has allocated its
// device memory; an error it returns fails the set-up there, to check that
// failed set-ups release everything.
var afterAlloc func() error

// NewBackend sets a rank up: its launch plan, the symmetric memory shared
// with every peer through t, the inputs of every routing, the outputs.
// nvlink: this rank sees every pair of the job's GPUs linked by NVLink (the
// ranks agree on it: the lines protocol is used only where all of them do).
// On error everything is released.
func NewBackend(dev *Device, g Gatherer, t Transport, shape ll.Shape, cfg *config.Config, nvlink bool) (*Backend, error) {
	b := &Backend{shape: shape, cfg: cfg, dev: dev, mem: memory{transport: t}, modules: map[kernels.Variant]kernelSet{}}
	if err := b.setup(g, nvlink); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) setup(g Gatherer, nvlink bool) error {
	cfg := b.cfg
	if cfg.CUDAGraph && os.Getenv(TraceEnv) != "" {
		return fmt.Errorf("%s does not work with --cuda-graph (a captured call cannot be given its own trace slot)", TraceEnv)
	}
	grid := b.dev.Info.SMs
	if cfg.NumBlocks > 0 {
		if err := cfg.CheckNumBlocks(b.dev.Info.SMs); err != nil {
			return err
		}
		grid = cfg.NumBlocks
	}
	// The ranks agree on both: the lines protocol only where every rank sees
	// NVLink, and one grid, since arrival counts are per block.
	agreed, err := allgatherInts(g, b01(nvlink), grid)
	if err != nil {
		return fmt.Errorf("agreeing on NVLink and the grid: %w", err)
	}
	for _, r := range agreed {
		nvlink = nvlink && r[0] == 1
		grid = min(grid, r[1])
	}
	if b.plan, err = kernels.NewPlan(kernels.Setup{Cfg: cfg, Ranks: b.shape.Ranks, NVLink: nvlink, Grid: grid,
		Trace: os.Getenv(TraceEnv) != ""}); err != nil {
		return err
	}
	need := b.plan.Memory()
	free, _, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("cuMemGetInfo: %w", err)
	}
	if need > free {
		return fmt.Errorf("this configuration needs %d MiB of GPU memory per rank, %d MiB are free", need>>20, free>>20)
	}

	if b.stream, err = NewStream(); err != nil {
		return err
	}
	for i := range b.events {
		if b.events[i], err = NewEvent(); err != nil {
			return err
		}
	}
	b.params = NewParamBlock(kernels.ArgsSize)
	if err := b.mem.allocate(b.plan, b.stream); err != nil {
		return err
	}
	b.graphs = [2][]Graph{make([]Graph, b.plan.Local.Routings), make([]Graph, b.plan.Local.Routings)}
	if afterAlloc != nil {
		if err := afterAlloc(); err != nil {
			return err
		}
	}
	if err := b.upload(b.shape.Tokens); err != nil {
		return err
	}

	s, m := b.shape, &b.mem
	b.args = kernels.Args{
		Peers: m.peers, Err: m.errw.Dev, X: m.x,
		RecvX: m.recvX, RecvCount: m.recvCount, SrcInfo: m.srcInfo, LayoutRange: m.layoutRange,
		RowPos: m.rowPos, Y: m.recvX, Out: m.out, RecvScales: m.recvScales,
		TimeoutNs: uint64(cfg.TimeoutMs) * 1_000_000,
		Clock:     m.clock,
		Rank:      int32(s.Rank), Ranks: int32(s.Ranks), Tokens: int32(s.Tokens), Hidden: int32(s.Hidden), TopK: int32(s.TopK),
		LocalExperts: int32(s.LocalExperts()),
	}
	b.plan.Sym.SetArgs(&b.args)
	if err := b.selectKernels(); err != nil { // also the variant's fields of b.args
		return err
	}
	// Peers must not start writing into this rank's memory before it is
	// zeroed: the caller barriers before the first operation.
	return b.stream.Sync()
}

// allgatherInts gathers a few integers of every rank.
func allgatherInts(g Gatherer, v ...int) ([][]int, error) {
	buf := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(x))
	}
	all, err := g.AllgatherBytes(buf)
	if err != nil {
		return nil, err
	}
	out := make([][]int, g.Size())
	for r := range out {
		out[r] = make([]int, len(v))
		for i := range v {
			out[r][i] = int(binary.LittleEndian.Uint64(all[8*(r*len(v)+i):]))
		}
	}
	return out, nil
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetTokens re-targets the set-up buffers, sized for the plan's tokens, at
// t ≤ that many tokens per rank (for sweeps): new inputs, same memory. Every
// rank must call it with the same t before the next operation.
func (b *Backend) SetTokens(t int) error {
	if t < 1 || t > b.plan.Cfg.Tokens {
		return fmt.Errorf("tokens %d outside the set-up's 1..%d", t, b.plan.Cfg.Tokens)
	}
	if err := b.stream.Sync(); err != nil {
		return err
	}
	if err := b.dropGraphs(); err != nil {
		return err
	}
	if err := b.upload(t); err != nil {
		return err
	}
	b.shape.Tokens = t
	b.args.Tokens = int32(t)
	if err := b.selectKernels(); err != nil { // the variant and grid may change with t
		return err
	}
	return b.stream.Sync()
}

// Name implements bench.Backend.
func (b *Backend) Name() string { return string(config.ComputeCUDA) }

// Close implements bench.Backend.
func (b *Backend) Close() error {
	var errs []error
	if b.stream.Live() {
		errs = append(errs, b.stream.Sync())
		b.printTrace()
	}
	errs = append(errs, b.dropGraphs(), b.mem.free())
	for i := range b.events {
		if b.events[i].Live() {
			errs = append(errs, b.events[i].Destroy())
		}
	}
	if b.stream.Live() {
		errs = append(errs, b.stream.Destroy())
	}
	for v, ks := range b.modules {
		if ks.module != 0 {
			errs = append(errs, ks.module.Unload())
		}
		delete(b.modules, v)
	}
	b.params.Free()
	return errors.Join(errs...)
}
