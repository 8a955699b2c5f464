package cpuref

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// Exchanger is the part of a communicator the backend uses; *mpi.Comm
// implements it. Counts and displacements are in bytes.
type Exchanger interface {
	Rank() int
	Size() int
	// AlltoallvDeadline exchanges with every rank, giving up at deadline and
	// naming the ranks whose messages did not arrive.
	AlltoallvDeadline(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
		tag int, deadline time.Time) (missing []int, err error)
}

// Message tags of the three exchanges, distinct so that a message of one
// can never be taken for another's.
const (
	tagCounts   = 101
	tagDispatch = 102
	tagCombine  = 103
)

// exchange is one Alltoallv bounded by the timeout (--timeout-ms). Peers
// that do not take part in time make a *bench.TimeoutError naming them; the
// phase names the exchange, e.g. "cpuref dispatch counts exchange".
func (b *Backend) exchange(phase string, tag int, send []byte, sc, sd []int, recv []byte, rc, rd []int) error {
	if b.active != nil {
		return b.exchangeActive(phase, tag, send, sc, sd, recv, rc, rd)
	}
	missing, err := b.comm.AlltoallvDeadline(send, sc, sd, recv, rc, rd, tag, time.Now().Add(b.timeout))
	if len(missing) > 0 {
		return &bench.TimeoutError{Phase: phase, Ranks: missing, After: b.timeout}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", phase, err)
	}
	return nil
}

// ErrClosed is returned by every operation after Close.
var ErrClosed = errors.New("cpuref: backend is closed")

// maxLayoutBytes bounds recv_x ([L, R*T, H]), which grows with experts x
// tokens, so an absurd shape fails in New rather than exhausting memory.
const maxLayoutBytes = 1 << 36

// poison patterns: a quiet bf16 NaN, the E4M3 NaN, a float32 NaN, and -1 for
// the integer outputs.
const (
	poisonBF16 uint16 = 0x7FC1
	poisonFP8  uint8  = E4M3NaN
)

// Backend is the CPU reference of the low-latency dispatch and combine on one
// rank. It is not safe for concurrent use; all calls must come from the
// goroutine that makes this rank's MPI calls.
type Backend struct {
	comm    Exchanger
	timeout time.Duration // bound of every exchange (--timeout-ms)
	shape   ll.Shape
	rank    int
	R, T    int // T: the most tokens per rank, what the buffers hold
	own     int // the tokens this rank dispatches (ll.Shape.Own)
	H, K    int
	E, L    int
	rm      bool   // the rank-major layout
	active  []bool // -T: the mask of active ranks while masking is on, else nil (mask.go)
	dtype   config.DispatchDtype
	mode    config.CombineMode

	// Inputs: the token rows and weights are the same for every routing.
	x       []uint16  // [T, H]
	topk    [][]int64 // per routing: [own, K]
	weights []float32 // [T, K]

	hdr, msg int // dispatch message header and total size in bytes

	// Dispatch exchange.
	dispSend, dispRecv []byte
	cntSend, cntRecv   []byte // one uint32 message count per peer
	four, fourDispls   []int
	sendCounts         []int
	sendDispls         []int
	recvCounts         []int
	recvDispls         []int
	msgDispls          []int  // where the last dispatch's messages of each source start in dispRecv
	msgCount           []int  // how many messages each source sent in the last dispatch
	destMark           []bool // [R] scratch: destination ranks of one token
	qrow               []uint8
	qscales            []float32

	// Dispatch outputs (docs/DESIGN.md). Rank-major: recvX, recvFP8 and
	// recvScales are [R, T, ...], recvCount [R], srcInfo [R, T], and
	// recvTopkIdx, recvTopkW [R, T, K].
	recvX       []uint16 // BF16: [L, R*T, H]
	recvFP8     []uint8  // FP8: [L, R*T, H]
	recvScales  []float32
	recvCount   []int32
	recvTopkIdx []int32
	recvTopkW   []float32
	srcInfo     []int32
	layoutRange []int64
	// rowPos[(s*T+m)*K+k] is the row, inside its local expert, of slot k of
	// the m-th message from source s; -1 when that slot is not local.
	rowPos []int32

	// Combine exchange and output.
	combSend, combRecv []byte
	acc                []float32 // [H] fp32 accumulator
	yrow               []uint16  // [H] FP8: the dequantised expert output
	cursor             []int     // [R] read position per expert rank
	hasRank            []bool    // [R] scratch: expert ranks of one token
	out                []uint16  // [T, H]

	dispatched int         // routing of the last dispatch, -1 before the first
	stamps     []time.Time // bench.Backend.Marks
	marked     []bool
	jitter     time.Duration // --jitter-us: the most an operation waits before it starts
	calls      uint64        // dispatches so far: draws the jitter, as the kernels' epoch does
	rankRows   int           // the generation of the rows in x
	closed     bool
}

var _ bench.Backend = (*Backend)(nil)

// New builds the backend of this rank of comm: it generates the inputs of
// routings 0..cfg.Reroute-1 (routing.TopK with routing.GenSeed(cfg.Seed,
// rank, ranks, j); token rows routing.TokenRows; weights routing.Weights,
// shared by all routings because they depend on the rank only) and
// allocates every buffer the operations use, so that Dispatch and Combine
// allocate nothing.
func New(comm Exchanger, shape ll.Shape, cfg *config.Config) (*Backend, error) {
	if comm == nil {
		return nil, errors.New("cpuref: no communicator")
	}
	if cfg == nil {
		return nil, errors.New("cpuref: no configuration")
	}
	if err := checkShape(shape, comm); err != nil {
		return nil, err
	}
	switch cfg.DispatchDtype {
	case config.DtypeBF16, config.DtypeFP8E4M3:
	default:
		return nil, fmt.Errorf("cpuref: unsupported dispatch dtype %v", cfg.DispatchDtype)
	}
	switch cfg.CombineMode {
	case config.RankLocalReduce, config.DirectSend:
	default:
		return nil, fmt.Errorf("cpuref: unsupported combine mode %v", cfg.CombineMode)
	}
	reroute := max(cfg.Reroute, 1)
	timeout := cfg.Timeout()
	if timeout <= 0 { // a Config built in code without --timeout-ms
		timeout = config.Default().Timeout()
	}
	if reroute > config.MaxIters {
		return nil, fmt.Errorf("cpuref: %d routings exceed %d", reroute, config.MaxIters)
	}

	b := &Backend{
		comm: comm, shape: shape, rank: shape.Rank,
		R: shape.Ranks, T: shape.Tokens, own: shape.Own(), H: shape.Hidden, K: shape.TopK, E: shape.Experts, L: shape.LocalExperts(),
		rm:    shape.RankMajor,
		dtype: cfg.DispatchDtype, mode: cfg.CombineMode, dispatched: -1, timeout: timeout,
	}
	var err error
	b.jitter = time.Duration(cfg.JitterUs) * time.Microsecond
	b.stamps, b.marked = make([]time.Time, 4), make([]bool, 4)
	if b.x, err = routing.TokenRows(b.rank, b.T, b.H); err != nil {
		return nil, fmt.Errorf("cpuref: token rows: %w", err)
	}
	if b.weights, err = routing.Weights(b.rank, b.T, b.K); err != nil {
		return nil, fmt.Errorf("cpuref: weights: %w", err)
	}
	b.topk = make([][]int64, reroute)
	for j := range b.topk {
		if b.topk[j], err = shape.Routing(cfg.Seed, b.rank, j); err != nil {
			return nil, fmt.Errorf("cpuref: routing %d: %w", j, err)
		}
	}
	if err := b.allocate(); err != nil {
		return nil, err
	}
	return b, nil
}

func checkShape(s ll.Shape, comm Exchanger) error {
	switch {
	case s.Ranks != comm.Size():
		return fmt.Errorf("cpuref: shape has %d ranks, the communicator %d", s.Ranks, comm.Size())
	case s.Rank != comm.Rank():
		return fmt.Errorf("cpuref: shape is for rank %d, the communicator says %d", s.Rank, comm.Rank())
	case s.Ranks < 1 || s.Ranks > config.MaxRanks:
		return fmt.Errorf("cpuref: ranks %d outside [1, %d]", s.Ranks, config.MaxRanks)
	case s.Tokens < 1 || s.Tokens > config.MaxTokens:
		return fmt.Errorf("cpuref: tokens %d outside [1, %d]", s.Tokens, config.MaxTokens)
	case s.Own() < 0 || s.Own() > s.Tokens:
		return fmt.Errorf("cpuref: rank %d dispatches %d tokens, outside [0, %d]", s.Rank, s.Own(), s.Tokens)
	case s.Hidden%ScaleBlock != 0 || s.Hidden < config.MinHidden || s.Hidden > config.MaxHidden:
		return fmt.Errorf("cpuref: hidden %d must be a multiple of %d in [%d, %d] (the token rows carry their rank and token id)",
			s.Hidden, ScaleBlock, config.MinHidden, config.MaxHidden)
	case s.Experts < s.Ranks || s.Experts%s.Ranks != 0 || s.Experts > config.MaxExperts:
		return fmt.Errorf("cpuref: experts %d must be a positive multiple of the %d ranks, at most %d", s.Experts, s.Ranks, config.MaxExperts)
	case s.TopK < 1 || s.TopK > config.MaxTopK || s.TopK > s.Experts:
		return fmt.Errorf("cpuref: top-k %d outside [1, min(%d, experts %d)]", s.TopK, config.MaxTopK, s.Experts)
	}
	return nil
}

// allocate sizes every buffer for the worst case of any routing.
func (b *Backend) allocate() error {
	R, T, H, K, L := b.R, b.T, b.H, b.K, b.L
	b.hdr = headerBytes(K)
	payload := 2 * H
	if b.dtype == config.DtypeFP8E4M3 {
		payload = H + 4*(H/ScaleBlock)
	}
	b.msg = b.hdr + payload
	rows := L * R * T // rows of the expert-major receive layout
	if b.rm {
		rows = R * T // slots of the rank-major one
	}
	// A token goes to at most min(R, K) ranks; each source sends at most T
	// messages here. Combine sends one row per received message
	// (rank_local_reduce) or per local slot (direct_send), and receives at
	// most one row per selection.
	combSendRows := R * T
	if b.mode == config.DirectSend && !b.rm {
		combSendRows *= min(K, L)
	}
	sizes := []struct {
		what  string
		bytes int
	}{
		{"dispatch send", T * min(R, K) * b.msg},
		{"dispatch receive", R * T * b.msg},
		{"combine send", combSendRows * 2 * H},
		{"combine receive", T * K * 2 * H},
	}
	for _, s := range sizes {
		if s.bytes > math.MaxInt32 {
			return fmt.Errorf("cpuref: the %s buffer needs %d bytes, beyond MPI's int counts", s.what, s.bytes)
		}
	}
	if rows*H*2 > maxLayoutBytes {
		return fmt.Errorf("cpuref: the expert-major receive layout needs %d bytes, more than %d", rows*H*2, maxLayoutBytes)
	}
	b.dispSend = make([]byte, sizes[0].bytes)
	b.dispRecv = make([]byte, sizes[1].bytes)
	b.combSend = make([]byte, sizes[2].bytes)
	b.combRecv = make([]byte, sizes[3].bytes)

	b.cntSend, b.cntRecv = make([]byte, 4*R), make([]byte, 4*R)
	b.four, b.fourDispls = make([]int, R), make([]int, R)
	for q := range R {
		b.four[q], b.fourDispls[q] = 4, 4*q
	}
	b.sendCounts, b.sendDispls = make([]int, R), make([]int, R)
	b.recvCounts, b.recvDispls = make([]int, R), make([]int, R)
	b.msgDispls, b.msgCount = make([]int, R), make([]int, R)
	b.destMark, b.hasRank, b.cursor = make([]bool, R), make([]bool, R), make([]int, R)

	if b.dtype == config.DtypeFP8E4M3 {
		b.qrow, b.qscales = make([]uint8, H), make([]float32, H/ScaleBlock)
		b.recvFP8, b.recvScales = make([]uint8, rows*H), make([]float32, rows*H/ScaleBlock)
		b.yrow = make([]uint16, H)
	} else {
		b.recvX = make([]uint16, rows*H)
	}
	if b.rm {
		b.recvCount = make([]int32, R)
		b.srcInfo = make([]int32, R*T)
		b.recvTopkIdx, b.recvTopkW = make([]int32, R*T*K), make([]float32, R*T*K)
		b.yrow = make([]uint16, H)
	} else {
		b.recvCount = make([]int32, L)
		b.srcInfo = make([]int32, rows)
		b.layoutRange = make([]int64, L*R)
	}
	b.rowPos = make([]int32, R*T*K)
	b.acc = make([]float32, H)
	b.out = make([]uint16, T*H)
	return nil
}

// Name is "cpu".
func (b *Backend) Name() string { return string(config.ComputeCPU) }

// TopK is this rank's topk_idx of routing j, [Tokens, TopK]; the caller must
// not modify it.
func (b *Backend) TopK(j int) ([]int64, error) {
	if err := b.checkRouting(j); err != nil {
		return nil, err
	}
	return b.topk[j], nil
}

// Weights is this rank's topk_weights, the same for every routing; the
// caller must not modify it.
func (b *Backend) Weights() []float32 { return b.weights }

// Routings is the number of routings Dispatch and Combine accept.
func (b *Backend) Routings() int { return len(b.topk) }

func (b *Backend) checkRouting(j int) error {
	if b.closed {
		return ErrClosed
	}
	if j < 0 || j >= len(b.topk) {
		return fmt.Errorf("cpuref: routing %d outside [0, %d)", j, len(b.topk))
	}
	return nil
}

// Sync returns at once: Dispatch and Combine finish before they return.
func (b *Backend) Sync() error {
	if b.closed {
		return ErrClosed
	}
	return nil
}

// Marks makes n time stamp slots.
func (b *Backend) Marks(n int) error {
	if b.closed {
		return ErrClosed
	}
	if n < 1 {
		return fmt.Errorf("cpuref: %d marks", n)
	}
	b.stamps, b.marked = make([]time.Time, n), make([]bool, n)
	return nil
}

// Mark records the wall clock (monotonic) in slot i.
func (b *Backend) Mark(i int) error {
	if b.closed {
		return ErrClosed
	}
	if i < 0 || i >= len(b.stamps) {
		return fmt.Errorf("cpuref: mark %d outside [0, %d)", i, len(b.stamps))
	}
	b.stamps[i] = time.Now()
	b.marked[i] = true
	return nil
}

// ElapsedUs is the time from mark from to mark to, in microseconds.
func (b *Backend) ElapsedUs(from, to int) (float64, error) {
	if b.closed {
		return 0, ErrClosed
	}
	for _, i := range []int{from, to} {
		if i < 0 || i >= len(b.stamps) {
			return 0, fmt.Errorf("cpuref: mark %d outside [0, %d)", i, len(b.stamps))
		}
		if !b.marked[i] {
			return 0, fmt.Errorf("cpuref: mark %d was never recorded", i)
		}
	}
	return float64(b.stamps[to].Sub(b.stamps[from]).Nanoseconds()) / 1e3, nil
}

// Generation makes the dispatches that follow send the token rows of
// generation g (routing.FillRows).
func (b *Backend) Generation(g int) error {
	if b.closed {
		return ErrClosed
	}
	if g == b.rankRows {
		return nil
	}
	if err := routing.FillRows(b.x, b.rank, b.H, g); err != nil {
		return fmt.Errorf("cpuref: generation %d: %w", g, err)
	}
	b.rankRows = g
	return nil
}

// Poison fills every output with NaN (bf16 0x7FC1, E4M3 0x7F, float32 NaN
// scales) and the integer outputs with -1; with shared, also the exchange
// buffers the peers' messages land in (0xFF bytes: -1 counts, NaN rows).
func (b *Backend) Poison(shared bool) error {
	if b.closed {
		return ErrClosed
	}
	fill(b.recvX, poisonBF16)
	fill(b.recvFP8, poisonFP8)
	fill(b.recvScales, float32(math.NaN()))
	fill(b.recvCount, -1)
	fill(b.srcInfo, -1)
	fill(b.layoutRange, -1)
	fill(b.recvTopkIdx, -2)
	fill(b.recvTopkW, float32(math.NaN()))
	fill(b.out, poisonBF16)
	if shared {
		for _, r := range [][]byte{b.dispRecv, b.cntRecv, b.combRecv} {
			fill(r, 0xFF)
		}
	}
	return nil
}

// wait is the --jitter-us delay of the operation that starts now: 0 ..
// jitter, drawn from the rank, the call and the operation, spent spinning
// (as the kernels do) so that it is as exact as the clock.
func (b *Backend) wait(dispatch bool) {
	d := b.delay(dispatch)
	if d <= 0 { // no jitter: no clock read inside the timed operation
		return
	}
	for until := time.Now().Add(d); time.Now().Before(until); {
	}
}

// delay is how long the current call's operation waits: 0 without jitter,
// else drawn from the call, the rank and the operation, up to the jitter.
func (b *Backend) delay(dispatch bool) time.Duration {
	if b.jitter <= 0 {
		return 0
	}
	op := uint64(0)
	if dispatch {
		op = 1
	}
	return time.Duration(routing.SplitMix64(b.calls<<32|uint64(b.rank)<<1|op) % uint64(b.jitter+1))
}

// fill sets every element of s to v, doubling the filled prefix with copy.
func fill[T any](s []T, v T) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// Snapshot copies this rank's outputs now (the operations are done when
// they return): RecvX for BF16 dispatch, RecvFP8 and RecvScales for FP8, and
// the rest always.
func (b *Backend) Snapshot() (func() (*ll.Outputs, error), error) {
	if b.closed {
		return nil, ErrClosed
	}
	o := &ll.Outputs{
		RecvX:       clone(b.recvX),
		RecvFP8:     clone(b.recvFP8),
		RecvScales:  clone(b.recvScales),
		RecvCount:   clone(b.recvCount),
		SrcInfo:     clone(b.srcInfo),
		LayoutRange: clone(b.layoutRange),
		Out:         clone(b.out[:b.own*b.H]),

		RecvTopkIdx:     clone(b.recvTopkIdx),
		RecvTopkWeights: clone(b.recvTopkW),
	}
	return func() (*ll.Outputs, error) { return o, nil }, nil
}

// clone copies s, keeping nil as nil.
func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// Close drops the buffers; later calls return ErrClosed.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	*b = Backend{closed: true, dispatched: -1}
	return nil
}
