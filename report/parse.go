package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Format says which program wrote a parsed summary.
type Format int

// Summary formats ParseSummary reads.
const (
	// FormatNCCLEP is NVIDIA NCCL's ep_bench (contrib/nccl_ep, v2.30.7).
	FormatNCCLEP Format = iota + 1
	// FormatNCCLExtensions is the later ep_bench of nccl-extensions, with bus
	// and algorithm bandwidth lines.
	FormatNCCLExtensions
	// FormatSeed is the Python ep_bench_ll.py port ("[cfg]" header,
	// "(representative)" kernel lines).
	FormatSeed
	// FormatEpbench is epbench's own text output.
	FormatEpbench
	// FormatEpbenchJSON is epbench's --json output.
	FormatEpbenchJSON
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatNCCLEP:
		return "nccl-ep ep_bench"
	case FormatNCCLExtensions:
		return "nccl-extensions ep_bench"
	case FormatSeed:
		return "ep_bench_ll.py"
	case FormatEpbench:
		return "epbench text"
	case FormatEpbenchJSON:
		return "epbench JSON"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Parsed is one input of a comparison, in the same model the writers use.
// Host latencies are always present. Throughputs and byte counts are filled
// when the format prints them (nccl-extensions' bus bandwidth is a mean of
// per-rank values, not ep_bench's rank-0 ratio); the seeds' kernel lines
// carry no throughput. Summary.Kernel is nil unless both kernel phases were
// found.
type Parsed struct {
	// Label names the input in a comparison; ParseFile sets it from the path.
	Label   string
	Format  Format
	Config  *Config // nil when the input has no configuration header
	Summary Summary
}

// ErrNoSummary reports input without a low-latency summary block.
var ErrNoSummary = errors.New("report: no low-latency summary found")

// ErrBadSummary reports a summary block that is incomplete or ambiguous.
var ErrBadSummary = errors.New("report: malformed summary")

// maxLine bounds one input line; real outputs stay far below it.
const maxLine = 1 << 20

// maxJSON bounds a JSON result; per-rank values of thousands of ranks fit.
const maxJSON = 64 << 20

// labelWidth is the compare table's narrowest column width.
const labelWidth = 14

// ParseFile parses the summary in path and labels it with LabelFromPath.
// Its errors name path once.
func ParseFile(path string) (*Parsed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ParseSummary(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.Label = LabelFromPath(path)
	return p, nil
}

// LabelFromPath is the file name without its last extension (the whole
// name when that would leave nothing).
func LabelFromPath(path string) string {
	base := filepath.Base(path)
	if l := strings.TrimSuffix(base, filepath.Ext(base)); l != "" {
		return l
	}
	return base
}

// ParseSummary reads one run's output in any Format and returns its summary.
// Input that starts with '{' is read as epbench JSON. Text may contain other
// lines (logs, set-up timing) around exactly one summary block.
func ParseSummary(r io.Reader) (*Parsed, error) {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil, ErrNoSummary
		}
		if err != nil {
			return nil, fmt.Errorf("report: read: %w", err)
		}
		if b == ' ' || b == '\t' || b == '\n' || b == '\r' {
			continue
		}
		if err := br.UnreadByte(); err != nil {
			return nil, fmt.Errorf("report: read: %w", err)
		}
		if b == '{' {
			return parseJSON(br)
		}
		return parseText(br)
	}
}

func parseJSON(r io.Reader) (*Parsed, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return nil, fmt.Errorf("report: read: %w", err)
	}
	if len(data) > maxJSON {
		return nil, fmt.Errorf("%w: JSON larger than %d bytes", ErrBadSummary, maxJSON)
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%w: JSON: %v", ErrBadSummary, err)
	}
	if res.Schema != Schema {
		return nil, fmt.Errorf("%w: JSON schema %q, want %q", ErrBadSummary, res.Schema, Schema)
	}
	if res.Summary.Ranks < 1 {
		return nil, fmt.Errorf("%w: JSON summary has %d ranks", ErrBadSummary, res.Summary.Ranks)
	}
	if err := res.Summary.CheckNumbers(); err != nil {
		return nil, fmt.Errorf("%w: JSON summary: %v", ErrBadSummary, err)
	}
	cfg := res.Config
	return &Parsed{Format: FormatEpbenchJSON, Config: &cfg, Summary: res.Summary}, nil
}

// numPat matches one printed number, including C's nan and inf; rx
// patterns write it as {N}.
const numPat = `([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?nan|[-+]?inf)`

func rx(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, "{N}", numPat))
}

var (
	summaryRe    = regexp.MustCompile(`^=== Summary \(Low Latency, across ([0-9]+) ranks\) ===$`)
	hostRe       = rx(`^(Dispatch|Combine|Total)( ?\(([^)]*)\))?:( +)avg={N} ?us, ?min={N} ?us, ?max={N} ?us`)
	hostTputRe   = rx(`^throughput: avg={N} GB/s, min={N} GB/s \(rank ([0-9]+)\), max={N} GB/s \(rank ([0-9]+)\)`)
	hostBusRe    = rx(`^bus bandwidth \(excl\. protocol headers\): avg={N} GB/s, min={N} GB/s \(rank ([0-9]+)\), max={N} GB/s \(rank ([0-9]+)\)`)
	kernelRe     = rx(`^(Dispatch|Combine): +avg={N} ?us, ?min={N} ?us, ?max={N} ?us`)
	kernelRepRe  = rx(`^(Dispatch|Combine): +min={N} ?us \(representative\) *\[avg={N}, ?max={N}`)
	kernelTputRe = rx(`^throughput: avg={N} GB/s, min={N} GB/s, max={N} GB/s`)
	kernelBusRe  = rx(`^bus bandwidth \(excl\. protocol headers\): avg={N} GB/s, min={N} GB/s, max={N} GB/s`)
	bytesRe      = rx(`^Byte counts: dispatch={N} MB \(([^)]*)\), combine={N} MB \(([^)]*)\), selections=([0-9]+)`)
	payloadRe    = rx(`^Mean payload/rank: dispatch={N} MB \({N} messages\), combine={N} MB \({N} messages\), valid selections={N}`)
	headerLineRe = regexp.MustCompile(`^  ([A-Za-z][A-Za-z -]*?): +(.*)$`)
	expertsRe    = regexp.MustCompile(`^([0-9]+) \(local: ([0-9]+)\)`)
)

const ncclTitle = "=== NCCL EP Performance Benchmark ==="

type section int

const (
	beforeSummary section = iota
	inSummary             // after the summary title, before a section header
	inHost
	inKernel
	afterSummary
)

// textParser follows the summary block line by line.
type textParser struct {
	line int
	sec  section

	title     string // ep_bench's or epbench's title, when seen
	cfg       Config
	cfgSeen   bool
	ranks     int
	summaries int

	s          Summary
	host       [3]bool // dispatch, combine, total seen
	kernel     [2]bool
	lastHost   *HostPhase
	lastKernel *KernelPhase
	kernelPerf KernelPerf

	extensions bool // a line only nccl-extensions prints
	seed       bool // a line only the Python port prints
}

func parseText(r io.Reader) (*Parsed, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	p := &textParser{}
	for sc.Scan() {
		p.line++
		if err := p.feed(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrBadSummary, p.line+1, maxLine)
		}
		return nil, fmt.Errorf("report: read: %w", err)
	}
	return p.finish()
}

func (p *textParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrBadSummary, p.line, fmt.Sprintf(format, args...))
}

func (p *textParser) feed(raw string) error {
	raw = strings.TrimRight(raw, "\r")
	text := strings.TrimSpace(raw)
	if m := summaryRe.FindStringSubmatch(text); m != nil {
		p.summaries++
		if p.summaries > 1 {
			return p.errorf("a second summary block; pass one run per input")
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return p.errorf("rank count %q: %v", m[1], err)
		}
		p.ranks, p.sec = n, inSummary
		return nil
	}
	switch p.sec {
	case beforeSummary:
		p.header(raw, text)
		return nil
	case afterSummary:
		return nil
	}
	switch {
	case text == "--- Host-observed performance ---":
		p.sec = inHost
		return nil
	case strings.HasPrefix(text, "--- Kernel-only performance"):
		if text != "--- Kernel-only performance ---" {
			p.seed = true // the Python port names its timer in the header
		}
		p.sec, p.lastHost = inKernel, nil
		return nil
	case strings.HasPrefix(text, "==="):
		p.sec = afterSummary
		return nil
	case strings.HasPrefix(text, "Byte counts:"):
		return p.byteCounts(text)
	case strings.HasPrefix(text, "Mean payload/rank:"):
		return p.meanPayload(text)
	}
	switch p.sec {
	case inHost:
		return p.hostLine(text)
	case inKernel:
		return p.kernelLine(text)
	}
	return nil
}

// header reads configuration lines before the summary.
func (p *textParser) header(raw, text string) {
	if text == Title || text == ncclTitle {
		p.title = text
		return
	}
	if rest, ok := strings.CutPrefix(text, "[cfg] "); ok {
		p.seed = true
		p.seedConfig(rest)
		return
	}
	if p.title == "" {
		return
	}
	m := headerLineRe.FindStringSubmatch(raw)
	if m == nil {
		return
	}
	key, val := m[1], strings.TrimSpace(m[2])
	c := &p.cfg
	seen := true
	switch key {
	case "Algorithm":
		c.Algorithm = val
	case "Layout":
		c.Layout = val
	case "Ranks":
		setInt(&c.Ranks, val)
	case "Max num SMs":
		if val != "auto" {
			setInt(&c.MaxNumSMs, val)
		}
	case "Sub-test":
		c.SubTest = val
	case "Tokens":
		setInt(&c.Tokens, val)
	case "Hidden":
		setInt(&c.Hidden, val)
	case "Top-k":
		setInt(&c.TopK, val)
	case "Experts":
		if e := expertsRe.FindStringSubmatch(val); e != nil {
			setInt(&c.Experts, e[1])
			setInt(&c.LocalExperts, e[2])
		} else {
			setInt(&c.Experts, val)
		}
	case "Warmup iters":
		setInt(&c.Warmup, val)
	case "Benchmark iters":
		setInt(&c.Iters, val)
	case "Dispatch dtype":
		c.DispatchDType = strings.ToUpper(val)
	case "Profile mode":
		c.ProfileMode = isEnabled(val)
	case "NVLink":
		c.NVLink = isEnabled(val)
	case "Validate mode":
		c.Validate = isEnabled(val)
	case "Dynamic tokens":
		c.DynamicTokens = isEnabled(val)
	case "CUPTI":
		c.CUPTI = val
	case "Use zero-copy":
		c.ZeroCopy = isEnabled(val)
	case "Backend":
		c.Backend = val
	case "Combine mode":
		c.CombineMode = val
	case "Timing":
		c.BackToBack = val == TimingBackToBack
	default:
		seen = false
	}
	p.cfgSeen = p.cfgSeen || seen
}

// seedConfig reads the Python port's "[cfg] key=value ..." line.
func (p *textParser) seedConfig(rest string) {
	c := &p.cfg
	for _, kv := range strings.Fields(rest) {
		key, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		seen := true
		switch key {
		case "algorithm":
			c.Algorithm = val
		case "num_ranks":
			setInt(&c.Ranks, val)
		case "tokens/rank":
			setInt(&c.Tokens, val)
		case "hidden":
			setInt(&c.Hidden, val)
		case "num_experts":
			setInt(&c.Experts, val)
		case "top_k":
			setInt(&c.TopK, val)
		case "warmup":
			setInt(&c.Warmup, val)
		case "iters":
			setInt(&c.Iters, val)
		case "dispatch_dtype":
			c.DispatchDType = strings.ToUpper(val)
		case "combine_mode":
			c.CombineMode = val
		default:
			seen = false
		}
		p.cfgSeen = p.cfgSeen || seen
	}
	if c.Ranks > 0 && c.Experts%c.Ranks == 0 {
		c.LocalExperts = c.Experts / c.Ranks
	}
}

func (p *textParser) hostLine(text string) error {
	if m := hostRe.FindStringSubmatch(text); m != nil {
		v, err := p.nums(m[5:8]...)
		if err != nil {
			return err
		}
		idx := map[string]int{"Dispatch": 0, "Combine": 1, "Total": 2}[m[1]]
		if p.host[idx] {
			return p.errorf("a second host %s line", m[1])
		}
		p.host[idx] = true
		ph := [...]*HostPhase{&p.s.Host.Dispatch, &p.s.Host.Combine, &p.s.Host.Total}[idx]
		ph.LatencyUS = Stat{Avg: v[0], Min: v[1], Max: v[2]}
		p.lastHost = ph
		if m[2] == "" {
			p.extensions = true // "Dispatch:  avg=" has no dtype label
		} else if label := m[1] + m[2] + ":"; !aligned(label, len(m[4])) {
			p.seed = true // "Dispatch (BF16): avg=" is not padded to ep_bench's column
		}
		if idx == 0 && m[3] != "" {
			p.s.DispatchDType = strings.ToUpper(m[3])
		}
		return nil
	}
	if m := hostTputRe.FindStringSubmatch(text); m != nil {
		return p.hostThroughput(m)
	}
	if m := hostBusRe.FindStringSubmatch(text); m != nil {
		p.extensions = true
		return p.hostThroughput(m)
	}
	if strings.HasPrefix(text, "algorithm bandwidth:") {
		p.extensions = true
	}
	return nil
}

func (p *textParser) hostThroughput(m []string) error {
	if p.lastHost == nil {
		return nil
	}
	v, err := p.nums(m[1], m[2], m[4])
	if err != nil {
		return err
	}
	lo, err1 := strconv.Atoi(m[3])
	hi, err2 := strconv.Atoi(m[5])
	if err := errors.Join(err1, err2); err != nil {
		return p.errorf("rank: %v", err)
	}
	p.lastHost.ThroughputGBps = RankedStat{Avg: v[0], Min: v[1], MinRank: lo, Max: v[2], MaxRank: hi}
	p.lastHost = nil
	return nil
}

func (p *textParser) kernelLine(text string) error {
	if m := kernelRe.FindStringSubmatch(text); m != nil {
		v, err := p.nums(m[2:5]...)
		if err != nil {
			return err
		}
		return p.kernelPhase(m[1], Stat{Avg: v[0], Min: v[1], Max: v[2]})
	}
	if m := kernelRepRe.FindStringSubmatch(text); m != nil {
		p.seed = true
		v, err := p.nums(m[2:5]...) // printed as min, avg, max
		if err != nil {
			return err
		}
		return p.kernelPhase(m[1], Stat{Avg: v[1], Min: v[0], Max: v[2]})
	}
	m := kernelTputRe.FindStringSubmatch(text)
	if m == nil {
		if m = kernelBusRe.FindStringSubmatch(text); m != nil {
			p.extensions = true
		}
	}
	if m != nil {
		if p.lastKernel == nil {
			return nil
		}
		v, err := p.nums(m[1:4]...)
		if err != nil {
			return err
		}
		p.lastKernel.ThroughputGBps = Stat{Avg: v[0], Min: v[1], Max: v[2]}
		p.lastKernel = nil
		return nil
	}
	if strings.HasPrefix(text, "algorithm bandwidth:") {
		p.extensions = true
		return nil
	}
	if note, ok := strings.CutPrefix(text, "NOTE: "); ok && p.s.KernelNote == "" {
		p.s.KernelNote = note
	}
	return nil
}

// kernelPhase keeps the first line of each phase: the Python port may print a
// second kernel section, and its first one is the one its driver reads.
func (p *textParser) kernelPhase(name string, st Stat) error {
	idx, ph := 0, &p.kernelPerf.Dispatch
	if name == "Combine" {
		idx, ph = 1, &p.kernelPerf.Combine
	}
	if p.kernel[idx] {
		p.lastKernel = nil
		return nil
	}
	p.kernel[idx] = true
	ph.LatencyUS = st
	p.lastKernel = ph
	return nil
}

func (p *textParser) byteCounts(text string) error {
	m := bytesRe.FindStringSubmatch(text)
	if m == nil {
		return p.errorf("unreadable byte counts %q", text)
	}
	v, err := p.nums(m[1], m[3])
	if err != nil {
		return err
	}
	sel, err := strconv.ParseInt(m[5], 10, 64)
	if err != nil {
		return p.errorf("selections %q: %v", m[5], err)
	}
	p.s.Bytes = Bytes{Dispatch: megabytes(v[0]), Combine: megabytes(v[1]), Selections: sel}
	if p.s.DispatchDType == "" {
		p.s.DispatchDType = strings.ToUpper(m[2])
	}
	return nil
}

func (p *textParser) meanPayload(text string) error {
	p.extensions = true
	m := payloadRe.FindStringSubmatch(text)
	if m == nil {
		return p.errorf("unreadable mean payload %q", text)
	}
	v, err := p.nums(m[1], m[3], m[5])
	if err != nil {
		return err
	}
	p.s.Bytes = Bytes{Dispatch: megabytes(v[0]), Combine: megabytes(v[1]), Selections: int64(math.Round(clampCount(v[2])))}
	return nil
}

func (p *textParser) finish() (*Parsed, error) {
	if p.summaries == 0 {
		return nil, ErrNoSummary
	}
	var missing []string
	for i, name := range []string{"Dispatch", "Combine", "Total (D+C)"} {
		if !p.host[i] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: no host-observed %s line", ErrBadSummary, strings.Join(missing, ", "))
	}
	out := &Parsed{Format: FormatNCCLEP, Summary: p.s}
	switch {
	case p.title == Title:
		out.Format = FormatEpbench
	case p.extensions:
		out.Format = FormatNCCLExtensions
	case p.seed:
		out.Format = FormatSeed
	}
	out.Summary.Ranks = p.ranks
	if p.kernel[0] && p.kernel[1] {
		k := p.kernelPerf
		out.Summary.Kernel = &k
		out.Summary.KernelNote = ""
	}
	if p.cfgSeen {
		cfg := p.cfg
		out.Config = &cfg
		if out.Summary.DispatchDType == "" {
			out.Summary.DispatchDType = cfg.DispatchDType
		}
	}
	return out, nil
}

// nums converts matched numbers; a match can still overflow (1e999), or
// be a number no run prints (nan, inf, a negative time, throughput or size).
func (p *textParser) nums(ss ...string) ([]float64, error) {
	out := make([]float64, len(ss))
	for i, s := range ss {
		v, err := parseNum(s)
		if err != nil {
			return nil, p.errorf("number %q: %v", s, err)
		}
		if !possible(v) {
			return nil, p.errorf("impossible value %q (times, throughputs and sizes are finite and not negative)", s)
		}
		out[i] = v
	}
	return out, nil
}

// parseNum reads a number as C's printf writes it; glibc prints "-nan".
func parseNum(s string) (float64, error) {
	if strings.HasSuffix(s, "nan") {
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// aligned reports whether a host label is followed by ep_bench's padding:
// "avg=" in column 18, or one space after a longer label.
func aligned(label string, spaces int) bool {
	if len(label) >= hostColumn {
		return spaces == 1
	}
	return len(label)+spaces == hostColumn
}

// megabytes converts a printed MB (1e6 bytes) value back to bytes; the
// printed rounding is all that is left of the exact count.
func megabytes(mb float64) int64 { return int64(math.Round(clampCount(mb * 1e6))) }

// clampCount keeps a parsed count inside int64 so conversions stay defined.
func clampCount(v float64) float64 {
	if !(v >= 0) {
		return 0
	}
	return math.Min(v, 1<<62)
}

func setInt(dst *int, s string) {
	if v, err := strconv.Atoi(s); err == nil {
		*dst = v
	}
}

func isEnabled(s string) bool { return strings.HasPrefix(s, "enabled") }
