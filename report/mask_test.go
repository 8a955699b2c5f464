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
	failsWithBlock(t, m, `
=== Active-Mask Test ===
Rank 0: mask after dispatch = [1,0,1,1]
Rank 0: dispatch mask check: PASSED (rank 1 mask=0)
Rank 0: mask after combine = [1,1,1,0]
Rank 0: combine mask check: FAILED (rank 1=1, rank 3=0)
Rank 0:   expected [1,0,1,0]
Rank 0: mask clean check: PASSED
Rank 1: mask clean check: PASSED
=== Active-Mask Test Complete ===
`)
	m.Ranks[0].Combine = &MaskCheck{Mask: []int{1, 0, 1, 0}, Want: []int{1, 0, 1, 0}}
	if m.Failed() || (&Result{MaskTest: m}).Failed() {
		t.Error("a passing test failed")
	}
}

// A combine output of the masked step that failed its check fails the test
// and is named under its rank's combine lines; one that passed prints
// nothing (ep_bench's block has no such line).
func TestMaskTestCombineOutput(t *testing.T) {
	mask := MaskCheck{Mask: []int{1, 0, 1, 0}, Want: []int{1, 0, 1, 0}}
	clean := MaskCheck{Mask: []int{1, 1, 1, 1}, Want: []int{1, 1, 1, 1}}
	m := &MaskTest{Ranks: []MaskRank{
		{Rank: 0, Dispatch: &mask, Combine: &mask, Clean: clean, CombineOutput: &OutputCheck{OK: true}},
		{Rank: 2, Dispatch: &mask, Combine: &mask, Clean: clean,
			CombineOutput: &OutputCheck{First: "rank 2, token 3, column 5: got 0x3f80 (1) want 0x0000 (0)"}},
	}}
	failsWithBlock(t, m, `
=== Active-Mask Test ===
Rank 0: mask after dispatch = [1,0,1,0]
Rank 0: dispatch mask check: PASSED (rank 1 mask=0)
Rank 2: mask after dispatch = [1,0,1,0]
Rank 2: dispatch mask check: PASSED (rank 1 mask=0)
Rank 0: mask after combine = [1,0,1,0]
Rank 0: combine mask check: PASSED (rank 1=0, rank 3=0)
Rank 2: mask after combine = [1,0,1,0]
Rank 2: combine mask check: PASSED (rank 1=0, rank 3=0)
Rank 2: combine output check: FAILED (rank 2, token 3, column 5: got 0x3f80 (1) want 0x0000 (0))
Rank 0: mask clean check: PASSED
Rank 2: mask clean check: PASSED
=== Active-Mask Test Complete ===
`)
	m.Ranks[1].CombineOutput = &OutputCheck{OK: true}
	if m.Failed() {
		t.Error("a passing test failed")
	}
}

// failsWithBlock: m fails the test and the run, whose failure names the
// active-mask test, and WriteMaskTest writes want for it.
func failsWithBlock(t *testing.T, m *MaskTest, want string) {
	t.Helper()
	r := &Result{MaskTest: m}
	if !m.Failed() || !r.Failed() || !strings.Contains(r.Failure(), "active-mask test") {
		t.Errorf("a failed check: MaskTest.Failed %v, Result.Failed %v, %q", m.Failed(), r.Failed(), r.Failure())
	}
	if got := maskBlock(t, m); got != want {
		t.Errorf("block:\n%s\nwant:\n%s", got, want)
	}
}

// maskBlock is the test's block as WriteMaskTest writes it.
func maskBlock(t *testing.T, m *MaskTest) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMaskTest(&b, *m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
