package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Title is the first line of epbench's text output.
const Title = "=== epbench Performance Benchmark ==="

// hostColumn is where ep_bench starts "avg=" on host lines and "throughput:"
// on continuation lines.
const hostColumn = 18

// kernelColumn is where ep_bench starts "avg=" on kernel-only lines.
const kernelColumn = 13

var continuation = strings.Repeat(" ", hostColumn)

// ErrIncomplete reports a Result that lacks what the text format needs.
var ErrIncomplete = errors.New("report: incomplete result")

// WriteText writes the whole text report in ep_bench's order: header,
// topology lines, summary, setup timing, GPU memory (when known) and
// validation (when run).
func WriteText(w io.Writer, r *Result) error {
	if r == nil {
		return fmt.Errorf("%w: nil result", ErrIncomplete)
	}
	bw := bufio.NewWriter(w)
	steps := []func() error{
		func() error { return WriteHeader(bw, r.Config, r.Topology) },
		func() error { return WriteSummary(bw, r.Summary) },
	}
	if r.Setup != nil {
		steps = append(steps, func() error { return WriteSetup(bw, *r.Setup) })
	}
	if r.Memory != nil {
		steps = append(steps, func() error { return WriteMemory(bw, *r.Memory) })
	}
	if r.Validation != nil {
		steps = append(steps, func() error { return WriteValidation(bw, *r.Validation) })
	}
	if r.MaskTest != nil {
		steps = append(steps, func() error { return WriteMaskTest(bw, *r.MaskTest) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// TimingBackToBack is the header's Timing line with --back-to-back.
const TimingBackToBack = "back-to-back (no sync or barrier between pairs)"

// WriteHeader writes the configuration block ep_bench prints before running,
// followed by epbench's Backend and Combine mode lines, an empty line and the
// topology lines.
func WriteHeader(w io.Writer, c Config, topology []string) error {
	p := newPrinter(w)
	sms := "auto"
	if c.MaxNumSMs > 0 {
		sms = fmt.Sprint(c.MaxNumSMs)
	}
	p.line(Title)
	p.line("Configuration:")
	p.line("  Algorithm:       " + oneLine(c.Algorithm))
	p.line("  Layout:          " + oneLine(c.Layout))
	p.printf("  Ranks:           %d\n", c.Ranks)
	p.line("  Max num SMs:     " + sms)
	p.printf("  Tokens:          %d\n", c.Tokens)
	if c.SubTest != "" {
		p.line("  Sub-test:        " + oneLine(c.SubTest))
	}
	p.printf("  Hidden:          %d\n", c.Hidden)
	p.printf("  Top-k:           %d\n", c.TopK)
	p.printf("  Experts:         %d (local: %d)\n", c.Experts, c.LocalExperts)
	p.printf("  Warmup iters:    %d\n", c.Warmup)
	p.printf("  Benchmark iters: %d\n", c.Iters)
	p.line("  Dispatch dtype:  " + dtypeLabel(c.DispatchDType))
	p.line("  Profile mode:    " + enabled(c.ProfileMode))
	p.line("  NVLink:          " + enabled(c.NVLink))
	p.line("  Validate mode:   " + enabled(c.Validate))
	p.line("  Dynamic tokens:  " + enabled(c.DynamicTokens))
	p.line("  CUPTI:           " + oneLine(c.CUPTI))
	p.line("  Use zero-copy: " + enabled(c.ZeroCopy))
	p.line("  Backend:         " + oneLine(c.Backend))
	p.line("  Combine mode:    " + oneLine(c.CombineMode))
	if c.BackToBack {
		p.line("  Timing:          " + TimingBackToBack)
	}
	p.line("")
	if len(c.RankTokens) > 0 && strings.HasPrefix(c.SubTest, "Non-uniform") {
		counts := make([]string, len(c.RankTokens))
		for r, n := range c.RankTokens {
			counts[r] = fmt.Sprintf("r%d=%d", r, n)
		}
		p.line("Per-rank token counts: " + strings.Join(counts, " "))
	}
	for _, l := range topology {
		p.line(oneLine(l))
	}
	return p.err
}

// WriteSummary writes the summary block from its leading empty line through
// the "Byte counts:" line, byte for byte in ep_bench's layout.
func WriteSummary(w io.Writer, s Summary) error {
	if s.Kernel == nil && s.KernelNote == "" {
		return fmt.Errorf("%w: no kernel-only numbers and no note saying why", ErrIncomplete)
	}
	dt := dtypeLabel(s.DispatchDType)
	p := newPrinter(w)
	p.printf("\n=== Summary (Low Latency, across %d ranks) ===\n", s.Ranks)
	p.line("\n--- Host-observed performance ---")
	p.hostPhase("Dispatch ("+dt+"):", s.Host.Dispatch)
	p.hostPhase("Combine (BF16):", s.Host.Combine)
	p.hostPhase("Total (D+C):", s.Host.Total)
	p.line("\n--- Kernel-only performance ---")
	if k := s.Kernel; k != nil {
		p.kernelPhase("Dispatch:", k.Dispatch)
		p.kernelPhase("Combine:", k.Combine)
	} else {
		p.line("  NOTE: " + oneLine(s.KernelNote))
	}
	p.printf("\nByte counts: dispatch=%s MB (%s), combine=%s MB (BF16), selections=%d\n",
		num(float64(s.Bytes.Dispatch)/1e6), dt, num(float64(s.Bytes.Combine)/1e6), s.Bytes.Selections)
	if b := s.Bytes; b.Messages > 0 {
		p.printf("Bytes between GPUs: dispatch=%s MB (%s), combine=%s MB (BF16), messages=%d\n",
			num(float64(b.WireDispatch)/1e6), dt, num(float64(b.WireCombine)/1e6), b.Messages)
	}
	return p.err
}

// WriteSetup writes the setup timing block. "Group creation:" takes the
// column of ep_bench's "ncclEpCreateGroup:" label.
func WriteSetup(w io.Writer, s Setup) error {
	p := newPrinter(w)
	p.printf("\n=== Setup Timing (across %d ranks) ===\n", s.Ranks)
	p.msLine("Group creation:      ", s.GroupCreationMS)
	p.msLine("Handle creation:     ", s.HandleCreationMS)
	return p.err
}

// WriteMemory writes rank 0's device memory block.
func WriteMemory(w io.Writer, m Memory) error {
	p := newPrinter(w)
	p.line("\n=== GPU Memory (rank 0) ===")
	p.line("Total device memory: " + num(m.TotalMiB) + " MB")
	p.line("Used pre-create:     " + num(m.UsedPreCreateMiB) + " MB")
	p.line("Used post-combine:   " + num(m.UsedPostCombineMiB) + " MB")
	p.line("EP-induced delta:    " + signedNum(m.DeltaMiB) + " MB")
	return p.err
}

// WriteValidation writes the data validation block. As in ep_bench, calc_diff
// follows the combine verdict whether it passed or not.
func WriteValidation(w io.Writer, v Validation) error {
	p := newPrinter(w)
	p.line("\n=== Data Validation ===")
	p.line("Dispatch validation: " + verdict(v.Dispatch))
	if v.DispatchOnly {
		p.printf("\nGlobal validation: Dispatch=%s\n", passed(v.GlobalDispatch))
		return p.err
	}
	p.printf("Combine validation:  %s (calc_diff=%s)\n", verdict(v.Combine), sci(v.CalcDiff))
	p.printf("\nGlobal validation: Dispatch=%s, Combine=%s\n", passed(v.GlobalDispatch), passed(v.GlobalCombine))
	return p.err
}

// printer remembers the first write error so the writers read as a list of lines.
type printer struct {
	w   io.Writer
	err error
}

func newPrinter(w io.Writer) *printer { return &printer{w: w} }

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s+"\n")
	}
}

func (p *printer) hostPhase(label string, h HostPhase) {
	l, t := h.LatencyUS, h.ThroughputGBps
	p.line(pad(label, hostColumn) + "avg=" + num(l.Avg) + " us, min=" + num(l.Min) + " us, max=" + num(l.Max) + " us")
	p.printf("%sthroughput: avg=%s GB/s, min=%s GB/s (rank %d), max=%s GB/s (rank %d)\n",
		continuation, num(t.Avg), num(t.Min), t.MinRank, num(t.Max), t.MaxRank)
}

func (p *printer) kernelPhase(label string, k KernelPhase) {
	l, t := k.LatencyUS, k.ThroughputGBps
	p.line(pad(label, kernelColumn) + "avg=" + num(l.Avg) + " us, min=" + num(l.Min) + " us, max=" + num(l.Max) + " us")
	p.line(continuation + "throughput: avg=" + num(t.Avg) + " GB/s, min=" + num(t.Min) + " GB/s, max=" + num(t.Max) + " GB/s")
}

func (p *printer) msLine(label string, s Stat) {
	p.line(label + "avg=" + num(s.Avg) + " ms, min=" + num(s.Min) + " ms, max=" + num(s.Max) + " ms")
}

// pad left-aligns label in a column of width, keeping at least one space, as
// ep_bench's literal format strings do ("Dispatch (FP8_E4M3): avg=").
func pad(label string, width int) string {
	return label + strings.Repeat(" ", max(1, width-len(label)))
}

// num formats like C's "%.2f", including its spelling of NaN and infinities,
// so a broken measurement prints as ep_bench would print it.
func num(v float64) string { return cfloat(v, "%.2f") }

// signedNum formats like C's "%+.2f".
func signedNum(v float64) string { return cfloat(v, "%+.2f") }

// sci formats like C's "%.6e".
func sci(v float64) string { return cfloat(v, "%.6e") }

func cfloat(v float64, format string) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		if strings.Contains(format, "+") {
			return "+inf"
		}
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return fmt.Sprintf(format, v)
}

func enabled(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

func passed(ok bool) string {
	if ok {
		return "PASSED"
	}
	return "FAILED"
}

func verdict(c Check) string {
	if c.Detail == "" {
		return passed(c.Passed)
	}
	return passed(c.Passed) + " (" + oneLine(c.Detail) + ")"
}

// dtypeLabel defaults an empty dtype to BF16, ep_bench's only format.
func dtypeLabel(dt string) string {
	if dt == "" {
		return "BF16"
	}
	return oneLine(dt)
}

// oneLine keeps free text from breaking the line-oriented format.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
