package ranklist

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct {
		ranks []int
		want  string
	}{
		{[]int{3}, "rank 3"},
		{[]int{1, 3}, "ranks 1, 3"},
		{[]int{8, 9, 10}, "ranks 8, 9, 10"},
	} {
		if got := String(c.ranks); got != c.want {
			t.Errorf("String(%v) = %q, want %q", c.ranks, got, c.want)
		}
	}
}
