package config

import (
	"github.com/spf13/pflag"
)

// Sweep is `epbench sweep`'s command line: the benchmark's flags, one of
// -t, -k and -e with a comma-separated list.
type Sweep struct {
	Varying string    // "tokens", "top_k" or "experts" (report.Vary*)
	Values  []int     // the list, in the order given
	Points  []*Config // the configuration of every value, each checked
	CSVPath string    // --csv
	// Version is set, and nothing else, for --version.
	Version bool
}

// sweepLists are the flags that may take a sweep's list.
var sweepLists = []struct{ varying, name string }{
	{"tokens", "num-tokens"}, {"top_k", "num-topk"}, {"experts", "num-experts"},
}

// ParseSweep reads a sweep's command line (without "sweep"). Every point's
// configuration is checked here, before anything runs. -h/--help returns
// ErrHelp; every other error is a *UsageError.
func ParseSweep(args []string, getenv func(string) string) (*Sweep, error) {
	sw := &Sweep{}
	lists := map[string]*[]int{}
	for _, l := range sweepLists {
		lists[l.name] = new([]int)
	}
	base, source, err := parse(args, getenv, lists, func(fs *pflag.FlagSet) {
		bindPath(fs, &sw.CSVPath, "csv", "file", "also write the sweep as CSV to `FILE`")
	})
	if err != nil {
		return nil, err
	}
	if base.ShowVersion {
		return &Sweep{Version: true}, nil
	}
	if base.MaskTest {
		return nil, usageErr("--mask-test", "runs once, after a benchmark, not in a sweep")
	}
	var flag string
	for _, l := range sweepLists {
		if len(*lists[l.name]) < 2 {
			continue
		}
		if sw.Varying != "" {
			return nil, usageErr("sweep", "only one of -t, -k, -e may take a list")
		}
		sw.Varying, sw.Values, flag = l.varying, *lists[l.name], l.name
	}
	if sw.Varying == "" {
		return nil, usageErr("sweep", "give a comma-separated list to -t, -k or -e (see epbench sweep --help)")
	}
	varied := configIntNamed(flag)
	for _, v := range sw.Values {
		c := *base
		*varied.field(&c) = v
		if err := c.check(source); err != nil {
			return nil, err
		}
		sw.Points = append(sw.Points, &c)
	}
	return sw, nil
}

// SweepUsage is the help text of `epbench sweep`.
func SweepUsage() string {
	return `usage: mpirun -np N epbench sweep -t 1,2,4,8,16,32,64,128,256 [flags] [--csv FILE] [--json FILE]

Runs the full paired measurement (warm-up, timed loop, kernel timing,
reductions) once per value of one list-valued flag: -t (tokens per rank; the
buffers are set up once, for the largest), -k or -e. Rank 0 prints one line
per value; --csv and --json save every number (per-rank values in JSON).
Every other flag is the benchmark's (see epbench --help).
`
}
