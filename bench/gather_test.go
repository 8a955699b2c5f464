package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/epbench/epbench/mpi"
)

func TestGatherJSON(t *testing.T) {
	needMPI(t)
	type rec struct {
		Rank int    `json:"rank"`
		Note string `json:"note"`
	}
	var got []rec
	var err, second error
	n, rank := 0, 0
	onMPI(func() {
		c := mpi.World()
		n, rank = c.Size(), c.Rank()
		got, err = GatherJSON(c, rec{Rank: rank, Note: strings.Repeat("x", rank)}, 64)
		// Rank 0's record is past its slot.
		long := ""
		if rank == 0 {
			long = strings.Repeat("y", 64)
		}
		_, second = GatherJSON(c, rec{Rank: rank, Note: long}, 64)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]rec, n)
	for r := range want {
		want[r] = rec{Rank: r, Note: strings.Repeat("x", r)}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("gathered %+v, want %+v", got, want)
	}
	// It fails where it is; the ranks whose records fit fail on its empty
	// slot instead of waiting for it.
	wantErr := "rank 0 record"
	if rank == 0 {
		wantErr = "exceeds 64"
	}
	if second == nil || !strings.Contains(second.Error(), wantErr) {
		t.Errorf("rank %d, with rank 0's record past its slot: %v, want %q", rank, second, wantErr)
	}
}
