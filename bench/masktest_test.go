package bench

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
)

// Every rank gets every rank's part of the active-mask test back as that
// rank made it, a check it skipped (nil) included, a failed combine output
// check's first difference cut to maskDetailBytes.
func TestGatherMaskTest(t *testing.T) {
	needMPI(t)
	part := func(r, n int) report.MaskRank {
		check := func(k int) *report.MaskCheck {
			c := &report.MaskCheck{Mask: make([]int, n), Want: make([]int, n)}
			for q := range n {
				c.Mask[q], c.Want[q] = (r+q+k)%2, (r*q+k)%2
			}
			return c
		}
		mr := report.MaskRank{Rank: r, Clean: *check(2)}
		if r != 1 {
			mr.Dispatch = check(0)
		}
		if r%2 == 0 {
			mr.Combine = check(1)
			// The combine output check: passed, or failed with a first
			// difference longer than what is carried (cut to it).
			mr.CombineOutput = &report.OutputCheck{OK: true}
			if r%4 == 2 {
				long := strings.Repeat(fmt.Sprintf("rank %d differs; ", r), 40)
				mr.CombineOutput = &report.OutputCheck{First: long}
			}
		}
		return mr
	}
	var got *report.MaskTest
	var err error
	n := 0
	onMPI(func() {
		c := mpi.World()
		n = c.Size()
		me := part(c.Rank(), n)
		got, err = gatherMaskTest(c, &me)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &report.MaskTest{}
	for r := range n {
		w := part(r, n)
		if o := w.CombineOutput; o != nil && !o.OK {
			o.First = o.First[:maskDetailBytes]
		}
		want.Ranks = append(want.Ranks, w)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("gathered\n%+v\nwant\n%+v", got, want)
	}
}
