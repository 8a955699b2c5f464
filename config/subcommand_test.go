package config

import (
	"strings"
	"testing"
)

func TestSubcommand(t *testing.T) {
	cases := []struct {
		args     []string
		wantName string
		wantRest []string
	}{
		{nil, "", nil},
		{[]string{}, "", []string{}},
		{[]string{"routing"}, "routing", []string{}},
		{[]string{"routing", "-t", "4", "--rank", "0"}, "routing", []string{"-t", "4", "--rank", "0"}},
		{[]string{"compare", "a.json", "b.json"}, "compare", []string{"a.json", "b.json"}},
		{[]string{"devices"}, "devices", []string{}},
		{[]string{"sweep", "-t", "1"}, "sweep", []string{"-t", "1"}},
		{[]string{"plot", "out"}, "plot", []string{"out"}},
		{[]string{"version"}, "version", []string{}},
		// flags and their values before the subcommand are kept
		{[]string{"-t", "4", "routing", "-k", "2"}, "routing", []string{"-t", "4", "-k", "2"}},
		{[]string{"--tokens", "4", "sweep"}, "sweep", []string{"--tokens", "4"}},
		{[]string{"--num-tokens=4", "plot"}, "plot", []string{"--num-tokens=4"}},
		{[]string{"-t4", "devices"}, "devices", []string{"-t4"}},
		{[]string{"-V", "compare"}, "compare", []string{"-V"}},
		{[]string{"-Vt", "4", "compare"}, "compare", []string{"-Vt", "4"}},
		{[]string{"--rank", "3", "routing"}, "routing", []string{"--rank", "3"}},
		{[]string{"--json", "version", "routing"}, "routing", []string{"--json", "version"}},
		// a word that is a flag's value is not a subcommand
		{[]string{"-t", "routing"}, "", []string{"-t", "routing"}},
		{[]string{"--json", "plot"}, "", []string{"--json", "plot"}},
		{[]string{"-Vd", "sweep"}, "", []string{"-Vd", "sweep"}},
		// only the first non-flag argument counts
		{[]string{"foo", "routing"}, "", []string{"foo", "routing"}},
		{[]string{"-t", "4"}, "", []string{"-t", "4"}},
		{[]string{"--", "routing"}, "", []string{"--", "routing"}},
		{[]string{"Routing"}, "", []string{"Routing"}},
		{[]string{"-", "routing"}, "", []string{"-", "routing"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			name, rest := Subcommand(tc.args)
			equal(t, tc.wantName, name)
			equal(t, tc.wantRest, rest)
		})
	}
}

// Subcommand must not change the caller's slice.
func TestSubcommandKeepsArgs(t *testing.T) {
	args := []string{"-t", "4", "routing", "--rank", "1"}
	_, rest := Subcommand(args)
	rest[0] = "changed"
	equal(t, []string{"-t", "4", "routing", "--rank", "1"}, args)
}
