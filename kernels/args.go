package kernels

import "encoding/binary"

// Args mirrors struct LLArgs in ll.cuh field for field, in its order and
// under its names (snake_case there, CamelCase here; pointers are device
// addresses). Put writes it in the C layout; TestArgsPutMirrorsLLArgs checks
// every field's offset and size against the struct in ll.cuh.
type Args struct {
	// In LLArgs' order: what the kernels read first comes first (ll.cuh
	// says why).
	Peers, X, TopkIdx, TopkW             uint64
	Clock                                uint64 // 0, or the device clock (ClockBytes)
	Trace                                uint64
	TimeoutNs                            uint64
	JitterNs                             uint64 // 0, or the most a kernel waits before it starts (--jitter-us)
	Rank, Ranks, Tokens, Hidden, TopK    int32
	LocalExperts                         int32
	OwnTokens                            int32 // the tokens this rank dispatches
	Modes                                int32 // the variant's fields and the flags (Variant.SetArgs, SetFlag; Modes*)
	Epoch                                int32
	Grid                                 int32 // the launch's blocks (gridDim.x; Launch.SetArgs)
	RowPos, Y, Out                       uint64
	OffInlineCombine, OffInlineDispatch  uint64
	TokensOf                             uint64 // 0, or int32 [R]: the tokens each rank dispatches
	Active                               uint64 // 0, or int32 [R]: the mask of active ranks (-T)
	OffCombineRecv, OffCombineSignal     uint64
	RecvScales                           uint64
	Err, Expect                          uint64
	RecvX, RecvCount                     uint64
	OffDispatchRecv                      uint64
	SrcInfo, LayoutRange                 uint64
	RecvTopkIdx, RecvTopkW               uint64 // rank-major outputs
	OffDispatchSignal, OffDispatchCounts uint64
	OffInlineCounts                      uint64
}

// ArgsSize is sizeof(LLArgs): 30 eight-byte fields and 10 four-byte fields
// (the test derives it from ll.cuh).
const ArgsSize = 30*8 + 10*4

// The fields of LLArgs.modes (kModes* in ll.cuh): four bits each for the
// dispatch's signalling (Proto*), the combine's (Proto*), FP8 (0 or 1) and
// the combine mode (Mode*), then the flags (Flag*) from bit 16. The kernels
// read the five in one word so that what the combine reads first fits two
// constant lines (docs/PERF.md, kernels v54).
const (
	ModesDispatchShift = 0
	ModesCombineShift  = 4
	ModesFP8Shift      = 8
	ModesModeShift     = 12
	ModesFlagsShift    = 16
	ModesVariantMask   = 1<<ModesFlagsShift - 1
	// ModesZeroShift: bits 24..31 stay zero, the flags take the bits
	// below them. The kernels read them as an index the compiler cannot
	// fold (kModesZeroShift in ll.cu).
	ModesZeroShift = 24
)

// ModesWord is the variant part of LLArgs.modes (modes_word in ll.cuh).
func ModesWord(dispatchProto, combineProto, fp8, combineMode int32) int32 {
	return dispatchProto<<ModesDispatchShift | combineProto<<ModesCombineShift | fp8<<ModesFP8Shift |
		combineMode<<ModesModeShift
}

// FP8 reports whether a.Modes names an FP8 dispatch.
func (a *Args) FP8() bool { return a.Modes>>ModesFP8Shift&15 != 0 }

// SetFlag sets or clears flag f (Flag*) in a.Modes. It panics on a flag
// that would reach bit ModesZeroShift.
func (a *Args) SetFlag(f int32, on bool) {
	if f <= 0 || f >= 1<<(ModesZeroShift-ModesFlagsShift) {
		panic("kernels: a flag outside the flags' bits of LLArgs.modes")
	}
	if on {
		a.Modes |= f << ModesFlagsShift
	} else {
		a.Modes &^= f << ModesFlagsShift
	}
}

// Combine modes (the combine mode of LLArgs.modes, kMode* in ll.cuh).
const (
	ModeRankLocalReduce = 0
	ModeDirectSend      = 1
	ModeRankMajor       = 2 // the rank-major layout; its combine reduces per rank
)

// FlagPrescale (a flag of LLArgs.modes, kFlagPrescale; Args.SetFlag): the rank-major combine scales
// each slot by the token's weight sum on this rank first, as a validated
// pair does.
const FlagPrescale = 1

// ClockBytes is the size of the device clock (kClockWords in ll.cuh): the
// call count the kernels keep on the device when their arguments cannot
// change between calls (CUDA graphs). Zeroed before the first call.
const ClockBytes = 8 * 8

// Signalling of an operation (the dispatch's and the combine's in LLArgs.modes).
const (
	ProtoFenced int32 = 0
	ProtoInline int32 = 1
	ProtoLines  int32 = 2
)

// SpreadTokens is kSpreadTokens in ll.cu: below it a fenced dispatch
// spreads every token's row over the grid, and an inline one always does
// (config.InlineMaxTokens is one less); see Variant.Spreads.
const SpreadTokens = 16

// The phase in the top byte of the error word (kPhase* in ll.cuh).
const (
	// PhaseDispatch: a dispatch's wait for a peer timed out.
	PhaseDispatch = 1
	// PhaseCombine: a combine's wait for a peer timed out.
	PhaseCombine = 2
	// PhaseVariant: a kernel was launched with the arguments of another
	// variant than its module's, or a dispatch entry with a token count it
	// does not take. No peer goes with it.
	PhaseVariant = 3
	// PhaseStale: a kernel found a peer's data of another call where this
	// call's must be (the ownership of the slots is broken: a defect).
	PhaseStale = 4
)

// DecodeError splits the kernels' error word (LLArgs.err) into its phase
// (Phase*) and peer: a timed-out wait records (phase << 24) | (peer + 1),
// peer being the rank it waited for; a variant error records
// PhaseVariant << 24, which gives peer -1. The word 0 (no error) gives
// phase 0, peer -1.
func DecodeError(w uint32) (phase, peer int) {
	return int(w >> 24), int(w&0xFFFFFF) - 1
}

// TracePoints is the number of phase stamps per block (kTracePoints).
const TracePoints = 8

// Put encodes a into b (at least ArgsSize bytes) without allocating. It
// panics when a.Modes sets a bit from ModesZeroShift up, which the kernels
// take as an index (a defect of the caller).
func (a *Args) Put(b []byte) {
	_ = b[ArgsSize-1]
	if a.Modes>>ModesZeroShift != 0 {
		panic("kernels: LLArgs.modes sets a bit from 24 up")
	}
	le := binary.LittleEndian
	o := 0
	u64 := func(vs ...uint64) {
		for _, v := range vs {
			le.PutUint64(b[o:], v)
			o += 8
		}
	}
	i32 := func(vs ...int32) {
		for _, v := range vs {
			le.PutUint32(b[o:], uint32(v))
			o += 4
		}
	}
	u64(a.Peers, a.X, a.TopkIdx, a.TopkW, a.Clock, a.Trace, a.TimeoutNs, a.JitterNs)
	i32(a.Rank, a.Ranks, a.Tokens, a.Hidden, a.TopK, a.LocalExperts, a.OwnTokens, a.Modes, a.Epoch, a.Grid)
	u64(a.RowPos, a.Y, a.Out, a.OffInlineCombine, a.OffInlineDispatch, a.TokensOf, a.Active, a.OffCombineRecv,
		a.OffCombineSignal, a.RecvScales, a.Err, a.Expect, a.RecvX, a.RecvCount, a.OffDispatchRecv, a.SrcInfo, a.LayoutRange,
		a.RecvTopkIdx, a.RecvTopkW, a.OffDispatchSignal, a.OffDispatchCounts, a.OffInlineCounts)
}

// HeaderBytes is the size of a dispatch message header (header_bytes in ll.cuh):
// epoch, token, two pad words, then the top-k ids, weights and rows, padded
// to a 128-byte line.
func HeaderBytes(topk int) int { return (16 + 12*topk + 127) / 128 * 128 }

// MessageBytes is the size of one dispatch message: header and bf16 row.
func MessageBytes(topk, hidden int) int { return HeaderBytes(topk) + 2*hidden }

// DispatchSharedBytes is the dynamic shared memory of a dispatch launch: two
// int32 counters per expert and per rank.
func DispatchSharedBytes(experts, ranks int) int { return 8 * (experts + ranks) }

// InlineSlotBytes is the size of one inline-protocol dispatch slot
// (inline_slot_units in ll.cuh, 16-byte units).
func InlineSlotBytes(topk, hidden int) int { return 16 * ((1+2*topk+7)/8*8 + hidden/4) }

// LinesSlotBytes is the size of one lines-protocol dispatch message
// (lines_slot_bytes in ll.cuh): 128-byte lines of 14 data words, the header
// lines (2 + 3·topk ints, 28 per line) then a bf16 row's lines. Such a
// message uses an inline dispatch slot, so it must not be larger.
func LinesSlotBytes(topk, hidden int) int {
	const words = 14
	headerLines := (2 + 3*topk + 2*words - 1) / (2 * words)
	return 128*headerLines + LinesRowBytes(hidden)
}

// LinesRowBytes is the size of one lines-protocol combine partial row: a
// bf16 row's lines (lines_row_lines in ll.cuh).
func LinesRowBytes(hidden int) int { return 128 * ((hidden/4 + 13) / 14) }

// InlineRowBytes is the size of one inline-protocol combine row.
func InlineRowBytes(hidden int) int { return 16 * (hidden / 4) }
