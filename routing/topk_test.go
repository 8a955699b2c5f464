package routing

import (
	"slices"
	"testing"
)

// ep_bench's defaults: 128 tokens, 256 experts, top-8, seed 1.
const (
	defTokens  = 128
	defExperts = 256
	defTopK    = 8
)

func selectionsOf(t *testing.T, tokens, experts, topk int, seed uint32) int {
	t.Helper()
	idx, err := TopK(tokens, experts, topk, seed)
	if err != nil {
		t.Fatal(err)
	}
	return Selections(idx)
}

func TestSelectionsMatchEpBench(t *testing.T) {
	// Printed by ep_bench (selections=) and in its byte accounting.
	for rank := 0; rank < 8; rank++ {
		want := 1014
		if rank == 0 {
			want = 1015
		}
		got := selectionsOf(t, defTokens, defExperts, defTopK, GenSeed(DefaultSeed, rank, 8, 0))
		if got != want {
			t.Errorf("8 ranks, rank %d: selections=%d, want %d", rank, got, want)
		}
	}
	cases := []struct {
		tokens, want int
	}{
		{128, 1015},
		{32, 246},
		{1, 2},
	}
	for _, c := range cases {
		got := selectionsOf(t, c.tokens, defExperts, defTopK, GenSeed(DefaultSeed, 0, 2, 0))
		if got != c.want {
			t.Errorf("2 ranks, rank 0, %d tokens: selections=%d, want %d", c.tokens, got, c.want)
		}
	}
}

func TestTopKShape(t *testing.T) {
	idx, err := TopK(64, 32, 6, 99)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 64*6 {
		t.Fatalf("len = %d, want %d", len(idx), 64*6)
	}
	masked := 0
	for tok := 0; tok < 64; tok++ {
		row := idx[tok*6 : (tok+1)*6]
		seen := map[int64]bool{}
		for _, e := range row {
			if e == -1 {
				masked++
				continue
			}
			if e < 0 || e >= 32 {
				t.Fatalf("token %d: expert %d out of range", tok, e)
			}
			if seen[e] {
				t.Fatalf("token %d: expert %d selected twice: %v", tok, e, row)
			}
			seen[e] = true
		}
	}
	if masked < 1 || masked > MaskDraws {
		t.Fatalf("%d masked slots, want 1..%d", masked, MaskDraws)
	}
	if got := Selections(idx); got != len(idx)-masked {
		t.Fatalf("Selections = %d, want %d", got, len(idx)-masked)
	}

	again, _ := TopK(64, 32, 6, 99)
	if !slices.Equal(idx, again) {
		t.Fatal("same seed, different tables")
	}
	other, _ := TopK(64, 32, 6, 100)
	if slices.Equal(idx, other) {
		t.Fatal("different seeds, same table")
	}
}

func TestTopKAllExperts(t *testing.T) {
	// top-k = experts: each token lists every expert once, less masked slots.
	idx, err := TopK(4, 9, 9, 3)
	if err != nil {
		t.Fatal(err)
	}
	for tok := 0; tok < 4; tok++ {
		seen := make([]bool, 9)
		for _, e := range idx[tok*9 : (tok+1)*9] {
			if e == -1 {
				continue
			}
			if seen[e] {
				t.Fatalf("token %d repeats expert %d", tok, e)
			}
			seen[e] = true
		}
	}
}

func TestTopKInt32(t *testing.T) {
	a, err := TopK(16, 64, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TopKInt32(16, 64, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if int64(b[i]) != a[i] {
			t.Fatalf("entry %d: int32 %d, int64 %d", i, b[i], a[i])
		}
	}
	if Selections(b) != Selections(a) {
		t.Fatal("Selections differs between int32 and int64 tables")
	}
	if _, err := TopKInt32(-1, 64, 4, 5); err == nil {
		t.Fatal("TopKInt32 accepted -1 tokens")
	}
}

func TestTopKErrors(t *testing.T) {
	cases := []struct {
		tokens, experts, topk int
		want                  string
	}{
		{-3, 256, 8, "routing: tokens must be positive, got -3"},
		{128, 0, 8, "routing: experts must be positive, got 0"},
		{128, 256, 0, "routing: top-k must be positive, got 0"},
		{128, 8, 9, "routing: top-k (9) exceeds the number of experts (8)"},
		{1 << 30, 256, 8, "routing: tokens*top-k (1073741824*8) exceeds 2147483647"},
		{1, 1 << 31, 8, "routing: experts (2147483648) exceeds 2147483647"},
	}
	for _, c := range cases {
		idx, err := TopK(c.tokens, c.experts, c.topk, 1)
		if err == nil || err.Error() != c.want {
			t.Errorf("TopK(%d, %d, %d): err = %v, want %q", c.tokens, c.experts, c.topk, err, c.want)
		}
		if idx != nil {
			t.Errorf("TopK(%d, %d, %d) returned a table with an error", c.tokens, c.experts, c.topk)
		}
	}
}

func TestGenSeed(t *testing.T) {
	cases := []struct {
		seed           uint32
		rank, ranks, j int
		want           uint32
	}{
		{1, 0, 8, 0, 1},
		{1, 7, 8, 0, 8},
		{1, 3, 8, 2, 20},
		{12345, 5, 16, 1, 12366},
		{0xffffffff, 1, 8, 0, 0}, // wraps like the C++ unsigned seed
	}
	for _, c := range cases {
		if got := GenSeed(c.seed, c.rank, c.ranks, c.j); got != c.want {
			t.Errorf("GenSeed(%d, %d, %d, %d) = %d, want %d", c.seed, c.rank, c.ranks, c.j, got, c.want)
		}
	}
	// The j-th routings of all ranks never reuse another (rank, j)'s seed.
	seen := map[uint32]bool{}
	for j := 0; j < 4; j++ {
		for r := 0; r < 8; r++ {
			s := GenSeed(1, r, 8, j)
			if seen[s] {
				t.Fatalf("seed %d reused at rank %d, j %d", s, r, j)
			}
			seen[s] = true
		}
	}
}

func TestSelections(t *testing.T) {
	if got := Selections([]int64{3, -1, 0, -1, 7}); got != 3 {
		t.Errorf("Selections = %d, want 3", got)
	}
	if got := Selections([]int32{}); got != 0 {
		t.Errorf("Selections(empty) = %d, want 0", got)
	}
}

// --non-uniform-tokens: rank 0 all, the last rank none, the others drawn in
// [0, tokens]; the same on every rank; a rank with none has an empty table.
func TestRankTokens(t *testing.T) {
	c := RankTokens(128, 8)
	if len(c) != 8 || c[0] != 128 || c[7] != 0 {
		t.Fatalf("%v", c)
	}
	for _, v := range c {
		if v < 0 || v > 128 {
			t.Fatalf("%v", c)
		}
	}
	if d := RankTokens(128, 8); !slices.Equal(c, d) {
		t.Fatalf("not reproducible: %v, %v", c, d)
	}
	// The draws are mt19937(0xEB12345)'s, uniform in [0, 128].
	g := NewMT19937(NonUniformSeed)
	u, _ := NewUniformUint32(0, 128)
	for r := 0; r < 8; r++ {
		v := int(u.Next(g))
		if r > 0 && r < 7 && c[r] != v {
			t.Fatalf("rank %d: %d, the draw is %d", r, c[r], v)
		}
	}
	// libstdc++ (GCC 12) draws 73 16 19 1 50 26 89 26 from the same
	// generator and distribution.
	if want := []int{128, 16, 19, 1, 50, 26, 89, 0}; !slices.Equal(c, want) {
		t.Errorf("%v, want %v", c, want)
	}
	idx, err := TopK(0, 256, 8, 1)
	if err != nil || len(idx) != 0 {
		t.Fatalf("no tokens: %v, %v", idx, err)
	}
}
