package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// CompareOptions shapes the comparison table.
type CompareOptions struct {
	// KernelOnly leads with the kernel-only rows and titles the table
	// "kernel-only" when every input has kernel numbers; the rows then end
	// with the seed driver's "representative" kernel times (the minimum over
	// ranks, which its Python benchmark leads with).
	KernelOnly bool
	// Notes are printed under the table, one "  NOTE: " line each.
	Notes []string
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

// reprRows are the seed driver's kernel-only rows: the minimum over ranks.
func reprRows() []compareRow {
	return []compareRow{
		{"Kernel Dispatch repr", func(p *Parsed) float64 { return p.Summary.Kernel.Dispatch.LatencyUS.Min }},
		{"Kernel Combine repr", func(p *Parsed) float64 { return p.Summary.Kernel.Combine.LatencyUS.Min }},
	}
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
// rows when every input has them (first with KernelOnly). Each column is at
// least 14 characters wide, as the seed's, and two wider than its label or
// number, so columns never touch; labels are printed whole. With exactly two
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
		labels[i] = oneLine(in.Label)
		if labels[i] == "" {
			labels[i] = fmt.Sprintf("input%d", i+1)
		}
	}

	title := "host-observed"
	rows := hostRows()
	switch {
	case opt.KernelOnly && hasKernel:
		title = "kernel-only"
		rows = append(append(kernelRows(), reprRows()...), rows...)
	case hasKernel:
		rows = append(rows, kernelRows()...)
	}

	bw := bufio.NewWriter(w)
	p := newPrinter(bw)
	p.printf("\n=== Unified EP Low-Latency Summary (%s, us) ===\n", title)
	widths := make([]int, len(inputs))
	for i, in := range inputs {
		widths[i] = max(labelWidth, utf8.RuneCountInString(labels[i])+2)
		for _, r := range rows {
			widths[i] = max(widths[i], len(fmt.Sprintf("%.2f", r.value(in)))+2)
		}
	}
	hdr := fmt.Sprintf("%-24s", "metric")
	for i, l := range labels {
		hdr += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(l)) + l
	}
	p.line(hdr)
	p.line(strings.Repeat("-", utf8.RuneCountInString(hdr)))
	for _, r := range rows {
		line := fmt.Sprintf("%-24s", r.label)
		for i, in := range inputs {
			line += fmt.Sprintf("%*.2f", widths[i], r.value(in))
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
	for _, n := range opt.Notes {
		p.line("  NOTE: " + oneLine(n))
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
