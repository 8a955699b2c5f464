package routing

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/epbench/epbench/bf16"
)

// Generation 0's rows are the validation tokens, row by row.
func TestGenerationZeroIsTheValidationRows(t *testing.T) {
	const rank, tokens, hidden = 3, 5, 256
	rows, err := TokenRows(rank, tokens, hidden)
	if err != nil {
		t.Fatal(err)
	}
	for tk := 0; tk < tokens; tk++ {
		want, err := TokenRow(rank, tk, hidden)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if got := rows[tk*hidden+i]; got != w {
				t.Fatalf("token %d, element %d: %#x, want %#x", tk, i, got, w)
			}
		}
	}
}

// Every 16-byte chunk of every row of every rank, token and generation is
// distinct, and every value is a finite bfloat16 of magnitude in [0.25, 4).
func TestGenerationChunksAreDistinct(t *testing.T) {
	const ranks, tokens, hidden, gens = 8, 64, 1024, 4
	seen := map[[16]byte]string{}
	for gen := 1; gen <= gens; gen++ {
		for r := 0; r < ranks; r++ {
			rows := make([]uint16, tokens*hidden)
			if err := FillRows(rows, r, hidden, gen); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(rows); i += 8 {
				var k [16]byte
				for j := 0; j < 8; j++ {
					binary.LittleEndian.PutUint16(k[2*j:], rows[i+j])
					v := bf16.ToFloat32(rows[i+j])
					if a := max(v, -v); a < 0.25 || a >= 4 {
						t.Fatalf("generation %d, rank %d, element %d: %v", gen, r, i+j, v)
					}
				}
				where := fmt.Sprintf("generation %d, rank %d", gen, r)
				if w, dup := seen[k]; dup {
					t.Fatalf("a chunk of %s (element %d) repeats one of %s", where, i, w)
				}
				seen[k] = where
			}
		}
	}
}

func TestFillRowRefusesANegativeGeneration(t *testing.T) {
	if err := FillRow(make([]uint16, 256), 0, 0, -1); err == nil {
		t.Fatal("generation -1 accepted")
	}
}

func TestFillRowsRefusesPartialRows(t *testing.T) {
	for _, hidden := range []int{0, 256} {
		if err := FillRows(make([]uint16, 300), 0, hidden, 1); err == nil {
			t.Errorf("300 values taken as rows of hidden %d", hidden)
		}
	}
}
