package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// MaskTest is elastic EP's active-mask test (-T), every rank's masks as
// they were read after each step.
type MaskTest struct {
	Ranks []MaskRank `json:"ranks"`
}

// MaskRank is one rank's part of the test.
type MaskRank struct {
	Rank int `json:"rank"`
	// Dispatch and Combine are nil where the rank skipped the operation.
	Dispatch *MaskCheck `json:"dispatch,omitempty"`
	Combine  *MaskCheck `json:"combine,omitempty"`
	Clean    MaskCheck  `json:"clean"`
	// CombineOutput is the check of the rank's combine output of the
	// masked step against the reference with the masked ranks' terms left
	// out (nil where the rank skipped the combine).
	CombineOutput *OutputCheck `json:"combine_output,omitempty"`
}

// OutputCheck is an output compared with its reference: OK, or the first
// difference.
type OutputCheck struct {
	OK    bool   `json:"ok"`
	First string `json:"first,omitempty"`
}

// MaskCheck is a mask read back (1 active, 0 masked, one per rank) and the
// one expected.
type MaskCheck struct {
	Mask []int `json:"mask"`
	Want []int `json:"want"`
}

// OK reports whether the mask is the one expected.
func (c MaskCheck) OK() bool { return slices.Equal(c.Mask, c.Want) }

// Failed reports whether any check of the test failed.
func (m *MaskTest) Failed() bool {
	if m == nil {
		return false
	}
	for _, r := range m.Ranks {
		for _, c := range []*MaskCheck{r.Dispatch, r.Combine, &r.Clean} {
			if c != nil && !c.OK() {
				return true
			}
		}
		if r.CombineOutput != nil && !r.CombineOutput.OK {
			return true
		}
	}
	return false
}

func maskString(m []int) string {
	s := make([]string, len(m))
	for i, v := range m {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// at is m[i], or -1 where m has no such entry.
func at(m []int, i int) int {
	if i < len(m) {
		return m[i]
	}
	return -1
}

// WriteMaskTest writes the test's block as ep_bench prints it: the masks
// after the dispatch (ranks that ran it), after the combine (ranks that ran
// it), the clean check of every rank. A combine output that failed its
// check (ep_bench has none) adds a line after that rank's combine mask
// check; one that passed adds nothing, so that the block diffs.
func WriteMaskTest(w io.Writer, m MaskTest) error {
	p := newPrinter(w)
	p.line("\n=== Active-Mask Test ===")
	for _, r := range m.Ranks {
		if c := r.Dispatch; c != nil {
			p.printf("Rank %d: mask after dispatch = %s\n", r.Rank, maskString(c.Mask))
			p.printf("Rank %d: dispatch mask check: %s (rank 1 mask=%d)\n", r.Rank, passed(c.OK()), at(c.Mask, 1))
			if !c.OK() {
				p.printf("Rank %d:   expected %s\n", r.Rank, maskString(c.Want))
			}
		}
	}
	for _, r := range m.Ranks {
		if c := r.Combine; c != nil {
			p.printf("Rank %d: mask after combine = %s\n", r.Rank, maskString(c.Mask))
			p.printf("Rank %d: combine mask check: %s (rank 1=%d, rank 3=%d)\n", r.Rank, passed(c.OK()), at(c.Mask, 1), at(c.Mask, 3))
			if !c.OK() {
				p.printf("Rank %d:   expected %s\n", r.Rank, maskString(c.Want))
			}
		}
		if o := r.CombineOutput; o != nil && !o.OK {
			p.printf("Rank %d: combine output check: FAILED (%s)\n", r.Rank, o.First)
		}
	}
	for _, r := range m.Ranks {
		p.printf("Rank %d: mask clean check: %s\n", r.Rank, passed(r.Clean.OK()))
	}
	p.line("=== Active-Mask Test Complete ===")
	return p.err
}
