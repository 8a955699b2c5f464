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
	shape   ll.Shape // Tokens and Counts: the current ones (SetShape), at most the plan's
	cfg     *config.Config
	plan    *kernels.Plan
	dev     *Device
	stream  Stream
	events  []Event // the timed loop's marks (Marks)
	params  *ParamBlock
	args    kernels.Args
	mem     memory
	sharing Sharing
	stalled error // a GIN build's kernel still ran after its bound (waitGIN): it never ends

	modules map[kernels.Variant]kernelSet // loaded on first use
	cur     kernels.Launch                // the launch at the current token count (selectKernels)
	curD    Function                      // its entries
	curC    Function

	expectD, expectC uint64     // fenced calls so far: each source's arrival count
	callsD, callsC   uint64     // calls so far
	graphs           [2][]Graph // --cuda-graph: dispatch and combine of each routing and row set (graphIndex), captured at first use
	traceGrids       [2][kernels.TraceCalls]int

	stage    genRows     // a validated pair's token rows on their way (Generation)
	snaps    [2]snapshot // outputs on their way to the host (Snapshot)
	nextSnap int
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

// Sharing is how the ranks of a job use the GPUs: the grid a rank's kernels
// launch, and whether the lines protocol is verified for every pair of them.
type Sharing struct {
	// Ranks is how many ranks share this rank's GPU (1: it has its own).
	Ranks int
	// LinesVerified: a 128-byte line stored by one warp instruction arrives
	// whole between every pair of ranks (kernels.Setup).
	LinesVerified bool
}

// NewBackend sets a rank up: its launch plan, the symmetric memory shared
// with every peer through t, the inputs of every routing, the outputs. On
// error everything is released.
func NewBackend(dev *Device, g Gatherer, t Transport, shape ll.Shape, cfg *config.Config, sh Sharing) (*Backend, error) {
	b := &Backend{shape: shape, cfg: cfg, dev: dev, mem: memory{transport: t}, modules: map[kernels.Variant]kernelSet{},
		sharing: sh}
	if sh.Ranks < 1 {
		b.sharing.Ranks = 1
	}
	if err := b.setup(g, b.sharing); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) setup(g Gatherer, sh Sharing) error {
	cfg := b.cfg
	if cfg.CUDAGraph && os.Getenv(TraceEnv) != "" {
		return fmt.Errorf("%s does not work with --cuda-graph (a captured call cannot be given its own trace slot)", TraceEnv)
	}
	grid, err := b.gridFor(sh.Ranks)
	if err != nil {
		return err
	}
	// The ranks agree on both: the lines protocol only where every rank has
	// it verified, and one grid, since arrival counts are per block.
	agreed, err := allgatherInts(g, b01(sh.LinesVerified), grid)
	if err != nil {
		return fmt.Errorf("agreeing on the protocols and the grid: %w", err)
	}
	lines := sh.LinesVerified
	for _, r := range agreed {
		lines = lines && r[0] == 1
		grid = min(grid, r[1])
	}
	// -n: every peer through GIN (config's checks made sure of the NCCL
	// transport and of more than one rank). Without it, GIN for the peers
	// outside the NVLink domain, where NCCL says there are such.
	gin := cfg.DisableNVLink
	if t, ok := b.mem.transport.(GINTransport); ok && !gin {
		if gin, err = t.OutsideLSA(); err != nil {
			return err
		}
	}
	if b.plan, err = kernels.NewPlan(kernels.Setup{Cfg: cfg, Ranks: b.shape.Ranks, LinesVerified: lines, Grid: grid,
		Trace: os.Getenv(TraceEnv) != "", GIN: gin}); err != nil {
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
	if err := b.Marks(4); err != nil {
		return err
	}
	b.params = NewParamBlock(kernels.ArgsSize)
	if err := b.mem.allocate(b.plan, b.stream, b.shape.Rank); err != nil {
		return err
	}
	b.graphs = [2][]Graph{make([]Graph, 2*b.plan.Local.Routings), make([]Graph, 2*b.plan.Local.Routings)}
	if afterAlloc != nil {
		if err := afterAlloc(); err != nil {
			return err
		}
	}
	if err := b.upload(b.shape); err != nil {
		return err
	}

	s, m := b.shape, &b.mem
	b.args = kernels.Args{
		Peers: m.peers, Err: m.errw.Dev, X: m.x,
		RecvX: m.recvX, RecvCount: m.recvCount, SrcInfo: m.srcInfo, LayoutRange: m.layoutRange,
		RowPos: m.rowPos, Y: m.recvX, Out: m.out, RecvScales: m.recvScales,
		RecvTopkIdx: m.recvTopkIdx, RecvTopkW: m.recvTopkW, TokensOf: m.tokensOf, OwnTokens: int32(s.Own()),
		TimeoutNs: uint64(cfg.TimeoutMs) * 1_000_000,
		Clock:     m.clock,
		JitterNs:  uint64(cfg.JitterUs) * 1000,
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

// gridFor is the grid of a launch: --num-blocks, or the GPU's SMs divided
// among the ranks that share it, so that all their blocks can be resident
// at once (selectKernels checks that they can), at most -S/--max-num-sms.
func (b *Backend) gridFor(sharers int) (int, error) {
	sms := b.dev.Info.SMs
	if b.cfg.NumBlocks == 0 {
		grid := max(1, sms/sharers)
		if b.cfg.MaxNumSMs > 0 {
			grid = min(grid, b.cfg.MaxNumSMs)
		}
		return grid, nil
	}
	if err := b.cfg.CheckNumBlocks(sms); err != nil {
		return 0, err
	}
	return b.cfg.NumBlocks, nil
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

// SetShape re-targets the set-up buffers, sized for the plan's tokens, at
// shape s of at most that many tokens per rank (for sweeps): new inputs,
// same memory. Only the shape's Tokens and Counts may differ from the
// set-up's. Every rank must call it with the same shape before the next
// operation.
func (b *Backend) SetShape(s ll.Shape) error {
	t, was := s.Tokens, b.shape
	switch {
	case t < 1 || t > b.plan.Cfg.Tokens:
		return fmt.Errorf("tokens %d outside the set-up's 1..%d", t, b.plan.Cfg.Tokens)
	case s.Ranks != was.Ranks || s.Rank != was.Rank || s.Hidden != was.Hidden || s.TopK != was.TopK ||
		s.Experts != was.Experts || s.RankMajor != was.RankMajor || (s.Counts == nil) != (was.Counts == nil):
		return fmt.Errorf("gpu: a new shape may change only the tokens per rank (%+v, set up for %+v)", s, was)
	case s.Counts != nil && len(s.Counts) != s.Ranks:
		return fmt.Errorf("gpu: %d token counts for %d ranks", len(s.Counts), s.Ranks)
	}
	if err := b.stream.Sync(); err != nil {
		return err
	}
	if err := b.dropGraphs(); err != nil {
		return err
	}
	if err := b.upload(s); err != nil {
		return err
	}
	b.shape = s
	b.args.Tokens, b.args.OwnTokens = int32(t), int32(s.Own())
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
	if b.stream.Live() && b.plan != nil && b.plan.GIN {
		// A kernel held in NCCL's unbounded GIN waits never ends, and after
		// a failed one freeing may wait in NCCL: then the rest is left to
		// the process's exit, which the driver cleans up.
		if err := b.waitGIN(); err != nil {
			return err
		}
	}
	if b.stream.Live() {
		errs = append(errs, b.stream.Sync())
		b.printTrace()
	}
	errs = append(errs, b.dropGraphs(), b.mem.free(), b.freeValidation())
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
