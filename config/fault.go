package config

import (
	"fmt"
	"strconv"
	"strings"
)

// The operations a Fault can make a rank skip.
const (
	FaultDispatch = "dispatch"
	FaultCombine  = "combine"
)

// Fault is an injected failure (--fault skip-dispatch=RANK or
// skip-combine=RANK): the named rank skips that operation in every pair
// (skipping the dispatch skips the combine that consumes it), so every other
// rank must report, within the timeout, that it did not arrive.
type Fault struct {
	Op   string // FaultDispatch or FaultCombine; "" for none
	Rank int
}

// Skips reports whether rank skips op (FaultDispatch or FaultCombine).
func (f Fault) Skips(op string, rank int) bool { return f.Op != "" && f.Op == op && f.Rank == rank }

// String is the flag's value, "" for none.
func (f Fault) String() string {
	if f.Op == "" {
		return ""
	}
	return "skip-" + f.Op + "=" + strconv.Itoa(f.Rank)
}

// check rejects a Fault that parseFault would not give.
func (f Fault) check() error {
	switch {
	case f.Op == "" && f.Rank == 0:
		return nil
	case f.Op != FaultDispatch && f.Op != FaultCombine:
		return fmt.Errorf("unknown operation %q (want %s or %s)", f.Op, FaultDispatch, FaultCombine)
	case f.Rank < 0 || f.Rank >= MaxRanks:
		return fmt.Errorf("rank %d is outside [0, %d)", f.Rank, MaxRanks)
	}
	return nil
}

func parseFault(s string) (Fault, error) {
	op, rank, ok := strings.Cut(s, "=")
	if !ok || (op != "skip-"+FaultDispatch && op != "skip-"+FaultCombine) {
		return Fault{}, fmt.Errorf("unknown value %q (want skip-dispatch=RANK or skip-combine=RANK)", s)
	}
	r, err := strconv.Atoi(rank)
	if err != nil || r < 0 || r >= MaxRanks {
		return Fault{}, fmt.Errorf("%q: RANK must be an integer in [0, %d)", s, MaxRanks)
	}
	return Fault{Op: strings.TrimPrefix(op, "skip-"), Rank: r}, nil
}
