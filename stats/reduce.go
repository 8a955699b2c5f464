package stats

import "fmt"

// Mode selects which of ep_bench's cross-rank rules [Reduce] applies.
type Mode int

// Reduction modes. See the package documentation for the exact rules.
const (
	// Host reduces host-observed statistics: mean of averages, min of mins,
	// max of maxes, throughput min/max tagged with the owning rank.
	Host Mode = iota + 1
	// KernelOnly reduces one value per rank (Sample.Avg): mean, min and max of
	// those values; throughput "min" comes from the minimum time.
	KernelOnly
	// Values reduces one value per rank (Sample.Avg) that is not a phase's
	// time, such as a set-up time: mean, min and max, and no throughput.
	Values
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Host:
		return "host"
	case KernelOnly:
		return "kernel-only"
	case Values:
		return "values"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Local is one rank's contribution to a phase's reduction.
type Local struct {
	// Sample is this rank's statistics in microseconds. KernelOnly reads Avg only.
	Sample Sample
	// Bytes is this rank's payload for the phase (dispatch + combine for total).
	Bytes int64
}

// Throughput is a phase's bandwidth in GB/s across ranks.
type Throughput struct {
	Avg float64
	Min float64
	// MinRank owns Min: in Host mode the rank with the lowest own throughput,
	// in KernelOnly mode the rank with the lowest kernel time.
	MinRank int
	Max     float64
	// MaxRank owns Max: in Host mode the rank with the highest own throughput,
	// in KernelOnly mode the rank with the highest kernel time.
	MaxRank int
}

// RankSample is one rank's statistics as gathered by [Reduce].
type RankSample struct {
	Rank   int
	Sample Sample
	Bytes  int64
	// ThroughputGBps is this rank's bytes over its own average time.
	ThroughputGBps float64
}

// Global is a phase reduced across ranks; every rank receives the same value.
type Global struct {
	Mode  Mode
	Ranks int
	// Avg, Min and Max are in microseconds (or whatever unit the samples were in).
	Avg, Min, Max float64
	Throughput    Throughput
	// PerRank holds every rank's input, indexed by rank, for the JSON output.
	PerRank []RankSample
}

// perRankFields is the number of values each rank contributes to the gather.
const perRankFields = 7

// Reduce combines every rank's Local into one Global under mode. It is
// collective: every rank must call it with the same mode.
func Reduce(c Comm, mode Mode, local Local) (Global, error) {
	if c == nil {
		return Global{}, fmt.Errorf("%w: nil", ErrBadComm)
	}
	n, rank := c.Size(), c.Rank()
	if n <= 0 || rank < 0 || rank >= n {
		return Global{}, fmt.Errorf("%w: rank %d of size %d", ErrBadComm, rank, n)
	}
	if mode != Host && mode != KernelOnly && mode != Values {
		return Global{}, fmt.Errorf("stats: unknown reduction mode %d", int(mode))
	}

	// One SUM carries the sum of averages, rank 0's byte count (the other ranks
	// add zero) and a one-hot gather of every rank's values for the JSON output.
	sums := make([]float64, 2+perRankFields*n)
	sums[0] = local.Sample.Avg
	if rank == 0 {
		sums[1] = float64(local.Bytes)
	}
	s := local.Sample
	copy(sums[2+perRankFields*rank:], []float64{s.Avg, s.Min, s.Max, s.P50, s.P99, float64(s.N), float64(local.Bytes)})
	sums, err := allreduce(c, sums, Sum)
	if err != nil {
		return Global{}, err
	}

	g := Global{Mode: mode, Ranks: n, Avg: sums[0] / float64(n)}
	bytes0 := int64(sums[1])
	g.PerRank = make([]RankSample, n)
	for r := range n {
		v := sums[2+perRankFields*r:]
		rs := RankSample{
			Rank:   r,
			Sample: Sample{Avg: v[0], Min: v[1], Max: v[2], P50: v[3], P99: v[4], N: int(v[5])},
			Bytes:  int64(v[6]),
		}
		rs.ThroughputGBps = ThroughputGBps(rs.Bytes, rs.Sample.Avg)
		g.PerRank[r] = rs
	}

	switch mode {
	case Host:
		return reduceHost(c, g, local, bytes0)
	case Values:
		g, err := reduceKernel(c, g, local, 0)
		g.Throughput = Throughput{}
		return g, err
	}
	return reduceKernel(c, g, local, bytes0)
}

func reduceHost(c Comm, g Global, local Local, bytes0 int64) (Global, error) {
	lo, err := allreduce(c, []float64{local.Sample.Min}, Min)
	if err != nil {
		return Global{}, err
	}
	hi, err := allreduce(c, []float64{local.Sample.Max}, Max)
	if err != nil {
		return Global{}, err
	}
	own := []ValueRank{{Value: ThroughputGBps(local.Bytes, local.Sample.Avg), Rank: c.Rank()}}
	tpLo, err := loc(c, own, false)
	if err != nil {
		return Global{}, err
	}
	tpHi, err := loc(c, own, true)
	if err != nil {
		return Global{}, err
	}
	g.Min, g.Max = lo[0], hi[0]
	g.Throughput = Throughput{
		Avg: ThroughputGBps(bytes0, g.Avg),
		Min: tpLo.Value, MinRank: tpLo.Rank,
		Max: tpHi.Value, MaxRank: tpHi.Rank,
	}
	return g, nil
}

func reduceKernel(c Comm, g Global, local Local, bytes0 int64) (Global, error) {
	own := []ValueRank{{Value: local.Sample.Avg, Rank: c.Rank()}}
	lo, err := loc(c, own, false)
	if err != nil {
		return Global{}, err
	}
	hi, err := loc(c, own, true)
	if err != nil {
		return Global{}, err
	}
	g.Min, g.Max = lo.Value, hi.Value
	// ep_bench's labels are inverted on purpose here: "min" GB/s is computed
	// from the minimum time, so it is the highest bandwidth.
	g.Throughput = Throughput{
		Avg: ThroughputGBps(bytes0, g.Avg),
		Min: ThroughputGBps(bytes0, g.Min), MinRank: lo.Rank,
		Max: ThroughputGBps(bytes0, g.Max), MaxRank: hi.Rank,
	}
	return g, nil
}

// allreduce calls the communicator and checks the answer's length, so a
// faulty adapter yields an error instead of an index panic.
func allreduce(c Comm, in []float64, op Op) ([]float64, error) {
	out, err := c.AllreduceFloat64(in, op)
	if err != nil {
		return nil, fmt.Errorf("stats: allreduce %s: %w", op, err)
	}
	if len(out) != len(in) {
		return nil, fmt.Errorf("%w: allreduce %s returned %d values, want %d", ErrBadComm, op, len(out), len(in))
	}
	return out, nil
}

func loc(c Comm, in []ValueRank, isMax bool) (ValueRank, error) {
	var out []ValueRank
	var err error
	name := "minloc"
	if isMax {
		name = "maxloc"
		out, err = c.AllreduceMaxLoc(in)
	} else {
		out, err = c.AllreduceMinLoc(in)
	}
	if err != nil {
		return ValueRank{}, fmt.Errorf("stats: allreduce %s: %w", name, err)
	}
	if len(out) != len(in) {
		return ValueRank{}, fmt.Errorf("%w: allreduce %s returned %d values, want %d", ErrBadComm, name, len(out), len(in))
	}
	return out[0], nil
}
