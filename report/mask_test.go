package report

import (
	"bytes"
	"strings"
	"testing"
)

// A mask that is not the one expected fails the run and says so, with the
// mask expected; a rank that skipped an operation has no line for it.
func TestMaskTestBlock(t *testing.T) {
	ok := MaskCheck{Mask: []int{1, 0, 1, 1}, Want: []int{1, 0, 1, 1}}
	bad := MaskCheck{Mask: []int{1, 1, 1, 0}, Want: []int{1, 0, 1, 0}}
	clean := MaskCheck{Mask: []int{1, 1, 1, 1}, Want: []int{1, 1, 1, 1}}
	m := &MaskTest{Ranks: []MaskRank{
		{Rank: 0, Dispatch: &ok, Combine: &bad, Clean: clean},
		{Rank: 1, Clean: clean},
	}}
	if !m.Failed() {
		t.Error("a wrong combine mask did not fail the test")
	}
	r := &Result{MaskTest: m}
	if !r.Failed() || !strings.Contains(r.Failure(), "active-mask test") {
		t.Errorf("Failed %v, %q", r.Failed(), r.Failure())
	}
	var b bytes.Buffer
	if err := WriteMaskTest(&b, *m); err != nil {
		t.Fatal(err)
	}
	want := `
=== Active-Mask Test ===
Rank 0: mask after dispatch = [1,0,1,1]
Rank 0: dispatch mask check: PASSED (rank 1 mask=0)
Rank 0: mask after combine = [1,1,1,0]
Rank 0: combine mask check: FAILED (rank 1=1, rank 3=0)
Rank 0:   expected [1,0,1,0]
Rank 0: mask clean check: PASSED
Rank 1: mask clean check: PASSED
=== Active-Mask Test Complete ===
`
	if b.String() != want {
		t.Errorf("block:\n%s\nwant:\n%s", b.String(), want)
	}
	m.Ranks[0].Combine = &MaskCheck{Mask: []int{1, 0, 1, 0}, Want: []int{1, 0, 1, 0}}
	if m.Failed() || (&Result{MaskTest: m}).Failed() {
		t.Error("a passing test failed")
	}
}
