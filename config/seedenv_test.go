package config

import (
	"errors"
	"testing"
)

// The seed benchmark's variable names stand in for epbench's where those
// are unset, epbench's win where both are set, and an error names the
// variable the bad value came from.
func TestSeedEnvNames(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, _, err := parse(nil, env(map[string]string{"MSCCLPP_EP_BENCH_TOKENS": "32", "MSCCLPP_EP_BENCH_ITERS": "7"}), nil, nil)
	if err != nil || c.Tokens != 32 || c.Iters != 7 {
		t.Fatalf("seed names: %+v, %v", c, err)
	}
	c, _, err = parse(nil, env(map[string]string{"MSCCLPP_EP_BENCH_TOKENS": "32", "EPBENCH_TOKENS": "64"}), nil, nil)
	if err != nil || c.Tokens != 64 {
		t.Fatalf("both names: tokens %d, %v", c.Tokens, err)
	}
	_, _, err = parse(nil, env(map[string]string{"MSCCLPP_EP_BENCH_TOKENS": "abc"}), nil, nil)
	var ue *UsageError
	if !errors.As(err, &ue) || ue.Flag != "MSCCLPP_EP_BENCH_TOKENS" {
		t.Errorf("a bad seed value: %v, want a usage error naming MSCCLPP_EP_BENCH_TOKENS", err)
	}
}
