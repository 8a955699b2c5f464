package routing

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPartialSortDescSelectsTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + r.IntN(40)
		k := 1 + r.IntN(n)
		s := make([]scoredExpert, n)
		for i := range s {
			// Few distinct scores, so ties are common.
			s[i] = scoredExpert{score: float32(r.IntN(6)), expert: int32(i)}
		}
		orig := slices.Clone(s)
		partialSortDesc(s, k)

		for i := 1; i < k; i++ {
			if s[i-1].score < s[i].score {
				t.Fatalf("n=%d k=%d: prefix not descending at %d: %v", n, k, i, s[:k])
			}
		}
		for _, rest := range s[k:] {
			if rest.score > s[k-1].score {
				t.Fatalf("n=%d k=%d: %v left out but beats %v", n, k, rest, s[k-1])
			}
		}
		// A permutation of the input: every expert exactly once.
		seen := make([]bool, n)
		for _, e := range s {
			if seen[e.expert] || orig[e.expert].score != e.score {
				t.Fatalf("n=%d k=%d: not a permutation: %v", n, k, s)
			}
			seen[e.expert] = true
		}
	}
}

func TestPartialSortDescTieOrder(t *testing.T) {
	// All scores equal, so only the heap's moves decide the order; this is
	// the order std::partial_sort of GCC 12's libstdc++ leaves.
	s := make([]scoredExpert, 6)
	for i := range s {
		s[i] = scoredExpert{score: 1, expert: int32(i)}
	}
	partialSortDesc(s, 4)
	got := []int32{s[0].expert, s[1].expert, s[2].expert, s[3].expert}
	want := []int32{1, 3, 0, 2}
	if !slices.Equal(got, want) {
		t.Fatalf("tie order %v, want %v", got, want)
	}
}

func TestPartialSortDescIgnoresBadK(t *testing.T) {
	s := []scoredExpert{{1, 0}, {3, 1}}
	for _, k := range []int{0, -1, 3} {
		partialSortDesc(s, k)
		if s[0].expert != 0 || s[1].expert != 1 {
			t.Fatalf("k=%d changed the slice: %v", k, s)
		}
	}
}
