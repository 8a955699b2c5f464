package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds Parse, ParseRouting and Subcommand arbitrary argument
// lists (the input split on spaces). None may panic; every error is ErrHelp
// or a *UsageError; every accepted Config passes Check and survives an
// Args round trip. The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	env := envOf(map[string]string{"EPBENCH_TOKENS": "64", "EPBENCH_WARMUP": "0"})
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, " ")

		c, err := Parse(args, env)
		checkErr(t, err)
		if err == nil {
			if c == nil {
				t.Fatal("nil config without an error")
			}
			if !c.ShowVersion {
				if cerr := c.Check(); cerr != nil {
					t.Fatalf("accepted %q but Check says %v", args, cerr)
				}
			}
			again, err := Parse(c.Args(), hostileEnv)
			if err != nil {
				t.Fatalf("Args() of %q = %q does not parse: %v", args, c.Args(), err)
			}
			equal(t, c, again, "round trip of %q", args)
		}

		r, err := ParseRouting(args)
		checkErr(t, err)
		if err == nil && (r == nil || r.TopK > r.Experts || r.Tokens < 1) {
			t.Fatalf("accepted bad routing arguments %q: %+v", args, r)
		}

		name, rest := Subcommand(args)
		if name == "" {
			equal(t, args, rest)
		} else if len(rest) != len(args)-1 {
			t.Fatalf("Subcommand(%q) = %q, %q", args, name, rest)
		}
	})
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil || errors.Is(err, ErrHelp) {
		return
	}
	var ue *UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("error %T %q is not a *UsageError", err, err)
	}
	sep := ": "
	if ue.Bare {
		sep = " "
	}
	if ue.Flag == "" || ue.Why == "" || err.Error() != ue.Flag+sep+ue.Why {
		t.Fatalf("malformed usage error %#v", ue)
	}
}
