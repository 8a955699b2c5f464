package kernels

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// A warp vote over part of a warp (__ballot_sync with a mask other than the
// full warp's) sets the bit of every active lane whose predicate holds, also
// of lanes outside the mask that run the same vote at the same time with
// their own mask: its result must be and-ed with the mask before a lane of it
// is used. partialBallots returns, for each such vote in src whose result is
// not directly followed by "& <mask>", its line number and text.
var ballotCall = regexp.MustCompile(`__ballot_sync\(\s*([^,]+?)\s*,`)

func partialBallots(src string) []string {
	var bad []string
	for _, m := range ballotCall.FindAllStringSubmatchIndex(src, -1) {
		mask := src[m[2]:m[3]]
		if mask == "0xffffffffu" || mask == "0xffffffff" || mask == "~0u" {
			continue
		}
		// The call's closing parenthesis, then what follows it.
		depth, end := 0, -1
		for i := m[0] + len("__ballot_sync"); i < len(src); i++ {
			if src[i] == '(' {
				depth++
			} else if src[i] == ')' {
				depth--
				if depth == 0 {
					end = i + 1
					break
				}
			}
		}
		line := 1 + strings.Count(src[:m[0]], "\n")
		text := strings.TrimSpace(strings.SplitN(src[strings.LastIndex(src[:m[0]], "\n")+1:], "\n", 2)[0])
		if end < 0 {
			bad = append(bad, lineRef(line, text))
			continue
		}
		rest := strings.TrimLeft(src[end:], " \t")
		if !strings.HasPrefix(rest, "&") || strings.HasPrefix(rest, "&&") {
			bad = append(bad, lineRef(line, text))
			continue
		}
		// "& mask", the mask whole (not the start of a longer name).
		after := strings.TrimLeft(rest[1:], " \t")
		if !strings.HasPrefix(after, mask) || (len(after) > len(mask) && isIdent(after[len(mask)])) {
			bad = append(bad, lineRef(line, text))
		}
	}
	return bad
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func lineRef(line int, text string) string { return fmt.Sprintf("%d: %s", line, text) }

func TestPartialBallotsAreMasked(t *testing.T) {
	for _, n := range kernelSources(t) {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range partialBallots(string(b)) {
			t.Errorf("%s:%s: a ballot over part of the warp, not and-ed with its mask", n, bad)
		}
	}
}

func TestPartialBallotsFinds(t *testing.T) {
	cases := []struct {
		src string
		bad int
	}{
		{"unsigned l = __ballot_sync(0xffffffffu, q >= 0);", 0},
		{"unsigned l = __ballot_sync(half, q >= 0) & half;", 0},
		{"left &= ~(__ballot_sync(half, f(q, 1) == p) & half);", 0},
		{"unsigned l = __ballot_sync(half, q >= 0);", 1},
		{"unsigned l = __ballot_sync(half, q >= 0) & other;", 1},
		{"unsigned l = __ballot_sync(half, q >= 0) & half_lo;", 1},
		{"unsigned l = __ballot_sync(half, q >= 0) & half;", 0},
		{"bool b = __ballot_sync(half, q >= 0) && ok;", 1},
		{"left &= ~__ballot_sync(half, qs[0] == q);\nx = __ballot_sync(m, p) & m;", 1},
		{"unsigned a = __ballot_sync(half, p), b = __ballot_sync(half, r);", 2},
	}
	for _, c := range cases {
		if got := partialBallots(c.src); len(got) != c.bad {
			t.Errorf("partialBallots(%q) = %q, want %d finding(s)", c.src, got, c.bad)
		}
	}
	// The finding names the line.
	if got := partialBallots("a;\nb;\nunsigned l = __ballot_sync(half, p);\n"); len(got) != 1 || !strings.HasPrefix(got[0], "3: unsigned l") {
		t.Errorf("line reference: got %q", got)
	}
}
