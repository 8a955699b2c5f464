package config

import (
	"strings"

	"github.com/spf13/pflag"
)

// Subcommands are the words that, as the first argument that is neither a
// flag nor a flag's value, select something other than a benchmark run.
var Subcommands = []string{"routing", "compare", "devices", "sweep", "plot", "version"}

// Subcommand finds the subcommand in args. It returns its name and the
// arguments with the name removed (flags before it are kept, in order). If
// the first non-flag argument is not a subcommand, or there is none, it
// returns "" and args unchanged: the caller runs the benchmark.
func Subcommand(args []string) (name string, rest []string) {
	var help bool
	main := newFlagSet("epbench")
	bindConfig(main, Default(), &help, nil)
	routing := newFlagSet("routing")
	bindRouting(routing, &RoutingArgs{}, &help)

	first, _ := scanArgs(args, main, routing)
	if first < 0 {
		return "", args
	}
	for _, sub := range Subcommands {
		if args[first] == sub {
			rest = make([]string, 0, len(args)-1)
			rest = append(rest, args[:first]...)
			rest = append(rest, args[first+1:]...)
			return sub, rest
		}
	}
	return "", args
}

// scanArgs walks args the way pflag will parse them with the given flag
// sets. It returns the index of the first positional argument before "--"
// (-1 if there is none) and the first token that pflag would skip without
// a word because it looks like a "go test" flag ("-test.v"); "" if none.
func scanArgs(args []string, sets ...*pflag.FlagSet) (first int, stray string) {
	takesValue := func(f *pflag.Flag) bool { return f != nil && f.NoOptDefVal == "" }
	long := func(name string) bool {
		for _, fs := range sets {
			if takesValue(fs.Lookup(name)) {
				return true
			}
		}
		return false
	}
	short := func(c byte) bool {
		for _, fs := range sets {
			if takesValue(fs.ShorthandLookup(string([]byte{c}))) {
				return true
			}
		}
		return false
	}

	first = -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return first, stray
		case len(a) < 2 || a[0] != '-':
			if first < 0 {
				first = i
			}
		case a[1] == '-':
			if name := a[2:]; !strings.Contains(name, "=") && long(name) {
				i++
			}
		default:
			cluster := a[1:]
			for j := 0; j < len(cluster); j++ {
				if strings.HasPrefix(cluster[j:], "test.") {
					if stray == "" {
						stray, _, _ = strings.Cut("-"+cluster[j:], "=")
					}
					break
				}
				if short(cluster[j]) {
					if j+1 == len(cluster) {
						i++
					}
					break
				}
			}
		}
	}
	return first, stray
}

// rejectTestFlags turns the tokens pflag would skip into an unknown-flag
// error, so that every flag a user types is either used or refused.
func rejectTestFlags(fs *pflag.FlagSet, args []string) error {
	if _, stray := scanArgs(args, fs); stray != "" {
		return usageErr(stray, "unknown flag")
	}
	return nil
}
