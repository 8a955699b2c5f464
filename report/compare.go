package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// CompareOptions shapes the comparison table.
type CompareOptions struct {
	// KernelOnly leads with the kernel-only rows and titles the table
	// "kernel-only" when every input has kernel numbers.
	KernelOnly bool
}

// ErrNoInputs reports a comparison without inputs.
var ErrNoInputs = errors.New("report: nothing to compare")

type compareRow struct {
	label string
	value func(*Parsed) float64
}

func hostRows() []compareRow {
	var rows []compareRow
	for _, ph := range []struct {
		name string
		get  func(*Parsed) HostPhase
	}{
		{"Dispatch", func(p *Parsed) HostPhase { return p.Summary.Host.Dispatch }},
		{"Combine", func(p *Parsed) HostPhase { return p.Summary.Host.Combine }},
		{"D+C", func(p *Parsed) HostPhase { return p.Summary.Host.Total }},
	} {
		rows = append(rows, statRows("Host "+ph.name, func(p *Parsed) Stat { return ph.get(p).LatencyUS })...)
	}
	return rows
}

func kernelRows() []compareRow {
	return append(
		statRows("Kernel Dispatch", func(p *Parsed) Stat { return p.Summary.Kernel.Dispatch.LatencyUS }),
		statRows("Kernel Combine", func(p *Parsed) Stat { return p.Summary.Kernel.Combine.LatencyUS })...)
}

func statRows(prefix string, get func(*Parsed) Stat) []compareRow {
	return []compareRow{
		{prefix + " avg", func(p *Parsed) float64 { return get(p).Avg }},
		{prefix + " min", func(p *Parsed) float64 { return get(p).Min }},
		{prefix + " max", func(p *Parsed) float64 { return get(p).Max }},
	}
}

// WriteCompare prints the unified table of the seeds' driver: one column per
// input, host latency avg/min/max per phase in microseconds, then kernel-only
// rows when every input has them (first with KernelOnly). With exactly two
// inputs it ends with "Host D+C ratio a/b = X.XXx" (and, with KernelOnly,
// the same ratio of kernel dispatch+combine averages).
func WriteCompare(w io.Writer, inputs []*Parsed, opt CompareOptions) error {
	if len(inputs) == 0 {
		return ErrNoInputs
	}
	hasKernel := true
	for i, in := range inputs {
		if in == nil {
			return fmt.Errorf("report: compare input %d is nil", i)
		}
		hasKernel = hasKernel && in.Summary.Kernel != nil
	}
	labels := make([]string, len(inputs))
	for i, in := range inputs {
		labels[i] = cut(oneLine(in.Label), labelWidth)
		if labels[i] == "" {
			labels[i] = fmt.Sprintf("input%d", i+1)
		}
	}

	title := "host-observed"
	rows := hostRows()
	switch {
	case opt.KernelOnly && hasKernel:
		title = "kernel-only"
		rows = append(kernelRows(), rows...)
	case hasKernel:
		rows = append(rows, kernelRows()...)
	}

	bw := bufio.NewWriter(w)
	p := newPrinter(bw)
	p.printf("\n=== Unified EP Low-Latency Summary (%s, us) ===\n", title)
	hdr := fmt.Sprintf("%-24s", "metric")
	for _, l := range labels {
		hdr += fmt.Sprintf("%*s", labelWidth, l)
	}
	p.line(hdr)
	p.line(strings.Repeat("-", len(hdr)))
	for _, r := range rows {
		line := fmt.Sprintf("%-24s", r.label)
		for _, in := range inputs {
			line += fmt.Sprintf("%*.2f", labelWidth, r.value(in))
		}
		p.line(line)
	}
	if opt.KernelOnly && !hasKernel {
		var missing []string
		for i, in := range inputs {
			if in.Summary.Kernel == nil {
				missing = append(missing, labels[i])
			}
		}
		p.line("  NOTE: kernel-only requested but kernel timing is missing for " + strings.Join(missing, ", ") + ".")
	}
	if len(inputs) == 2 {
		a, b := inputs[0], inputs[1]
		if opt.KernelOnly && hasKernel {
			ka := a.Summary.Kernel.Dispatch.LatencyUS.Avg + a.Summary.Kernel.Combine.LatencyUS.Avg
			kb := b.Summary.Kernel.Dispatch.LatencyUS.Avg + b.Summary.Kernel.Combine.LatencyUS.Avg
			p.ratio("Kernel", labels[0], labels[1], ka, kb)
		}
		p.ratio("Host", labels[0], labels[1], a.Summary.Host.Total.LatencyUS.Avg, b.Summary.Host.Total.LatencyUS.Avg)
	}
	if p.err != nil {
		return p.err
	}
	return bw.Flush()
}

// ratio prints a/b unless it is undefined.
func (p *printer) ratio(kind, la, lb string, a, b float64) {
	r := a / b
	if b == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return
	}
	p.printf("\n%s D+C ratio %s/%s = %.2fx\n", kind, la, lb, r)
}
