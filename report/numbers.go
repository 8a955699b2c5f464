package report

import (
	"fmt"
	"math"
)

// possible reports whether v can be a time, a throughput or a size: finite
// and not negative.
func possible(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// CheckNumbers reports the first number of s that no run can produce (NaN,
// infinite or negative), named by its JSON field, e.g.
// "host.dispatch.latency_us.avg = -1: impossible value".
func (s *Summary) CheckNumbers() error {
	type field struct {
		name string
		v    float64
	}
	var fields []field
	stat := func(name string, st Stat) {
		fields = append(fields, field{name + ".avg", st.Avg}, field{name + ".min", st.Min}, field{name + ".max", st.Max})
	}
	for _, ph := range []struct {
		name string
		p    HostPhase
	}{{"dispatch", s.Host.Dispatch}, {"combine", s.Host.Combine}, {"total", s.Host.Total}} {
		stat("host."+ph.name+".latency_us", ph.p.LatencyUS)
		tp := ph.p.ThroughputGBps
		stat("host."+ph.name+".throughput_gbps", Stat{Avg: tp.Avg, Min: tp.Min, Max: tp.Max})
	}
	if k := s.Kernel; k != nil {
		stat("kernel.dispatch.latency_us", k.Dispatch.LatencyUS)
		stat("kernel.dispatch.throughput_gbps", k.Dispatch.ThroughputGBps)
		stat("kernel.combine.latency_us", k.Combine.LatencyUS)
		stat("kernel.combine.throughput_gbps", k.Combine.ThroughputGBps)
	}
	fields = append(fields, field{"bytes.dispatch", float64(s.Bytes.Dispatch)}, field{"bytes.combine", float64(s.Bytes.Combine)},
		field{"bytes.selections", float64(s.Bytes.Selections)})
	for _, f := range fields {
		if !possible(f.v) {
			return fmt.Errorf("%s = %v: impossible value", f.name, f.v)
		}
	}
	return nil
}
