package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// SweepSchema identifies sweep JSON files.
const SweepSchema = "epbench.sweep/v1"

// The parameter a sweep varies (Sweep.Varying).
const (
	VaryTokens  = "tokens"
	VaryTopK    = "top_k"
	VaryExperts = "experts"
)

// SweepPoint is one measured configuration of a sweep. Result holds the
// point's full summary and, in JSON, its per-rank values.
type SweepPoint struct {
	Tokens  int     `json:"tokens"`
	TopK    int     `json:"top_k"`
	Experts int     `json:"experts"`
	Result  *Result `json:"result"`
}

// Sweep is a series of measurements that differ in one parameter.
type Sweep struct {
	Schema  string       `json:"schema"`
	Varying string       `json:"varying"` // VaryTokens, VaryTopK or VaryExperts
	Config  Config       `json:"config"`  // the first point's configuration
	Points  []SweepPoint `json:"points"`
}

// ErrBadSweep reports a sweep that cannot be written or read.
var ErrBadSweep = errors.New("report: malformed sweep")

// Value is the point's value of the varying parameter.
func (p SweepPoint) Value(varying string) int {
	switch varying {
	case VaryTopK:
		return p.TopK
	case VaryExperts:
		return p.Experts
	}
	return p.Tokens
}

// sweepColumn is the varying parameter's name as a table column and in the
// header line.
func sweepColumn(varying string) (string, error) {
	switch varying {
	case VaryTokens:
		return "tokens", nil
	case VaryTopK:
		return "top-k", nil
	case VaryExperts:
		return "experts", nil
	}
	return "", fmt.Errorf("%w: varying %q, want %s, %s or %s", ErrBadSweep, varying, VaryTokens, VaryTopK, VaryExperts)
}

// WriteSweepHeader writes the header of the sweep table in the fixed-width
// style of nccl-tests: the parameters that stay fixed, then the column names
// with their units on the line below.
func WriteSweepHeader(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	col, err := sweepColumn(s.Varying)
	if err != nil {
		return err
	}
	c := s.Config
	fixed := []string{fmt.Sprintf("%d ranks", c.Ranks)}
	if s.Varying != VaryTokens {
		fixed = append(fixed, fmt.Sprintf("tokens %d", c.Tokens))
	}
	fixed = append(fixed, fmt.Sprintf("hidden %d", c.Hidden))
	if s.Varying != VaryTopK {
		fixed = append(fixed, fmt.Sprintf("top-k %d", c.TopK))
	}
	if s.Varying != VaryExperts {
		fixed = append(fixed, fmt.Sprintf("experts %d", c.Experts))
	}
	fixed = append(fixed, c.DispatchDType, c.CombineMode, "backend "+c.Backend)
	_, err = fmt.Fprintf(w, "# epbench sweep over %s: %s\n"+
		"#\n"+
		"# %8s %7s %10s %10s %10s %10s %10s %10s\n"+
		"# %8s %7s %10s %10s %10s %10s %10s %10s\n",
		col, strings.Join(fixed, ", "),
		col, "sel", "host-D", "host-C", "host-D+C", "kernel-D", "kernel-C", "D+C-tput",
		"", "(rank0)", "(us)", "(us)", "(us)", "(us)", "(us)", "(GB/s)")
	return err
}

// WriteSweepRow writes one point's line of the sweep table: averages over
// ranks, "-" for kernel numbers the point lacks. Rows can be written as the
// points are measured, after WriteSweepHeader.
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

// WriteSweepPoint writes point i's line as a sweep measures it: the header
// first, before point 0.
func WriteSweepPoint(w io.Writer, s *Sweep, i int, p SweepPoint) error {
	if i == 0 {
		if err := WriteSweepHeader(w, s); err != nil {
			return err
		}
	}
	return WriteSweepRow(w, s, p)
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

// sweepCSVHeader names the CSV columns. Columns are only ever appended, so
// scripts that index them keep working.
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
	// Kernel throughput min comes from the minimum time, as in ep_bench.
	"kernel_dispatch_tput_avg_gbps", "kernel_dispatch_tput_min_gbps", "kernel_dispatch_tput_max_gbps",
	"kernel_combine_tput_avg_gbps", "kernel_combine_tput_min_gbps", "kernel_combine_tput_max_gbps",
	"warmup_iters", "bench_iters",
}

// WriteSweepCSV writes a header row and one row per point with every number
// of its summary (reduced over ranks; bytes and selections are rank 0's).
// Kernel columns are empty when the point has no kernel timing.
func WriteSweepCSV(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(sweepCSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	stat := func(st Stat) []string { return []string{f(st.Avg), f(st.Min), f(st.Max)} }
	host := func(h HostPhase) []string {
		t := h.ThroughputGBps
		return append(stat(h.LatencyUS), f(t.Avg), f(t.Min), strconv.Itoa(t.MinRank), f(t.Max), strconv.Itoa(t.MaxRank))
	}
	for i, p := range s.Points {
		if p.Result == nil {
			return fmt.Errorf("%w: point %d has no result", ErrBadSweep, i)
		}
		c, sum := p.Result.Config, p.Result.Summary
		row := []string{strconv.Itoa(p.Tokens), strconv.Itoa(p.TopK), strconv.Itoa(p.Experts), strconv.Itoa(c.Ranks),
			strconv.Itoa(c.Hidden), c.DispatchDType, c.CombineMode, c.Backend, strconv.FormatInt(sum.Bytes.Selections, 10),
			strconv.FormatInt(sum.Bytes.Dispatch, 10), strconv.FormatInt(sum.Bytes.Combine, 10)}
		row = append(row, host(sum.Host.Dispatch)...)
		row = append(row, host(sum.Host.Combine)...)
		row = append(row, host(sum.Host.Total)...)
		kernel := make([]string, 12)
		if k := sum.Kernel; k != nil {
			kernel = append(kernel[:0], stat(k.Dispatch.LatencyUS)...)
			kernel = append(kernel, stat(k.Combine.LatencyUS)...)
			kernel = append(kernel, stat(k.Dispatch.ThroughputGBps)...)
			kernel = append(kernel, stat(k.Combine.ThroughputGBps)...)
		}
		row = append(row, kernel...)
		row = append(row, strconv.Itoa(c.Warmup), strconv.Itoa(c.Iters))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteSweepJSON writes the sweep with every point's full result, per-rank
// values included.
func WriteSweepJSON(w io.Writer, s *Sweep) error {
	if s == nil {
		return fmt.Errorf("%w: nil", ErrBadSweep)
	}
	if _, err := sweepColumn(s.Varying); err != nil {
		return err
	}
	for i, p := range s.Points {
		if p.Result == nil {
			return fmt.Errorf("%w: point %d has no result", ErrBadSweep, i)
		}
	}
	out := *s
	out.Schema = SweepSchema
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
}

// ParseSweep reads a sweep written by WriteSweepJSON.
func ParseSweep(r io.Reader) (*Sweep, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return nil, fmt.Errorf("report: read: %w", err)
	}
	if len(data) > maxJSON {
		return nil, fmt.Errorf("%w: JSON larger than %d bytes", ErrBadSweep, maxJSON)
	}
	var s Sweep
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSweep, err)
	}
	if s.Schema != SweepSchema {
		return nil, fmt.Errorf("%w: schema %q, want %q", ErrBadSweep, s.Schema, SweepSchema)
	}
	if _, err := sweepColumn(s.Varying); err != nil {
		return nil, err
	}
	if len(s.Points) == 0 {
		return nil, fmt.Errorf("%w: no points", ErrBadSweep)
	}
	for i, p := range s.Points {
		if p.Result == nil {
			return nil, fmt.Errorf("%w: point %d has no result", ErrBadSweep, i)
		}
		if p.Tokens <= 0 || p.TopK <= 0 || p.Experts <= 0 {
			return nil, fmt.Errorf("%w: point %d: tokens %d, top-k %d, experts %d", ErrBadSweep, i, p.Tokens, p.TopK, p.Experts)
		}
	}
	return &s, nil
}

// ParseSweepFile reads the sweep JSON in path.
func ParseSweepFile(path string) (*Sweep, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	s, err := ParseSweep(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
