package config

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// RoutingArgs are the arguments of "epbench routing", which prints the
// expert selection one rank draws, for comparison with other tools.
type RoutingArgs struct {
	Tokens  int    // tokens on the rank
	TopK    int    // experts selected per token
	Experts int    // experts across all ranks
	Rank    int    // the rank whose selection is drawn
	Seed    uint32 // the benchmark's --seed

	// Ranks is the world size, 0 when not given. It is needed only with
	// RerouteIndex, to place the draw among the ranks' draws.
	Ranks int
	// RerouteIndex picks which of the --reroute draws to print; 0 is the
	// routing used when the benchmark does not reroute.
	RerouteIndex int
}

var (
	rankFlag = intFlag{name: "rank", def: 0, lo: 0, hi: MaxRanks - 1,
		usage: "rank whose selection is drawn, required"}
	ranksFlag = intFlag{name: "ranks", def: 0, lo: 1, hi: MaxRanks,
		usage: "number of ranks (needed with --reroute-index)"}
	rerouteIndexFlag = intFlag{name: "reroute-index", def: 0, lo: 0, hi: MaxIters - 1,
		usage: "which routing draw to print, as cycled by --reroute"}
)

// routingInt is the benchmark's flag of that name, required and without
// an environment fallback: the routing subcommand reads no environment.
func routingInt(name string) intFlag {
	spec := configIntNamed(name).intFlag
	spec.def, spec.env = 0, ""
	spec.usage += ", required"
	return spec
}

func bindRouting(fs *pflag.FlagSet, r *RoutingArgs, help *bool) {
	for _, f := range []struct {
		name string
		p    *int
	}{{"num-tokens", &r.Tokens}, {"num-topk", &r.TopK}, {"num-experts", &r.Experts}} {
		routingInt(f.name).bind(fs, f.p)
	}
	rankFlag.bind(fs, &r.Rank)
	r.Seed = Default().Seed
	bindSeed(fs, &r.Seed, "the benchmark's routing seed (decimal or 0x hex)")
	ranksFlag.bind(fs, &r.Ranks)
	rerouteIndexFlag.bind(fs, &r.RerouteIndex)
	bindBool(fs, help, "help", "h", false, "print this help and exit")
}

// ParseRouting reads the routing subcommand's flags. -t, -k, -e and --rank
// are required; with --reroute-index, --ranks is required too. It returns
// ErrHelp for -h/--help and a *UsageError for anything else wrong.
func ParseRouting(args []string) (*RoutingArgs, error) {
	r := &RoutingArgs{}
	var help bool
	fs := newFlagSet("routing")
	bindRouting(fs, r, &help)
	if err := rejectTestFlags(fs, args); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, fromPflag(err)
	}
	if help {
		return nil, ErrHelp
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, usageErr(strconv.Quote(rest[0]), "unexpected positional argument")
	}
	for _, name := range []string{"num-tokens", "num-topk", "num-experts", "rank"} {
		if !fs.Changed(name) {
			return nil, usageErr("--"+name, "required")
		}
	}
	if r.TopK > r.Experts {
		return nil, usageErr("--num-topk",
			fmt.Sprintf("must not exceed --num-experts, got %d > %d", r.TopK, r.Experts))
	}
	if fs.Changed("reroute-index") && !fs.Changed("ranks") {
		return nil, usageErr("--reroute-index", "needs --ranks")
	}
	if fs.Changed("ranks") {
		if err := checkRanks(r.Ranks, "--ranks", r.Experts, "--num-experts"); err != nil {
			return nil, err
		}
		if r.Rank >= r.Ranks {
			return nil, usageErr("--rank",
				fmt.Sprintf("must be less than --ranks, got %d >= %d", r.Rank, r.Ranks))
		}
	}
	return r, nil
}
