package config

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRouting(t *testing.T) {
	r, err := ParseRouting([]string{"-t", "128", "-k", "8", "-e", "256", "--rank", "3"})
	noErr(t, err)
	equal(t, &RoutingArgs{Tokens: 128, TopK: 8, Experts: 256, Rank: 3, Seed: 1}, r)

	r, err = ParseRouting([]string{"--tokens=4", "--top-k", "2", "--experts", "16", "--rank=0",
		"--seed", "0xB3C4", "--ranks", "4", "--reroute-index", "5"})
	noErr(t, err)
	equal(t, &RoutingArgs{Tokens: 4, TopK: 2, Experts: 16, Rank: 0, Seed: 0xB3C4, Ranks: 4, RerouteIndex: 5}, r)

	r, err = ParseRouting([]string{"--num-tokens", "1", "--num-topk", "1", "--num-experts", "1", "--rank", "255", "--ranks", "256"})
	errText(t, err, `--num-experts: must be divisible by the number of ranks, got 1 experts over 256 ranks`)
	equal(t, (*RoutingArgs)(nil), r)

	r, err = ParseRouting([]string{"-t1", "-k1", "-e256", "--rank", "255", "--ranks", "256"})
	noErr(t, err)
	equal(t, 255, r.Rank)
}

func TestParseRoutingErrors(t *testing.T) {
	base := []string{"-t", "8", "-k", "2", "-e", "16", "--rank", "1"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-k", "2", "-e", "16", "--rank", "1"}, `--num-tokens: required`},
		{[]string{"-t", "8", "-e", "16", "--rank", "1"}, `--num-topk: required`},
		{[]string{"-t", "8", "-k", "2", "--rank", "1"}, `--num-experts: required`},
		{[]string{"-t", "8", "-k", "2", "-e", "16"}, `--rank: required`},
		{nil, `--num-tokens: required`},
		{with("-t", "abc"), `--num-tokens: must be a positive integer, got "abc"`},
		{with("--tokens", "4097"), `--num-tokens: must be at most 4096, got 4097`},
		{with("-k", "33"), `--num-topk: must be at most 32, got 33`},
		{with("-k", "17"), `--num-topk: must not exceed --num-experts, got 17 > 16`},
		{with("-e", "0"), `--num-experts: must be a positive integer, got "0"`},
		{with("--rank", "-1"), `--rank: must be a non-negative integer, got "-1"`},
		{with("--rank", "256"), `--rank: must be at most 255, got 256`},
		{with("--seed", "x"), `--seed: must be an unsigned 32-bit integer, got "x"`},
		{with("--ranks", "0"), `--ranks: must be a positive integer, got "0"`},
		{with("--ranks", "257"), `--ranks: must be at most 256, got 257`},
		{with("--ranks", "3"), `--num-experts: must be divisible by the number of ranks, got 16 experts over 3 ranks`},
		{with("--ranks", "1"), `--rank: must be less than --ranks, got 1 >= 1`},
		{with("--reroute-index", "2"), `--reroute-index: needs --ranks`},
		{with("--reroute-index", "-2", "--ranks", "2"), `--reroute-index: must be a non-negative integer, got "-2"`},
		{with("--validate"), `--validate: unknown flag`},
		{with("-V"), `-V: unknown flag`},
		{with("--rank"), `--rank: requires a value`},
		{with("extra"), `"extra": unexpected positional argument`},
		{with("-test.count=1"), `-test.count: unknown flag`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r, err := ParseRouting(tc.args)
			errText(t, err, tc.want)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not a *UsageError", err)
			}
			if r != nil {
				t.Errorf("got arguments with an error: %+v", r)
			}
		})
	}
}

func TestRoutingHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"--rank", "1", "-h"}} {
		r, err := ParseRouting(args)
		if r != nil || !errors.Is(err, ErrHelp) {
			t.Errorf("%q: got %v, %v; want nil, ErrHelp", args, r, err)
		}
	}
	u := RoutingUsage()
	for _, want := range []string{"-t, --num-tokens", "-k, --num-topk", "-e, --num-experts",
		"--rank", "--seed", "--ranks", "--reroute-index", "--tokens", "--top-k", "--experts", "(default 1)"} {
		contains(t, u, want)
	}
	if strings.Contains(u, "EPBENCH_") {
		t.Error("routing help mentions environment variables it does not read")
	}
	if strings.Contains(u, "(default 128)") {
		t.Error("routing help shows a default for a required flag")
	}
}
