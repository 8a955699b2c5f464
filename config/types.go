package config

import (
	"fmt"
	"strconv"
)

// Algorithm is the expert-parallel mode. Only low latency is implemented.
type Algorithm int

// LowLatency is ep_bench's LL mode; it is the zero value.
const LowLatency Algorithm = 0

// String returns the name ep_bench prints in its configuration header.
func (a Algorithm) String() string {
	if a == LowLatency {
		return "LOW_LATENCY"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

func (a Algorithm) flagValue() string {
	if a == LowLatency {
		return "ll"
	}
	return strconv.Itoa(int(a))
}

func parseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "ll", "low-latency":
		return LowLatency, nil
	case "ht", "high-throughput":
		return 0, fmt.Errorf("high-throughput mode is not supported")
	}
	return 0, fmt.Errorf("unknown value %q (want ll or low-latency)", s)
}

// Layout is how dispatched tokens are laid out on the receiving rank.
type Layout int

const (
	// ExpertMajor groups received tokens by local expert (ep_bench's LL
	// default); it is the zero value.
	ExpertMajor Layout = iota
	// RankMajor gives every source rank's tokens their own slots
	// ([ranks, tokens, hidden]), each token once per destination rank.
	RankMajor
	// Flat is ep_bench's high-throughput layout.
	Flat
)

// layoutNames are the header names and the flag's short and long
// spellings, in Layout order.
var layoutNames = [...]struct{ header, short, long string }{
	ExpertMajor: {"expert-major", "em", "expert-major"},
	RankMajor:   {"rank-major", "rm", "rank-major"},
	Flat:        {"flat", "fl", "flat"},
}

// String returns the name ep_bench prints in its configuration header.
func (l Layout) String() string {
	if l >= 0 && int(l) < len(layoutNames) {
		return layoutNames[l].header
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// Flag is ep_bench's short spelling of the layout (em, rm, fl).
func (l Layout) Flag() string { return l.flagValue() }

func (l Layout) flagValue() string {
	if l >= 0 && int(l) < len(layoutNames) {
		return layoutNames[l].short
	}
	return strconv.Itoa(int(l))
}

// parseLayout accepts every layout ep_bench names; which of them epbench
// runs is Config.Check's to say.
func parseLayout(s string) (Layout, error) {
	for l, n := range layoutNames {
		if s == n.short || s == n.long {
			return Layout(l), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want em, expert-major, rm or rank-major)", s)
}

// runnable says why epbench cannot run layout l, or nil.
func (l Layout) runnable() error {
	switch l {
	case ExpertMajor, RankMajor:
		return nil
	case Flat:
		return fmt.Errorf("flat layout belongs to high-throughput mode, which is not supported")
	}
	return fmt.Errorf("unknown layout %v", l)
}

// DispatchDtype is the payload format of dispatched tokens. Combine always
// carries BF16.
type DispatchDtype int

const (
	// DtypeBF16 sends tokens as BF16, hidden*2 bytes each (the default).
	DtypeBF16 DispatchDtype = iota
	// DtypeFP8E4M3 sends tokens as FP8 E4M3 with one float32 scale per
	// 128 channels.
	DtypeFP8E4M3
)

// String returns the label used in the summary, e.g. "Dispatch (BF16)".
func (d DispatchDtype) String() string {
	switch d {
	case DtypeBF16:
		return "BF16"
	case DtypeFP8E4M3:
		return "FP8_E4M3"
	}
	return "DispatchDtype(" + strconv.Itoa(int(d)) + ")"
}

func (d DispatchDtype) flagValue() string {
	switch d {
	case DtypeBF16:
		return "bf16"
	case DtypeFP8E4M3:
		return "fp8_e4m3"
	}
	return strconv.Itoa(int(d))
}

func parseDispatchDtype(s string) (DispatchDtype, error) {
	switch s {
	case "bf16":
		return DtypeBF16, nil
	case "fp8_e4m3":
		return DtypeFP8E4M3, nil
	}
	return 0, fmt.Errorf("unknown value %q (want bf16 or fp8_e4m3)", s)
}

// CombineMode selects the low-latency combine algorithm.
type CombineMode int

const (
	// RankLocalReduce reduces the top-k expert outputs on the expert's
	// rank before sending one partial sum per destination rank (the
	// default).
	RankLocalReduce CombineMode = iota
	// DirectSend sends every expert output back to the token's rank,
	// which reduces them.
	DirectSend
)

// String returns the flag spelling, which is also the reported name.
func (m CombineMode) String() string {
	switch m {
	case RankLocalReduce:
		return "rank_local_reduce"
	case DirectSend:
		return "direct_send"
	}
	return "CombineMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseCombineMode reads a --combine-mode value.
func ParseCombineMode(s string) (CombineMode, error) {
	switch s {
	case "rank_local_reduce":
		return RankLocalReduce, nil
	case "direct_send":
		return DirectSend, nil
	}
	return 0, fmt.Errorf("unknown value %q (want rank_local_reduce or direct_send)", s)
}

// Protocol selects how the GPU kernels tell a peer that data is in place.
type Protocol int

const (
	// ProtocolAuto (the default): inline for the smallest operations
	// (kernels.InlineMaxBytes); above that, between GPUs that all reach each other
	// over NVLink, lines for a BF16 dispatch and a rank_local_reduce
	// combine; fenced otherwise.
	ProtocolAuto Protocol = iota
	// ProtocolInline: every 8 data bytes travel with the call's flag and
	// the receiver polls the data itself: no fence and no signal round
	// trip, at twice the bytes on the wire.
	ProtocolInline
	// ProtocolFenced: the data, then one system-scope fence and one
	// release per peer and operation.
	ProtocolFenced
	// ProtocolLines: dispatch messages travel in 128-byte lines of 112
	// data bytes and the call's flag, which NVLink delivers whole; the
	// receiver polls each line and copies it as it lands (no fence, no
	// signal round trip, 1/7 more bytes); so do combine's partial rows in
	// rank_local_reduce (direct_send combine is fenced). Needs NVLink
	// between every pair of GPUs.
	ProtocolLines
)

// protocolNames are the flag spellings, in Protocol order.
var protocolNames = [...]string{ProtocolAuto: "auto", ProtocolInline: "inline", ProtocolFenced: "fenced", ProtocolLines: "lines"}

// String returns the flag spelling.
func (p Protocol) String() string {
	if p >= 0 && int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

func parseProtocol(s string) (Protocol, error) {
	for p, name := range protocolNames {
		if s == name {
			return Protocol(p), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want auto, inline, fenced or lines)", s)
}

// Transport is how a rank's kernels reach the other ranks' GPU memory
// (--transport).
type Transport int

const (
	// TransportAuto (the default): CUDA IPC when every rank runs on one
	// node, NCCL otherwise.
	TransportAuto Transport = iota
	// TransportIPC: CUDA IPC handles, within one node.
	TransportIPC
	// TransportNCCL: NCCL's symmetric memory windows (NCCL 2.30 or newer,
	// loaded at run time); peers reached by load/store through the
	// pointers NCCL gives for its LSA team (NVLink within a node or across
	// a multi-node NVLink domain).
	TransportNCCL
)

// transportNames are the flag spellings, in Transport order.
var transportNames = [...]string{TransportAuto: "auto", TransportIPC: "ipc", TransportNCCL: "nccl"}

// String returns the flag spelling.
func (t Transport) String() string {
	if t >= 0 && int(t) < len(transportNames) {
		return transportNames[t]
	}
	return "Transport(" + strconv.Itoa(int(t)) + ")"
}

func parseTransport(s string) (Transport, error) {
	for t, name := range transportNames {
		if s == name {
			return Transport(t), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want auto, ipc or nccl)", s)
}

// InlineMaxTokens is the most tokens per rank the inline protocol takes:
// its kernels spread every token's row over the grid and keep a table of
// every selection in each block (kSpreadTokens - 1 in kernels/ll.cu).
const InlineMaxTokens = 15

// Compute is what runs the operations (--backend): the CUDA kernels or the
// CPU reference.
type Compute string

// The values of --backend. The empty string means automatic: the caller
// picks CUDA when a device is usable and the CPU reference otherwise.
const (
	ComputeAuto Compute = ""
	ComputeCUDA Compute = "cuda"
	ComputeCPU  Compute = "cpu"
)

func parseCompute(s string) (Compute, error) {
	switch s {
	case "auto":
		return ComputeAuto, nil
	case string(ComputeCUDA), string(ComputeCPU):
		return Compute(s), nil
	}
	return "", fmt.Errorf("unknown value %q (want cuda, cpu or auto)", s)
}
