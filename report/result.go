package report

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/epbench/epbench/stats"
)

// Schema identifies epbench's JSON result; the parser refuses other documents.
const Schema = "epbench.result/v1"

// Result is one benchmark run: the single model behind the text writer, the
// JSON writer and the compare parser.
type Result struct {
	Schema string `json:"schema"`
	Config Config `json:"config"`
	// Topology holds free-form lines (GPUs, links) printed after the header.
	Topology   []string    `json:"topology,omitempty"`
	Summary    Summary     `json:"summary"`
	Setup      *Setup      `json:"setup,omitempty"`
	Memory     *Memory     `json:"gpu_memory,omitempty"`
	Validation *Validation `json:"validation,omitempty"`
	// MaskTest is the active-mask test (-T); nil when it did not run.
	MaskTest *MaskTest `json:"mask_test,omitempty"`
	// PerRank is written to JSON only.
	PerRank []RankValues `json:"per_rank,omitempty"`
}

// Failed reports whether the run's validation failed on some rank, or a
// check of the active-mask test did.
func (r *Result) Failed() bool {
	return r.Validation != nil && !(r.Validation.GlobalDispatch && r.Validation.GlobalCombine) || r.MaskTest.Failed()
}

// Failure says what failed, for the error line of a run whose result
// Failed.
func (r *Result) Failure() string {
	if r.MaskTest.Failed() {
		return "the active-mask test failed (see its block)"
	}
	return "validation failed (see the Data Validation block)"
}

// Config echoes the run's configuration in the header.
type Config struct {
	Algorithm string `json:"algorithm"` // LOW_LATENCY
	Layout    string `json:"layout"`    // expert-major | rank-major
	Ranks     int    `json:"ranks"`
	// NumBlocks is the exact grid (--num-blocks); 0 means auto.
	NumBlocks int `json:"num_blocks"`
	// MaxNumSMs caps the automatic grid (-S); 0 means auto. It is printed
	// on ep_bench's "Max num SMs" line, which caps the same grid there.
	MaxNumSMs int `json:"max_num_sms,omitempty"`
	Tokens    int `json:"tokens"`
	// SubTest is ep_bench's "Sub-test:" line (-l, -N); empty for none.
	SubTest string `json:"sub_test,omitempty"`
	// RankTokens is the tokens each rank dispatched, with -l or -N.
	RankTokens    []int  `json:"rank_tokens,omitempty"`
	Hidden        int    `json:"hidden"`
	TopK          int    `json:"top_k"`
	Experts       int    `json:"experts"`
	LocalExperts  int    `json:"local_experts"`
	Warmup        int    `json:"warmup_iters"`
	Iters         int    `json:"bench_iters"`
	DispatchDType string `json:"dispatch_dtype"` // BF16 | FP8_E4M3
	// ProfileMode is on when the timed loop is bracketed for an external
	// profiler (--cupti-region).
	ProfileMode   bool `json:"profile_mode"`
	NVLink        bool `json:"nvlink"`
	Validate      bool `json:"validate"`
	DynamicTokens bool `json:"dynamic_tokens"`
	// CUPTI is the status text printed after "CUPTI:".
	CUPTI       string `json:"cupti"`
	ZeroCopy    bool   `json:"zero_copy"`
	Backend     string `json:"backend"` // cuda | cpu
	CombineMode string `json:"combine_mode"`
	// BackToBack: the timed pairs followed each other with no host sync or
	// barrier between them (--back-to-back); printed only when set.
	BackToBack bool `json:"back_to_back,omitempty"`
}

// Summary is ep_bench's "=== Summary (Low Latency, ...) ===" block.
type Summary struct {
	Ranks int `json:"ranks"`
	// DispatchDType labels the dispatch line and byte count; empty means BF16.
	DispatchDType string   `json:"dispatch_dtype"`
	Host          HostPerf `json:"host"`
	// Kernel is nil when kernel-only numbers are absent; KernelNote then says why.
	Kernel     *KernelPerf `json:"kernel,omitempty"`
	KernelNote string      `json:"kernel_note,omitempty"`
	Bytes      Bytes       `json:"bytes"`
}

// Stat is an avg/min/max triple; the unit is in the enclosing field's name.
type Stat struct {
	Avg float64 `json:"avg"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// RankedStat is a Stat whose extremes name the rank they came from.
type RankedStat struct {
	Avg     float64 `json:"avg"`
	Min     float64 `json:"min"`
	MinRank int     `json:"min_rank"`
	Max     float64 `json:"max"`
	MaxRank int     `json:"max_rank"`
}

// HostPhase is one host-observed phase, reduced in stats.Host mode.
type HostPhase struct {
	LatencyUS      Stat       `json:"latency_us"`
	ThroughputGBps RankedStat `json:"throughput_gbps"`
}

// HostPerf is the "--- Host-observed performance ---" section.
type HostPerf struct {
	Dispatch HostPhase `json:"dispatch"`
	Combine  HostPhase `json:"combine"`
	// Total is dispatch start to combine end of each iteration (D+C).
	Total HostPhase `json:"total"`
}

// KernelPhase is one kernel-only phase, reduced in stats.KernelOnly mode:
// throughput Min comes from the minimum time (ep_bench's inverted label).
type KernelPhase struct {
	LatencyUS      Stat `json:"latency_us"`
	ThroughputGBps Stat `json:"throughput_gbps"`
}

// KernelPerf is the "--- Kernel-only performance ---" section.
type KernelPerf struct {
	Dispatch KernelPhase `json:"dispatch"`
	Combine  KernelPhase `json:"combine"`
}

// Bytes are rank 0's payloads, as ep_bench prints them.
type Bytes struct {
	Dispatch   int64 `json:"dispatch"`
	Combine    int64 `json:"combine"`
	Selections int64 `json:"selections"`
	// Rank-major: rank 0's messages to other ranks (one per token and
	// destination rank) and the bytes they carry each way, which ep_bench's
	// per-selection byte counts do not show.
	Messages     int64 `json:"messages,omitempty"`
	WireDispatch int64 `json:"wire_dispatch,omitempty"`
	WireCombine  int64 `json:"wire_combine,omitempty"`
}

// Setup holds set-up timings in milliseconds, reduced over ranks.
type Setup struct {
	Ranks            int  `json:"ranks"`
	GroupCreationMS  Stat `json:"group_creation_ms"`
	HandleCreationMS Stat `json:"handle_creation_ms"`
}

// Memory is rank 0's device memory in MiB (printed "MB", as ep_bench does).
// The CPU backend has none, and the block is then left out of the output.
type Memory struct {
	TotalMiB           float64 `json:"total_mib"`
	UsedPreCreateMiB   float64 `json:"used_pre_create_mib"`
	UsedPostCombineMiB float64 `json:"used_post_combine_mib"`
	// DeltaMiB is stored, not derived, because ep_bench subtracts unrounded byte counts.
	DeltaMiB float64 `json:"delta_mib"`
}

// Check is one validation verdict with an optional reason.
type Check struct {
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// Validation is the "=== Data Validation ===" block: rank 0's verdicts,
// the combine error metric and the verdicts reduced over all ranks.
type Validation struct {
	Dispatch Check
	Combine  Check
	// CalcDiff is 1 − 2Σ(x+1)(y+1)/Σ[(x+1)²+(y+1)²]; NaN when the output had NaNs.
	CalcDiff       float64
	GlobalDispatch bool
	GlobalCombine  bool
	// DispatchOnly: the combine was not checked (-D).
	DispatchOnly bool
}

// validationJSON is Validation on the wire: JSON has no NaN, so a non-finite
// calc_diff travels as null.
type validationJSON struct {
	Dispatch       Check    `json:"dispatch"`
	Combine        Check    `json:"combine"`
	CalcDiff       *float64 `json:"calc_diff"`
	GlobalDispatch bool     `json:"global_dispatch_passed"`
	GlobalCombine  bool     `json:"global_combine_passed"`
	DispatchOnly   bool     `json:"dispatch_only,omitempty"`
}

// MarshalJSON writes a non-finite CalcDiff as null.
func (v Validation) MarshalJSON() ([]byte, error) {
	w := validationJSON{Dispatch: v.Dispatch, Combine: v.Combine, GlobalDispatch: v.GlobalDispatch, GlobalCombine: v.GlobalCombine,
		DispatchOnly: v.DispatchOnly}
	if !math.IsNaN(v.CalcDiff) && !math.IsInf(v.CalcDiff, 0) {
		w.CalcDiff = &v.CalcDiff
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a null calc_diff back as NaN.
func (v *Validation) UnmarshalJSON(b []byte) error {
	if v == nil {
		return errors.New("report: unmarshal validation into nil")
	}
	var w validationJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*v = Validation{Dispatch: w.Dispatch, Combine: w.Combine, CalcDiff: math.NaN(), GlobalDispatch: w.GlobalDispatch, GlobalCombine: w.GlobalCombine,
		DispatchOnly: w.DispatchOnly}
	if w.CalcDiff != nil {
		v.CalcDiff = *w.CalcDiff
	}
	return nil
}

// RankValues is one rank's inputs to the reductions (JSON only).
type RankValues struct {
	Rank          int   `json:"rank"`
	Selections    int64 `json:"selections"`
	DispatchBytes int64 `json:"dispatch_bytes"`
	CombineBytes  int64 `json:"combine_bytes"`
	// Host phases: this rank's statistics after dropping the first iteration.
	Dispatch RankPhase `json:"dispatch"`
	Combine  RankPhase `json:"combine"`
	Total    RankPhase `json:"total"`
	// Kernel averages over the timed loop; absent without kernel timing.
	KernelDispatchUS *float64 `json:"kernel_dispatch_us,omitempty"`
	KernelCombineUS  *float64 `json:"kernel_combine_us,omitempty"`
}

// RankPhase is one rank's host statistics of a phase, in microseconds.
type RankPhase struct {
	AvgUS          float64 `json:"avg_us"`
	MinUS          float64 `json:"min_us"`
	MaxUS          float64 `json:"max_us"`
	P50US          float64 `json:"p50_us"`
	P99US          float64 `json:"p99_us"`
	Samples        int     `json:"samples"`
	ThroughputGBps float64 `json:"throughput_gbps"`
}

// Kernel-timing notes; one replaces the kernel-only lines when Kernel is nil.
const (
	NoteCPUBackend     = "no kernel timing on the cpu backend."
	NoteKernelDisabled = "kernel timing disabled (--no-kernel-timing)."
	NoteCUPTIRegion    = "kernel timing left to the external profiler (--cupti-region)."
)

// NoteCUPTIUnavailable is the note for a CUDA run without a usable CUPTI.
func NoteCUPTIUnavailable(reason string) string {
	return "CUPTI not available (" + oneLine(reason) + "); kernel timing disabled."
}

// HostPhaseFrom converts a stats.Host reduction.
func HostPhaseFrom(g stats.Global) HostPhase {
	return HostPhase{
		LatencyUS: Stat{Avg: g.Avg, Min: g.Min, Max: g.Max},
		ThroughputGBps: RankedStat{
			Avg: g.Throughput.Avg,
			Min: g.Throughput.Min, MinRank: g.Throughput.MinRank,
			Max: g.Throughput.Max, MaxRank: g.Throughput.MaxRank,
		},
	}
}

// KernelPhaseFrom converts a stats.KernelOnly reduction.
func KernelPhaseFrom(g stats.Global) KernelPhase {
	return KernelPhase{
		LatencyUS:      Stat{Avg: g.Avg, Min: g.Min, Max: g.Max},
		ThroughputGBps: Stat{Avg: g.Throughput.Avg, Min: g.Throughput.Min, Max: g.Throughput.Max},
	}
}

// StatFrom keeps only avg/min/max of a reduction (setup timings).
func StatFrom(g stats.Global) Stat { return Stat{Avg: g.Avg, Min: g.Min, Max: g.Max} }

// RankPhaseFrom converts one rank's gathered host statistics.
func RankPhaseFrom(rs stats.RankSample) RankPhase {
	s := rs.Sample
	return RankPhase{AvgUS: s.Avg, MinUS: s.Min, MaxUS: s.Max, P50US: s.P50, P99US: s.P99, Samples: s.N, ThroughputGBps: rs.ThroughputGBps}
}
