package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// This file lends epbench's flags to other command lines that describe the
// same problem, such as `compare --run`, which hands it to several
// benchmarks: the same names, aliases, ranges and messages, without the
// EPBENCH_* variables, which only epbench itself reads.

// problemInts are the integer flags of the problem, in the order epbench
// defines them.
var problemInts = []string{"num-tokens", "hidden", "num-topk", "num-experts", "num-warmup", "num-iters"}

// NewFlagSet returns a quiet flag set, as epbench's own: pflag prints
// nothing, every problem comes back as an error (FromPflag names its flag),
// and the alias spellings (--tokens, --top-k, --experts, --warmup, --iters)
// stand for the flags they name.
func NewFlagSet(name string) *pflag.FlagSet {
	return newFlagSet(name)
}

// BindProblem defines the problem flags shared with ep_bench on fs, writing
// into c: -a/--algorithm, -L/--layout, -t/--num-tokens, -d/--hidden,
// -k/--num-topk, -e/--num-experts, -w/--num-warmup, -i/--num-iters and
// --dispatch-dtype, with epbench's ranges and messages. It sets those
// fields of c to their defaults. --layout takes every layout ep_bench
// names; whether epbench runs it is Check's to say.
func BindProblem(fs *pflag.FlagSet, c *Config) {
	c.Algorithm, c.Layout, c.DispatchDtype = LowLatency, ExpertMajor, DtypeBF16
	bindChoice(fs, "algorithm", "a", "algorithm `MODE`: ll (or low-latency); high-throughput is not supported",
		func() string { return c.Algorithm.flagValue() },
		func(s string) (err error) { c.Algorithm, err = parseAlgorithm(s); return err })
	bindChoice(fs, "layout", "L", "receive `LAYOUT`: "+layoutChoices(true),
		func() string { return c.Layout.flagValue() },
		func(s string) error {
			l, err := parseLayout(s)
			if err != nil {
				return fmt.Errorf("unknown value %q (want %s)", s, layoutChoices(false))
			}
			c.Layout = l
			return nil
		})
	for _, name := range problemInts {
		f := configIntNamed(name)
		spec := f.intFlag
		spec.env = ""
		spec.bind(fs, f.field(c))
	}
	bindChoice(fs, "dispatch-dtype", "", "dispatch payload `DTYPE`: bf16 or fp8_e4m3",
		func() string { return c.DispatchDtype.flagValue() },
		func(s string) (err error) { c.DispatchDtype, err = parseDispatchDtype(s); return err })
}

// layoutChoices lists the layouts' short spellings, "em, rm or fl", each
// followed by its long one in parentheses when long is set.
func layoutChoices(long bool) string {
	words := make([]string, len(layoutNames))
	for i, n := range layoutNames {
		words[i] = n.short
		if long {
			words[i] += " (" + n.long + ")"
		}
	}
	last := len(words) - 1
	return strings.Join(words[:last], ", ") + " or " + words[last]
}

// BindSwitch defines a switch on fs: "--name" sets *p, "--name=false"
// clears it, any other value is refused with epbench's message.
func BindSwitch(fs *pflag.FlagSet, p *bool, name, short, usage string) {
	bindBool(fs, p, name, short, false, usage)
}

// BindCount defines an integer flag on fs with epbench's checks and
// messages: at least 1 when positive is set (at least 0 otherwise) and at
// most hi. Its default is the value *p holds.
func BindCount(fs *pflag.FlagSet, p *int, name, short string, positive bool, hi int, usage string) {
	f := intFlag{name: name, short: short, def: *p, hi: hi, usage: usage}
	if positive {
		f.lo = 1
	}
	f.bind(fs, p)
}

// CheckProblem reports the first thing in c's problem that no
// expert-parallel benchmark could run on ranks processes, with the messages
// Check and CheckRanks give: a size out of its flag's range, more experts
// per token than experts, or experts that do not spread evenly over the
// ranks. epbench's own limits (the layouts it runs, the most ranks it
// validates) stay in Check and CheckRanks.
func (c *Config) CheckProblem(ranks int) error {
	for _, name := range problemInts {
		f := configIntNamed(name)
		if err := f.check(*f.field(c)); err != nil {
			return usageErr("--"+f.name, err.Error())
		}
	}
	if c.TopK > c.Experts {
		return usageErr("--num-topk", fmt.Sprintf("must not exceed --num-experts, got %d > %d", c.TopK, c.Experts))
	}
	if ranks < 1 {
		return usageErr("ranks", fmt.Sprintf("must be at least 1, got %d", ranks))
	}
	if c.Experts%ranks != 0 {
		return usageErr("--num-experts",
			fmt.Sprintf("must be divisible by the number of ranks, got %d experts over %d ranks", c.Experts, ranks))
	}
	return nil
}

// Flag is ep_bench's spelling of the algorithm (ll).
func (a Algorithm) Flag() string { return a.flagValue() }

// Flag is ep_bench's spelling of the dispatch format (bf16, fp8_e4m3).
func (d DispatchDtype) Flag() string { return d.flagValue() }
