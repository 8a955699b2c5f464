package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// SweepSchema identifies sweep JSON files.
const SweepSchema = "epbench.sweep/v1"

// SweepPoint is one measured configuration of a sweep.
type SweepPoint struct {
	Tokens  int     `json:"tokens"`
	TopK    int     `json:"top_k"`
	Experts int     `json:"experts"`
	Result  *Result `json:"result"`
}

// Sweep is a series of measurements that differ in one parameter.
type Sweep struct {
	Schema  string       `json:"schema"`
	Varying string       `json:"varying"` // "tokens", "top_k" or "experts"
	Config  Config       `json:"config"`  // the first point's configuration
	Points  []SweepPoint `json:"points"`
}

// ErrBadSweep reports a sweep that cannot be written or read.
var ErrBadSweep = errors.New("report: malformed sweep")

// Value is the point's value of the varying parameter.
func (p SweepPoint) Value(varying string) int {
	switch varying {
	case "top_k":
		return p.TopK
	case "experts":
		return p.Experts
	}
	return p.Tokens
}

func sweepLabel(varying string) string {
	switch varying {
	case "top_k":
		return "top-k"
	case "experts":
		return "experts"
	}
	return "tokens"
}

// WriteSweepHeader writes the column header of the sweep table (units in the
// second line), in the fixed-width style of nccl-tests.
func WriteSweepHeader(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	c := s.Config
	_, err := fmt.Fprintf(w, "# epbench sweep over %s: %d ranks, hidden %d, top-k %d, experts %d, %s, %s, backend %s\n"+
		"#\n"+
		"# %8s %7s %10s %10s %10s %10s %10s %10s\n"+
		"# %8s %7s %10s %10s %10s %10s %10s %10s\n",
		sweepLabel(s.Varying), c.Ranks, c.Hidden, c.TopK, c.Experts, c.DispatchDType, c.CombineMode, c.Backend,
		sweepLabel(s.Varying), "sel", "host-D", "host-C", "host-D+C", "kernel-D", "kernel-C", "D+C-tput",
		"", "(rank0)", "(us)", "(us)", "(us)", "(us)", "(us)", "(GB/s)")
	return err
}

// WriteSweepRow writes one point's line of the sweep table.
func WriteSweepRow(w io.Writer, s *Sweep, p SweepPoint) error {
	if s == nil || p.Result == nil {
		return fmt.Errorf("%w: point without a result", ErrBadSweep)
	}
	sum := p.Result.Summary
	kd, kc := "-", "-"
	if sum.Kernel != nil {
		kd, kc = num(sum.Kernel.Dispatch.LatencyUS.Avg), num(sum.Kernel.Combine.LatencyUS.Avg)
	}
	_, err := fmt.Fprintf(w, "  %8d %7d %10s %10s %10s %10s %10s %10s\n",
		p.Value(s.Varying), sum.Bytes.Selections,
		num(sum.Host.Dispatch.LatencyUS.Avg), num(sum.Host.Combine.LatencyUS.Avg), num(sum.Host.Total.LatencyUS.Avg),
		kd, kc, num(sum.Host.Total.ThroughputGBps.Avg))
	return err
}

// WriteSweepTable writes the header and every point's line.
func WriteSweepTable(w io.Writer, s *Sweep) error {
	if err := WriteSweepHeader(w, s); err != nil {
		return err
	}
	for _, p := range s.Points {
		if err := WriteSweepRow(w, s, p); err != nil {
			return err
		}
	}
	return nil
}

var sweepCSVHeader = []string{
	"tokens", "top_k", "experts", "ranks", "hidden", "dispatch_dtype", "combine_mode", "backend", "selections_rank0",
	"dispatch_bytes_rank0", "combine_bytes_rank0",
	"host_dispatch_avg_us", "host_dispatch_min_us", "host_dispatch_max_us",
	"host_dispatch_tput_avg_gbps", "host_dispatch_tput_min_gbps", "host_dispatch_tput_min_rank", "host_dispatch_tput_max_gbps", "host_dispatch_tput_max_rank",
	"host_combine_avg_us", "host_combine_min_us", "host_combine_max_us",
	"host_combine_tput_avg_gbps", "host_combine_tput_min_gbps", "host_combine_tput_min_rank", "host_combine_tput_max_gbps", "host_combine_tput_max_rank",
	"host_total_avg_us", "host_total_min_us", "host_total_max_us",
	"host_total_tput_avg_gbps", "host_total_tput_min_gbps", "host_total_tput_min_rank", "host_total_tput_max_gbps", "host_total_tput_max_rank",
	"kernel_dispatch_avg_us", "kernel_dispatch_min_us", "kernel_dispatch_max_us",
	"kernel_combine_avg_us", "kernel_combine_min_us", "kernel_combine_max_us",
}

// WriteSweepCSV writes one row per point with every number of its summary;
// kernel columns are empty when the point has no kernel timing.
func WriteSweepCSV(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(sweepCSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	host := func(h HostPhase) []string {
		t := h.ThroughputGBps
		return []string{f(h.LatencyUS.Avg), f(h.LatencyUS.Min), f(h.LatencyUS.Max),
			f(t.Avg), f(t.Min), strconv.Itoa(t.MinRank), f(t.Max), strconv.Itoa(t.MaxRank)}
	}
	for _, p := range s.Points {
		if p.Result == nil {
			return fmt.Errorf("%w: point without a result", ErrBadSweep)
		}
		c, sum := p.Result.Config, p.Result.Summary
		row := []string{strconv.Itoa(p.Tokens), strconv.Itoa(p.TopK), strconv.Itoa(p.Experts), strconv.Itoa(c.Ranks),
			strconv.Itoa(c.Hidden), c.DispatchDType, c.CombineMode, c.Backend, strconv.FormatInt(sum.Bytes.Selections, 10),
			strconv.FormatInt(sum.Bytes.Dispatch, 10), strconv.FormatInt(sum.Bytes.Combine, 10)}
		row = append(row, host(sum.Host.Dispatch)...)
		row = append(row, host(sum.Host.Combine)...)
		row = append(row, host(sum.Host.Total)...)
		if k := sum.Kernel; k != nil {
			row = append(row, f(k.Dispatch.LatencyUS.Avg), f(k.Dispatch.LatencyUS.Min), f(k.Dispatch.LatencyUS.Max),
				f(k.Combine.LatencyUS.Avg), f(k.Combine.LatencyUS.Min), f(k.Combine.LatencyUS.Max))
		} else {
			row = append(row, "", "", "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteSweepJSON writes the sweep with every point's full result (per-rank
// values included).
func WriteSweepJSON(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	out := *s
	out.Schema = SweepSchema
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
}

// ParseSweep reads a sweep written by WriteSweepJSON.
func ParseSweep(r io.Reader) (*Sweep, error) {
	var s Sweep
	dec := json.NewDecoder(io.LimitReader(r, maxJSON))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSweep, err)
	}
	if s.Schema != SweepSchema {
		return nil, fmt.Errorf("%w: schema %q, want %q", ErrBadSweep, s.Schema, SweepSchema)
	}
	if len(s.Points) == 0 {
		return nil, fmt.Errorf("%w: no points", ErrBadSweep)
	}
	for i, p := range s.Points {
		if p.Result == nil {
			return nil, fmt.Errorf("%w: point %d has no result", ErrBadSweep, i)
		}
	}
	return &s, nil
}
