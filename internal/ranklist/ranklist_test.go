package ranklist

import (
	"slices"
	"testing"
)

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

func TestFailed(t *testing.T) {
	// Three ranks' records of 3 bytes: the second's last byte says it failed.
	all := []byte{9, 9, 1, 9, 9, 0, 1, 1, 1}
	if got := Failed(all, 3); !slices.Equal(got, []int{1}) {
		t.Errorf("Failed = %v, want [1]", got)
	}
	if got := Failed([]byte{1, 2, 1, 0}, 1); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("one-byte records: Failed = %v, want [1 3]", got)
	}
	if got := Failed([]byte{1, 1}, 1); got != nil {
		t.Errorf("every rank succeeded: Failed = %v, want none", got)
	}
}
