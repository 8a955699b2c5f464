package kernels

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestLinesSlotBytes(t *testing.T) {
	for _, c := range []struct{ topk, hidden, want int }{
		{8, 7168, 128 * (1 + 128)}, // 26 header ints: one line; 1792 row words: 128 lines
		{9, 7168, 128 * (2 + 128)}, // 29 ints do not fit one line
		{32, 16384, 128 * (4 + 293)},
		{1, 120, 128 * (1 + 3)},
	} {
		if got := LinesSlotBytes(c.topk, c.hidden); got != c.want {
			t.Errorf("LinesSlotBytes(%d, %d) = %d, want %d", c.topk, c.hidden, got, c.want)
		}
	}
}

// A lines message uses an inline dispatch slot: it fits for every top-k
// from hidden 128 up (the smallest FP8-capable size), and not for a tiny
// hidden size, where the GPU backend falls back to the fenced protocol.
func TestLinesFitInlineSlots(t *testing.T) {
	for k := 1; k <= 32; k++ {
		for h := 128; h <= 16384; h += 128 {
			if LinesSlotBytes(k, h) > InlineSlotBytes(k, h) {
				t.Fatalf("top-k %d, hidden %d: lines message %d B > inline slot %d B", k, h, LinesSlotBytes(k, h), InlineSlotBytes(k, h))
			}
		}
	}
	if LinesSlotBytes(1, 8) <= InlineSlotBytes(1, 8) {
		t.Errorf("hidden 8: expected the lines message not to fit (%d vs %d B)", LinesSlotBytes(1, 8), InlineSlotBytes(1, 8))
	}
}

// A combine partial row in lines: a bf16 row's lines of 14 data words (the
// last one partly padding when hidden/4 is not a multiple of 14).
func TestLinesRowBytes(t *testing.T) {
	for _, c := range []struct{ hidden, want int }{
		{7168, 128 * 128}, // 1792 words
		{4096, 128 * 74},  // 1024 words: 73 full lines and 2 words
		{128, 128 * 3},
		{16384, 128 * 293},
	} {
		if got := LinesRowBytes(c.hidden); got != c.want {
			t.Errorf("LinesRowBytes(%d) = %d, want %d", c.hidden, got, c.want)
		}
	}
}

// The Go mirrors of ll.cu's constants match it.
func TestMirrorsMatchTheSource(t *testing.T) {
	src, err := os.ReadFile("ll.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"kThreads": ThreadsPerBlock, "kSpreadTokens": SpreadTokens} {
		m := regexp.MustCompile(`constexpr int ` + name + ` = (\d+);`).FindSubmatch(src)
		if m == nil {
			t.Errorf("ll.cu: no constexpr int %s", name)
			continue
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("ll.cu: %s = %d, the Go mirror says %d", name, got, want)
		}
	}
}
