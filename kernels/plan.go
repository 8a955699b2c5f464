package kernels

import (
	"fmt"

	"github.com/epbench/epbench/config"
)

// InlineMaxBytes is the most row bytes per rank (tokens × hidden × 2) for
// which the automatic protocol picks inline. Measured on 2 H200s
// (docs/PERF.md): at one token of 7168 channels inline saves about 1 us per
// operation; at 8 tokens and more its doubled bytes and polling cost as
// much or more, so auto keeps it to one or two tokens.
const InlineMaxBytes = 32 << 10

// InlineBlocksPerToken is the automatic grid of an inline operation: 16
// blocks per token. At one token, 16 blocks measured 0.2-0.4 us faster per
// kernel than one per SM on one H200, and 8 blocks ~0.5 us faster at EP2
// with earlier kernels (docs/PERF.md, kernels v16); the rows of so few
// tokens still leave from 16 SMs per token.
const InlineBlocksPerToken = 16

// MaxTopK and MaxRanks are the largest top-k and rank count the kernels
// take (kMaxTopK and kMaxRanks in ll.cuh).
const (
	MaxTopK  = 32
	MaxRanks = 256
)

// LinesVerifiedCC is the compute capability whose NVLink delivery of a
// 128-byte line stored by one warp instruction epbench has measured whole
// (H100/H200, docs/PERF.md).
const LinesVerifiedCC = "9.0"

// TraceCalls is how many calls of each kernel keep their phase stamps
// (EPBENCH_TRACE): the stamp buffers are used in turn.
const TraceCalls = 64

// Setup is what a launch plan is computed from: the configuration (its
// shape, with Tokens the most tokens per rank the buffers hold, the tokens
// each rank dispatches (-l, -N), layout, dispatch dtype, combine mode,
// protocol, --num-blocks, --reroute, --cuda-graph) and what the job's set-up
// found.
type Setup struct {
	Cfg   *config.Config
	Ranks int
	// LinesVerified: every pair of the job's ranks delivers a 128-byte line
	// whole, as verified (the ranks agree on it): they share one GPU, or
	// NVLink links GPUs of a compute capability epbench has measured
	// (LinesVerifiedCC). Only then may the lines protocol be used.
	LinesVerified bool
	// Grid is the blocks of a launch: --num-blocks, or one per SM, the
	// smallest over the ranks (arrival counts are per block).
	Grid int
	// Trace: buffers for the kernels' phase stamps (EPBENCH_TRACE).
	Trace bool
	// GIN: some peers are reached through NCCL GIN (the NCCL transport
	// with -n, or peers outside the NVLink domain): every operation runs
	// the GIN build of the fenced protocols (Variant.GIN), and the
	// symmetric allocation holds a mirror of the buffer per rank
	// (SymBytes).
	GIN bool
}

// Plan is everything a rank allocates and launches for a Setup, computed
// once: the symmetric buffer's areas, every local buffer's size, and per
// token count the variant, entries, grid and shared memory of each launch
// (Launch). The GPU backend allocates and launches from it.
type Plan struct {
	Setup
	Sym   SymLayout
	Local LocalSizes
}

// Area is a part of the symmetric buffer: its offset and size in bytes.
type Area struct{ Off, Size int64 }

// SymLayout is the symmetric buffer every rank allocates and its peers map
// (the off_* fields of LLArgs in ll.cuh).
type SymLayout struct {
	DispatchSignal Area // uint64 [R] arrival counters per source, then the ticket counter of this rank's blocks
	CombineSignal  Area
	DispatchRecv   Area // [2, R, T] dispatch messages (header + row), a half per call parity
	DispatchCounts Area // int2 [2, E]: {selections of each local expert per source rank, epoch}
	CombineRecv    Area // [max(T*K, R*T), H] bf16 combine rows
	InlineDispatch Area // inline and lines dispatch slots, [2, R, TD]
	InlineCounts   Area // inline and lines per-expert counts, [2, E] units of 16 bytes
	InlineCombine  Area // inline combine rows, or lines rows
	Total          int64
}

// LocalSizes are the bytes of every local device buffer of a rank; zero
// where the set-up has none.
type LocalSizes struct {
	Peers          int64 // [R] every rank's symmetric base as mapped here
	X              int64 // [T, H] bf16 token rows
	XGen           int64 // [T, H] bf16 token rows of a validated pair's generation
	RecvX          int64 // [L, R*T, H] bf16 (FP8: E4M3 bytes in the same space); rank-major [R*T, H]
	RecvCount      int64 // [L] int32; rank-major [R]
	SrcInfo        int64 // [L, R*T] int32; rank-major [R*T]
	RecvTopkIdx    int64 // rank-major: [R*T, K] int32
	RecvTopkW      int64 // rank-major: [R*T, K] float32
	TokensOf       int64 // [R] int32, the tokens each rank dispatches, where they differ from Tokens (-l, -N)
	Active         int64 // [R] int32, the mask of active ranks (-T)
	LayoutRange    int64 // [L, R] int64
	RowPos         int64 // [R, T, K] int32
	Out            int64 // [T, H] bf16
	RecvScales     int64 // [L, R*T, H/128] float32
	TopkIdx, TopkW int64 // each routing's [T, K] int64 and float32
	Routings       int
	Clock          int64 // the device clock (--cuda-graph)
	Trace          int64 // each kernel's phase stamps of TraceCalls calls (EPBENCH_TRACE)
}

// Total is the sum of the local buffers.
func (l LocalSizes) Total() int64 {
	return l.Peers + l.X + l.XGen + l.RecvX + l.RecvCount + l.SrcInfo + l.LayoutRange + l.RowPos + l.Out + l.RecvScales +
		l.RecvTopkIdx + l.RecvTopkW + l.TokensOf + l.Active + int64(l.Routings)*(l.TopkIdx+l.TopkW) + l.Clock + 2*l.Trace
}

// NewPlan computes the plan of s. It refuses what the kernels cannot run.
func NewPlan(s Setup) (*Plan, error) {
	c := s.Cfg
	switch {
	case c == nil:
		return nil, fmt.Errorf("kernels: a plan needs a configuration")
	case c.TopK > MaxTopK || s.Ranks > MaxRanks:
		return nil, fmt.Errorf("the kernels support top-k ≤ %d and ≤ %d ranks", MaxTopK, MaxRanks)
	case s.Ranks < 1 || c.Experts%s.Ranks != 0 || c.Tokens < 1 || c.Hidden < 1:
		return nil, fmt.Errorf("kernels: no plan for %d ranks, %d experts, %d tokens, hidden %d", s.Ranks, c.Experts, c.Tokens, c.Hidden)
	case s.Grid < 1:
		return nil, fmt.Errorf("kernels: a grid of %d blocks", s.Grid)
	}
	if err := c.CombineLayoutError(); err != nil {
		return nil, err
	}
	if flag, why := c.GINUnsupported(); s.GIN && why != "" {
		return nil, &config.UsageError{Flag: flag, Why: "peers reached through NCCL's GIN (-n, or ranks outside the NVLink domain): " + why}
	}
	if c.Protocol == config.ProtocolLines && !s.LinesVerified {
		return nil, &config.UsageError{Flag: "--protocol", Why: "lines is verified only for ranks sharing one GPU or on GPUs of compute capability " +
			LinesVerifiedCC + " linked by NVLink (a 128-byte line must arrive whole); use auto, fenced or inline"}
	}
	p := &Plan{Setup: s}
	p.layout()
	R, T, H, K, L := int64(s.Ranks), int64(c.Tokens), int64(c.Hidden), int64(c.TopK), int64(c.Experts/s.Ranks)
	routings := max(c.Reroute, 1)
	p.Local = LocalSizes{
		Peers: 8 * R, X: T * H * 2, XGen: T * H * 2,
		RecvX: L * R * T * H * 2, RecvCount: 4 * max(L, R), SrcInfo: 4 * L * R * T, LayoutRange: 8 * L * R,
		RowPos: 4 * R * T * K, Out: T * H * 2, RecvScales: L * R * T * (H / 128) * 4,
		TopkIdx: T * K * 8, TopkW: T * K * 4, Routings: routings,
	}
	if p.RankMajor() {
		p.Local.RecvX, p.Local.RecvScales = R*T*H*2, R*T*(H/128)*4
		p.Local.SrcInfo, p.Local.LayoutRange = 4*R*T, 0
		p.Local.RecvTopkIdx, p.Local.RecvTopkW = 4*R*T*K, 4*R*T*K
	}
	if c.RankTokens(s.Ranks) != nil {
		p.Local.TokensOf = 4 * R
	}
	if c.MaskTest {
		p.Local.Active = 4 * R
	}
	if c.CUDAGraph {
		p.Local.Clock = ClockBytes
	}
	if s.Trace {
		p.Local.Trace = TraceCalls * p.TraceBytes()
	}
	return p, nil
}

// RankMajor reports whether the dispatch output is rank-major (-L rm).
func (p *Plan) RankMajor() bool { return p.Cfg.Layout == config.RankMajor }

// SymBytes is the symmetric allocation of every rank: the buffer (Sym), and
// with GIN a mirror of it per rank after it (ll_gin.cuh: rank q's at
// (q + 1) × Sym.Total), where the kernels write what goes to a GIN peer.
func (p *Plan) SymBytes() int64 {
	if p.GIN {
		return p.Sym.Total * int64(p.Ranks+1)
	}
	return p.Sym.Total
}

// Memory is the device memory the plan allocates.
func (p *Plan) Memory() int64 { return p.SymBytes() + p.Local.Total() }

// TraceBytes is the phase stamps of one call of a kernel (the largest grid).
func (p *Plan) TraceBytes() int64 { return int64(p.Grid) * TracePoints * 8 }

// fencedOnly: peers through GIN take the GIN build, of the fenced
// protocols only, whatever the links deliver (an explicit --protocol lines
// or inline is refused with GIN by NewPlan and config).
func (p *Plan) fencedOnly() bool { return p.GIN }

// inlineUpTo is the most tokens per rank that use the inline protocol (0:
// none): up to config.InlineMaxTokens with --protocol inline; with auto,
// up to InlineMaxBytes of rows.
func (p *Plan) inlineUpTo() int {
	if p.fencedOnly() {
		return 0
	}
	switch p.Cfg.Protocol {
	case config.ProtocolInline:
		return config.InlineMaxTokens
	case config.ProtocolAuto:
		return min(InlineMaxBytes/(2*p.Cfg.Hidden), config.InlineMaxTokens)
	}
	return 0
}

// Inline reports whether operations of `tokens` tokens use the inline
// protocol.
func (p *Plan) Inline(tokens int) bool { return tokens <= p.inlineUpTo() }

// DispatchLines reports whether a dispatch of `tokens` tokens sends its
// messages in lines: only where lines are verified, above the inline size, with
// --protocol lines or, with auto, for a BF16 dispatch (an FP8 sender
// quantises word by word and measured slower in lines, docs/PERF.md); and
// only where a lines message fits the inline dispatch slot it uses.
func (p *Plan) DispatchLines(tokens int) bool {
	c := p.Cfg
	if p.fencedOnly() || !p.LinesVerified || p.Inline(tokens) || LinesSlotBytes(c.TopK, c.Hidden) > InlineSlotBytes(c.TopK, c.Hidden) {
		return false
	}
	return c.Protocol == config.ProtocolLines || (c.Protocol == config.ProtocolAuto && c.DispatchDtype == config.DtypeBF16)
}

// CombineLines reports whether a combine of `tokens` tokens sends its rows
// in lines: only where lines are verified, above the inline size, with --protocol lines
// or auto, for either combine mode and dispatch dtype (the rows are bf16
// either way).
func (p *Plan) CombineLines(tokens int) bool {
	if p.fencedOnly() || !p.LinesVerified || p.Inline(tokens) {
		return false
	}
	return p.Cfg.Protocol == config.ProtocolLines || p.Cfg.Protocol == config.ProtocolAuto
}

// Launch is how the operations of one token count are launched.
type Launch struct {
	Variant                       Variant
	DispatchEntry, CombineEntry   string
	Grid, Threads                 int
	DispatchShared, CombineShared int // dynamic shared memory, bytes
}

// SetArgs sets the fields of a that follow from the launch: its variant's
// (Variant.SetArgs) and the grid, which the combine reads from the argument
// block rather than from gridDim (docs/PERF.md, kernels v53), so a launch
// must pass the grid SetArgs set.
func (l Launch) SetArgs(a *Args) {
	l.Variant.SetArgs(a)
	a.Grid = int32(l.Grid)
}

// Launch is the launch of operations of `tokens` ≤ Cfg.Tokens tokens per
// rank at most, of which this rank dispatches own (0..tokens): the variant
// of their protocols, dtype, mode and layout (the same on every rank), the
// dispatch entry of the own count, and the grid: Grid, or for an inline
// operation without --num-blocks InlineBlocksPerToken per token (never more
// than Grid).
func (p *Plan) Launch(tokens, own int) (Launch, error) {
	c := p.Cfg
	if tokens < 1 || tokens > c.Tokens {
		return Launch{}, fmt.Errorf("tokens %d outside the plan's 1..%d", tokens, c.Tokens)
	}
	if own < 0 || own > tokens {
		return Launch{}, fmt.Errorf("a rank dispatching %d tokens of at most %d", own, tokens)
	}
	// Both inline, or each fenced unless it sends lines.
	inline := p.Inline(tokens)
	v := Variant{Dispatch: ProtoInline, Combine: ProtoInline, FP8: c.DispatchDtype == config.DtypeFP8E4M3,
		DirectSend: c.CombineMode == config.DirectSend, RankMajor: p.RankMajor(), GIN: p.GIN}
	if !inline {
		v.Dispatch, v.Combine = ProtoFenced, ProtoFenced
		if p.DispatchLines(tokens) {
			v.Dispatch = ProtoLines
		}
		if p.CombineLines(tokens) {
			v.Combine = ProtoLines
		}
	}
	if err := Built(v); err != nil {
		return Launch{}, err
	}
	grid := p.Grid
	if c.NumBlocks == 0 && inline {
		grid = min(grid, InlineBlocksPerToken*tokens)
	}
	return Launch{
		Variant: v, DispatchEntry: v.DispatchEntry(own), CombineEntry: CombineKernel,
		Grid: grid, Threads: ThreadsPerBlock, DispatchShared: DispatchSharedBytes(c.Experts, p.Ranks),
	}, nil
}

func align(n, a int64) int64 { return (n + a - 1) / a * a }

// layout lays the symmetric buffer out: every area sized for the largest
// token count, 256-byte aligned.
func (p *Plan) layout() {
	c := p.Cfg
	R, T, H, K, E := int64(p.Ranks), int64(c.Tokens), int64(c.Hidden), int64(c.TopK), int64(c.Experts)
	TI := int64(min(c.Tokens, p.inlineUpTo())) // the most tokens that use the inline protocol
	TD := TI                                   // the most tokens of an inline or lines dispatch
	if p.DispatchLines(c.Tokens) {
		TD = T
	}
	combine := max(TI*K, R*TI) * int64(InlineRowBytes(c.Hidden)) // inline combine rows
	// Lines rows: rank_local_reduce one per (rank, token), direct_send one per selection.
	if p.CombineLines(c.Tokens) {
		combine = max(combine, max(R*T, T*K)*int64(LinesRowBytes(c.Hidden)))
	}
	l := &p.Sym
	next := int64(0)
	area := func(size int64) Area {
		a := Area{Off: next, Size: align(size, 256)}
		next += a.Size
		return a
	}
	// Each signal area: R arrival counters, then the ticket counter of this
	// rank's own blocks (last_ticket in ll.cu), which the fenced release
	// takes.
	l.DispatchSignal = area(8 * (R + 1))
	l.CombineSignal = area(8 * (R + 1))
	// The dispatch areas have a half per call parity (docs/DESIGN.md, "Calls
	// back to back"); combine needs none: a rank's combine n+1 follows its
	// dispatch n+1, which every peer joins only after its combine n.
	l.DispatchRecv = area(2 * R * T * int64(MessageBytes(c.TopK, c.Hidden)))
	l.DispatchCounts = area(2 * 8 * E)
	l.CombineRecv = area(max(T*K, R*T) * H * 2)
	l.InlineDispatch = area(2 * R * TD * int64(InlineSlotBytes(c.TopK, c.Hidden)))
	l.InlineCounts = area(2 * 16 * E)
	l.InlineCombine = area(combine)
	l.Total = next
}

// SetArgs sets the symmetric offsets of a.
func (l SymLayout) SetArgs(a *Args) {
	a.OffDispatchSignal, a.OffCombineSignal = uint64(l.DispatchSignal.Off), uint64(l.CombineSignal.Off)
	a.OffDispatchRecv, a.OffCombineRecv = uint64(l.DispatchRecv.Off), uint64(l.CombineRecv.Off)
	a.OffDispatchCounts = uint64(l.DispatchCounts.Off)
	a.OffInlineDispatch, a.OffInlineCounts = uint64(l.InlineDispatch.Off), uint64(l.InlineCounts.Off)
	a.OffInlineCombine = uint64(l.InlineCombine.Off)
}
