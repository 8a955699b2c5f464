package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/routing"
)

// poisonWord is two bf16 NaNs (0x7FC1): what validation finds where an
// operation did not write.
const poisonWord = 0x7FC17FC1

// kernelSet is one variant's module and its entries.
type kernelSet struct {
	module  Module
	entries map[string]Function // by name: the variant's Entries()
}

// TimeoutError is a kernel's bounded wait that expired.
type TimeoutError struct {
	Phase string // "dispatch" or "combine"
	Peer  int    // the rank that did not arrive
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: timed out waiting for rank %d", e.Phase, e.Peer)
}

// Backend is the CUDA implementation of bench.Backend for one rank.
type Backend struct {
	shape       bench.Shape
	cfg         *config.Config
	dev         *Device
	transport   Transport
	stream      Stream
	events      [4]Event
	modules     map[kernels.Variant]kernelSet // loaded on first use
	curVariant  kernels.Variant               // the variant at the current token count (selectKernels)
	curDispatch Function                      // its entries at that count (kernels.Variant.DispatchEntry)
	curCombine  Function
	curGrid     int // and its grid (config.Config.Grid)
	params      *ParamBlock
	args        kernels.Args
	grid        int
	capTokens   int
	nvlink      bool   // every pair of the job's GPUs is linked by NVLink (all ranks agree)
	expectD     uint64 // fenced calls so far: each source's arrival count
	expectC     uint64
	callsD      uint64 // calls so far
	callsC      uint64
	clock       uint64     // --cuda-graph: the kernels' device clock (kernels.ClockBytes), else 0
	graphs      [2][]Graph // --cuda-graph: dispatch and combine of each routing, captured at first use

	allocs []cu.DevicePtr
	errw   *MappedWord // the kernels' error word, read by the host without a copy
	x      uint64
	idx    []uint64 // per routing
	w      []uint64
	peers  uint64

	recvX, recvCount, srcInfo, layoutRange, rowPos, out uint64
	recvScales                                          uint64
	traceD, traceC                                      uint64             // phase stamps, when EPBENCH_TRACE is set
	traceGrids                                          [2][traceCalls]int // the grid of each traced call
	sizes                                               map[uint64]int64
}

// afterAlloc, when set (by tests), runs once the set-up has allocated its
// device memory; an error it returns fails the set-up there, to check that
// failed set-ups release everything.
var afterAlloc func() error

// Layout of the symmetric allocation.
type symLayout struct {
	dispatchSignal, combineSignal, dispatchRecv, dispatchCounts, combineRecv int64
	inlineDispatch, inlineCounts, inlineCombine                              int64 // sized for the inline protocol's tokens
	total                                                                    int64
}

func align(n, a int64) int64 { return (n + a - 1) / a * a }

// dispatchLines reports whether a dispatch of shape s uses the lines
// protocol: where the configuration picks it (config.Protocol.DispatchLines)
// and its messages fit the inline dispatch slots they use (kernels/ll.cuh).
func dispatchLines(cfg *config.Config, s bench.Shape, nvlink bool) bool {
	return cfg.Protocol.DispatchLines(s.Tokens, s.Hidden, cfg.DispatchDtype, nvlink) &&
		kernels.LinesSlotBytes(s.TopK, s.Hidden) <= kernels.InlineSlotBytes(s.TopK, s.Hidden)
}

// combineLines reports whether a combine of shape s sends its partial rows
// in the lines protocol (config.Protocol.CombineLines).
func combineLines(cfg *config.Config, s bench.Shape, nvlink bool) bool {
	return cfg.Protocol.CombineLines(s.Tokens, s.Hidden, nvlink)
}

// layoutFor lays out the symmetric memory of shape s under cfg (nvlink:
// whether the lines protocol may be used).
func layoutFor(s bench.Shape, cfg *config.Config, nvlink bool) symLayout {
	p := cfg.Protocol
	R, T, H, K := int64(s.Ranks), int64(s.Tokens), int64(s.Hidden), int64(s.TopK)
	TI := int64(min(s.Tokens, p.InlineUpTo(s.Hidden))) // the most tokens that use the inline protocol
	TD := TI                                           // the most tokens of an inline or lines dispatch
	if dispatchLines(cfg, s, nvlink) {
		TD = T
	}
	combine := max(TI*K, R*TI) * int64(kernels.InlineRowBytes(s.Hidden)) // inline combine rows
	// Lines rows: rank_local_reduce one per (rank, token), direct_send one per selection.
	if combineLines(cfg, s, nvlink) {
		combine = max(combine, max(R*T, T*K)*int64(kernels.LinesRowBytes(s.Hidden)))
	}
	var l symLayout
	l.dispatchSignal = 0
	// Each signal area: R arrival counters, then two ticket counters of
	// this rank's own blocks (kernels/ll.cu, last_ticket).
	l.combineSignal = align(8*(R+2), 256)
	l.dispatchRecv = l.combineSignal + align(8*(R+2), 256)
	l.dispatchCounts = l.dispatchRecv + align(R*T*int64(kernels.MessageBytes(s.TopK, s.Hidden)), 256)
	l.combineRecv = l.dispatchCounts + align(4*int64(s.Experts), 256)
	l.inlineDispatch = l.combineRecv + align(max(T*K, R*T)*H*2, 256)
	l.inlineCounts = l.inlineDispatch + align(R*TD*int64(kernels.InlineSlotBytes(s.TopK, s.Hidden)), 256)
	l.inlineCombine = l.inlineCounts + align(16*int64(s.Experts), 256)
	l.total = l.inlineCombine + align(combine, 256)
	return l
}

// MemoryNeeded is the device memory a rank needs for shape s under cfg
// (nvlink: whether the lines protocol may be used).
func MemoryNeeded(s bench.Shape, cfg *config.Config, nvlink bool) int64 {
	L, R, T, H, K := int64(s.LocalExperts()), int64(s.Ranks), int64(s.Tokens), int64(s.Hidden), int64(s.TopK)
	local := L*R*T*H*2 + L*R*T*(H/128)*4 + 4*L + 4*L*R*T + 8*L*R + 4*R*T*K + T*H*2 + T*H*2 + int64(cfg.Reroute)*(T*K*8+T*K*4)
	return layoutFor(s, cfg, nvlink).total + local + 8*R + 256 + kernels.ClockBytes
}

// NewBackend sets a rank up: module, symmetric memory shared with every
// peer, inputs of every routing, outputs. nvlink: this rank sees every pair
// of the job's GPUs linked by NVLink (the ranks agree on it: the lines
// protocol is used only where all of them do). On error everything is
// released.
func NewBackend(dev *Device, g Gatherer, t Transport, shape bench.Shape, cfg *config.Config, nvlink bool) (*Backend, error) {
	b := &Backend{shape: shape, cfg: cfg, dev: dev, transport: t, sizes: map[uint64]int64{}, capTokens: shape.Tokens, nvlink: nvlink}
	if err := b.setup(g); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) setup(g Gatherer) error {
	s, cfg := b.shape, b.cfg
	if s.TopK > 32 || s.Ranks > 256 {
		return fmt.Errorf("the kernels support top-k ≤ 32 and ≤ 256 ranks")
	}
	mine := 0
	if b.nvlink {
		mine = 1
	}
	links, err := allgatherInt(g, mine)
	if err != nil {
		return err
	}
	for _, l := range links {
		b.nvlink = b.nvlink && l == 1
	}
	if cfg.Protocol == config.ProtocolLines && !b.nvlink {
		return fmt.Errorf("--protocol lines needs NVLink between every pair of GPUs (a 128-byte line is delivered whole only over NVLink)")
	}
	if cfg.CUDAGraph && os.Getenv(TraceEnv) != "" {
		return fmt.Errorf("%s does not work with --cuda-graph (a captured call cannot be given its own trace slot)", TraceEnv)
	}
	need := MemoryNeeded(s, cfg, b.nvlink)
	free, _, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("cuMemGetInfo: %w", err)
	}
	if need > free {
		return fmt.Errorf("this configuration needs %d MiB of GPU memory per rank, %d MiB are free", need>>20, free>>20)
	}
	b.grid = b.dev.Info.SMs
	if cfg.NumBlocks > 0 {
		if err := cfg.CheckNumBlocks(b.dev.Info.SMs); err != nil {
			return err
		}
		b.grid = cfg.NumBlocks
	}
	// Every rank must launch the same grid: arrival counts are per block.
	grids, err := allgatherInt(g, b.grid)
	if err != nil {
		return fmt.Errorf("exchanging grid sizes: %w", err)
	}
	for _, v := range grids {
		b.grid = min(b.grid, v)
	}

	b.modules = map[kernels.Variant]kernelSet{}
	if b.stream, err = NewStream(); err != nil {
		return err
	}
	for i := range b.events {
		if b.events[i], err = NewEvent(); err != nil {
			return err
		}
	}
	b.params = NewParamBlock(kernels.ArgsSize)

	lay := layoutFor(s, cfg, b.nvlink)
	local, peers, err := b.transport.Alloc(lay.total)
	if err != nil {
		return err
	}
	if err := MemsetD32Async(local, 0, int(lay.total/4), b.stream); err != nil {
		return err
	}
	if err := b.stream.Sync(); err != nil {
		return err
	}

	L, R, T, H, K := s.LocalExperts(), s.Ranks, s.Tokens, s.Hidden, s.TopK
	alloc := func(n int64) (uint64, error) {
		p, err := cu.MemAlloc(max(n, 4))
		if err != nil {
			return 0, fmt.Errorf("cuMemAlloc(%d): %w", n, err)
		}
		b.allocs = append(b.allocs, p)
		b.sizes[uint64(p)] = max(n, 4)
		return uint64(p), nil
	}
	var allocErr error
	must := func(n int64) uint64 {
		if allocErr != nil {
			return 0
		}
		p, err := alloc(n)
		allocErr = err
		return p
	}
	b.peers = must(int64(8 * R))
	if b.errw, err = NewMappedWord(); err != nil {
		return err
	}
	b.x = must(int64(T * H * 2))
	b.recvX = must(int64(L) * int64(R*T) * int64(H) * 2)
	b.recvCount = must(int64(4 * L))
	b.srcInfo = must(int64(4 * L * R * T))
	b.layoutRange = must(int64(8 * L * R))
	b.rowPos = must(int64(4 * R * T * K))
	b.out = must(int64(T * H * 2))
	b.recvScales = must(int64(L) * int64(R*T) * int64(H/128) * 4)
	for j := 0; j < cfg.Reroute; j++ {
		b.idx = append(b.idx, must(int64(T*K*8)))
		b.w = append(b.w, must(int64(T*K*4)))
	}
	b.graphs = [2][]Graph{make([]Graph, cfg.Reroute), make([]Graph, cfg.Reroute)}
	if afterAlloc != nil {
		if err := afterAlloc(); err != nil {
			return err
		}
	}
	if cfg.CUDAGraph {
		b.clock = must(kernels.ClockBytes)
	}
	if os.Getenv(TraceEnv) != "" {
		b.traceD = must(int64(traceCalls * b.traceSlot()))
		b.traceC = must(int64(traceCalls * b.traceSlot()))
	}
	if allocErr != nil {
		return allocErr
	}

	if err := b.upload(T); err != nil {
		return err
	}
	if b.clock != 0 {
		if err := MemsetD32Async(b.clock, 0, kernels.ClockBytes/4, b.stream); err != nil {
			return err
		}
	}
	pb := make([]byte, 8*R)
	for r, p := range peers {
		binary.LittleEndian.PutUint64(pb[8*r:], p)
	}
	if err := CopyToDevice(b.peers, pb, b.stream); err != nil {
		return err
	}

	b.args = kernels.Args{
		Peers: b.peers, Err: b.errw.Dev, X: b.x,
		RecvX: b.recvX, RecvCount: b.recvCount, SrcInfo: b.srcInfo, LayoutRange: b.layoutRange,
		RowPos: b.rowPos, Y: b.recvX, Out: b.out, RecvScales: b.recvScales,
		OffDispatchSignal: uint64(lay.dispatchSignal), OffCombineSignal: uint64(lay.combineSignal),
		OffDispatchRecv: uint64(lay.dispatchRecv), OffCombineRecv: uint64(lay.combineRecv),
		OffDispatchCounts: uint64(lay.dispatchCounts),
		OffInlineDispatch: uint64(lay.inlineDispatch), OffInlineCounts: uint64(lay.inlineCounts),
		OffInlineCombine: uint64(lay.inlineCombine),
		TimeoutNs:        uint64(cfg.TimeoutMs) * 1_000_000,
		Clock:            b.clock,
		Rank:             int32(s.Rank), Ranks: int32(R), Tokens: int32(T), Hidden: int32(H), TopK: int32(K),
		LocalExperts: int32(L),
	}
	if err := b.selectKernels(); err != nil { // also the variant's fields of b.args
		return err
	}
	// Peers must not start writing into this rank's memory before it is
	// zeroed: the caller barriers before the first operation.
	return b.stream.Sync()
}

func allgatherInt(g Gatherer, v int) ([]int, error) {
	buf := make([]byte, 8)
	binary.LittleEndian.PutUint64(buf, uint64(v))
	all, err := g.AllgatherBytes(buf)
	if err != nil {
		return nil, err
	}
	out := make([]int, g.Size())
	for i := range out {
		out[i] = int(binary.LittleEndian.Uint64(all[8*i:]))
	}
	return out, nil
}

// upload writes the inputs for t tokens: token rows and weights as ep_bench
// makes them, one routing per j.
func (b *Backend) upload(t int) error {
	s, cfg := b.shape, b.cfg
	rows, err := routing.TokenRows(s.Rank, t, s.Hidden)
	if err != nil {
		return err
	}
	if err := CopyToDevice(b.x, u16bytes(rows), b.stream); err != nil {
		return err
	}
	weights, err := routing.Weights(s.Rank, t, s.TopK)
	if err != nil {
		return err
	}
	for j := range b.idx {
		idx, err := routing.TopK(t, s.Experts, s.TopK, routing.GenSeed(cfg.Seed, s.Rank, s.Ranks, j))
		if err != nil {
			return err
		}
		if err := CopyToDevice(b.idx[j], i64bytes(idx), b.stream); err != nil {
			return err
		}
		if err := CopyToDevice(b.w[j], f32bytes(weights), b.stream); err != nil {
			return err
		}
	}
	return nil
}

// SetTokens re-targets the set-up buffers, sized for the shape's tokens, at
// t ≤ that many tokens per rank (for sweeps): new inputs, same memory. Every
// rank must call it with the same t before the next operation.
func (b *Backend) SetTokens(t int) error {
	if t < 1 || t > b.capTokens {
		return fmt.Errorf("tokens %d outside the set-up's 1..%d", t, b.capTokens)
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
func (b *Backend) Name() string { return "cuda" }

// Graphs reports whether the operations run as CUDA graphs (--cuda-graph).
func (b *Backend) Graphs() bool { return b.clock != 0 }

// Grid is the number of blocks each kernel launches at the current token
// count.
func (b *Backend) Grid() int { return b.curGrid }

// variant is the kernel variant of the operations at the current token
// count: their signalling, dispatch dtype and combine mode.
func (b *Backend) variant() (kernels.Variant, error) {
	return kernels.Choose(b.cfg.Protocol.Inline(b.shape.Tokens, b.shape.Hidden),
		dispatchLines(b.cfg, b.shape, b.nvlink), combineLines(b.cfg, b.shape, b.nvlink),
		b.cfg.DispatchDtype == config.DtypeFP8E4M3, b.cfg.CombineMode == config.DirectSend)
}

// selectKernels makes b.curVariant the variant of the current token count, with
// its entries and grid, and sets the variant's fields of b.args, loading
// its module (a JIT compile of its PTX) the first time. Called at set-up
// and whenever the token count changes, so a launch only reads what it set.
func (b *Backend) selectKernels() error {
	v, err := b.variant()
	if err != nil {
		return err
	}
	ks, ok := b.modules[v]
	if !ok {
		ptx, err := kernels.PTX(b.cfg.PTXDir, v)
		if err != nil {
			return err
		}
		if ks.module, err = LoadModule(ptx); err != nil {
			return fmt.Errorf("loading the LL kernels (%s): %w", v.Module(), err)
		}
		ks.entries = map[string]Function{}
		for _, name := range v.Entries() {
			f, err := ks.module.Function(name)
			if err != nil {
				return errors.Join(fmt.Errorf("%s: %w", v.Module(), err), ks.module.Unload())
			}
			ks.entries[name] = f
		}
		b.modules[v] = ks
	}
	b.curVariant = v
	b.curDispatch = ks.entries[v.DispatchEntry(b.shape.Tokens)]
	b.curCombine = ks.entries[kernels.CombineKernel]
	b.curGrid = b.cfg.Grid(b.grid, b.shape.Tokens)
	v.SetArgs(&b.args)
	return nil
}

// Protocols names how dispatch and combine signal at the current token
// count: inline, fenced, or lines.
func (b *Backend) Protocols() (dispatch, combine string) {
	return kernels.ProtoNames[b.curVariant.Dispatch], kernels.ProtoNames[b.curVariant.Combine]
}

// launch runs one operation with routing j. With the fenced protocol every
// source makes one release per call on each rank's arrival counter, so after
// the n-th fenced call the kernel waits for n from every source; inline and
// lines calls carry their own flags and do not touch the counters. With
// --cuda-graph the kernels keep that count and the epoch on the device
// (kernels.ClockBytes), so each (operation, routing) is captured once, at
// its first call, and its graph launched from then on.
func (b *Backend) launch(op int, j int, expect *uint64) error {
	if j < 0 || j >= len(b.idx) {
		return fmt.Errorf("routing %d of %d", j, len(b.idx))
	}
	v := b.curVariant
	f := b.curDispatch
	if op == 1 {
		f = b.curCombine
	}
	if (op == 0 && v.Dispatch == kernels.ProtoFenced) || (op == 1 && v.Combine == kernels.ProtoFenced) {
		*expect++
	}
	if b.clock != 0 && b.graphs[op][j] != 0 {
		return b.graphs[op][j].Launch(b.stream)
	}
	b.args.TopkIdx, b.args.TopkW = b.idx[j], b.w[j]
	b.args.Expect = *expect
	b.args.Put(b.params.Bytes())
	smem := 0
	if op == 0 {
		smem = kernels.DispatchSharedBytes(b.shape.Experts)
	}
	if b.clock == 0 {
		return f.Launch(b.curGrid, kernels.ThreadsPerBlock, smem, b.stream, b.params)
	}
	g, err := f.Capture(b.curGrid, kernels.ThreadsPerBlock, smem, b.stream, b.params)
	if err != nil {
		return err
	}
	b.graphs[op][j] = g
	return g.Launch(b.stream)
}

// dropGraphs releases the captured graphs (their arguments are out of date).
func (b *Backend) dropGraphs() error {
	var errs []error
	for op := range b.graphs {
		for j, g := range b.graphs[op] {
			if g != 0 {
				errs = append(errs, g.Destroy())
				b.graphs[op][j] = 0
			}
		}
	}
	return errors.Join(errs...)
}

// Dispatch implements bench.Backend.
func (b *Backend) Dispatch(j int) error {
	b.args.Epoch++
	b.args.Trace = b.traceAt(b.traceD, b.callsD)
	b.traceGrids[0][b.callsD%traceCalls] = b.curGrid
	b.callsD++
	return b.launch(0, j, &b.expectD)
}

// Combine implements bench.Backend.
func (b *Backend) Combine(j int) error {
	b.args.Trace = b.traceAt(b.traceC, b.callsC)
	b.traceGrids[1][b.callsC%traceCalls] = b.curGrid
	b.callsC++
	return b.launch(1, j, &b.expectC)
}

// Sync implements bench.Backend: it waits for the stream and reports a
// kernel's expired wait as a *TimeoutError.
func (b *Backend) Sync() error {
	if err := b.stream.Sync(); err != nil {
		return err
	}
	if w := b.errw.Load(); w != 0 {
		if w>>24 == kernels.PhaseVariant {
			return fmt.Errorf("a kernel was launched with arguments of another variant than its module's (an epbench defect)")
		}
		phase := "dispatch"
		if w>>24 == 2 {
			phase = "combine"
		}
		return &TimeoutError{Phase: phase, Peer: int(w&0xFFFFFF) - 1}
	}
	return nil
}

// Mark implements bench.Backend.
func (b *Backend) Mark(i int) error { return b.events[i].Record(b.stream) }

// ElapsedUs implements bench.Backend.
func (b *Backend) ElapsedUs(from, to int) (float64, error) {
	return ElapsedUs(b.events[from], b.events[to])
}

// Poison implements bench.Backend.
func (b *Backend) Poison() error {
	for _, p := range []uint64{b.recvX, b.recvCount, b.srcInfo, b.layoutRange, b.out, b.recvScales} {
		if err := MemsetD32Async(p, poisonWord, int(b.sizes[p]/4), b.stream); err != nil {
			return err
		}
	}
	return b.stream.Sync()
}

// Outputs implements bench.Backend.
func (b *Backend) Outputs() (*bench.Outputs, error) {
	s := b.shape
	L, R, T, H := s.LocalExperts(), s.Ranks, s.Tokens, s.Hidden
	rows := L * R * T
	o := &bench.Outputs{
		RecvCount:   make([]int32, L),
		SrcInfo:     make([]int32, rows),
		LayoutRange: make([]int64, L*R),
		Out:         make([]uint16, T*H),
	}
	type span struct {
		dst []byte
		src uint64
	}
	copies := []span{
		{i32bytes(o.RecvCount), b.recvCount},
		{i32bytes(o.SrcInfo), b.srcInfo},
		{i64bytes(o.LayoutRange), b.layoutRange},
		{u16bytes(o.Out), b.out},
	}
	if b.args.FP8 != 0 {
		o.RecvFP8 = make([]uint8, rows*H)
		o.RecvScales = make([]float32, rows*(H/128))
		copies = append(copies, span{o.RecvFP8, b.recvX}, span{f32bytes(o.RecvScales), b.recvScales})
	} else {
		o.RecvX = make([]uint16, rows*H)
		copies = append(copies, span{u16bytes(o.RecvX), b.recvX})
	}
	for _, c := range copies {
		if err := CopyFromDevice(c.dst, c.src); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Close implements bench.Backend.
func (b *Backend) Close() error {
	var errs []error
	if b.stream != 0 {
		errs = append(errs, b.stream.Sync())
		b.printTrace()
	}
	errs = append(errs, b.dropGraphs())
	for _, p := range b.allocs {
		errs = append(errs, cu.MemFree(p))
	}
	b.allocs = nil
	if b.errw != nil {
		errs = append(errs, b.errw.Free())
		b.errw = nil
	}
	if b.transport != nil {
		errs = append(errs, b.transport.Close())
	}
	for i, e := range b.events {
		if e != 0 {
			errs = append(errs, e.Destroy())
			b.events[i] = 0
		}
	}
	if b.stream != 0 {
		errs = append(errs, b.stream.Destroy())
		b.stream = 0
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

func u16bytes(s []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}
func i32bytes(s []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
func i64bytes(s []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}
func f32bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// PeerTimeout marks the error as a peer that did not arrive (exit code 4).
func (e *TimeoutError) PeerTimeout() bool { return true }
