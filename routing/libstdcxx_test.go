package routing

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// buildReference compiles testdata/topk_ref.cpp, which makes the same
// standard-library calls as ep_bench, with the host's g++ and libstdc++.
func buildReference(t *testing.T) string {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("SKIPPED: g++ not found in PATH; the bit-for-bit check against libstdc++ did not run")
	}
	bin := filepath.Join(t.TempDir(), "topk_ref")
	cmd := exec.Command(gxx, "-O2", "-std=c++17", "-o", bin, filepath.Join("testdata", "topk_ref.cpp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the C++ reference: %v\n%s", err, out)
	}
	return bin
}

// runReference feeds jobs to the reference, one per line, and returns one
// output line per job.
func runReference(t *testing.T, bin string, jobs []string) [][]string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(strings.Join(jobs, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("C++ reference: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(jobs) {
		t.Fatalf("C++ reference answered %d lines for %d jobs", len(lines), len(jobs))
	}
	fields := make([][]string, len(lines))
	for i, l := range lines {
		fields[i] = strings.Fields(l)
	}
	return fields
}

func parseInts(t *testing.T, fields []string) []int64 {
	t.Helper()
	v := make([]int64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("C++ reference printed %q: %v", f, err)
		}
		v[i] = n
	}
	return v
}

func parseBits(t *testing.T, fields []string) []uint32 {
	t.Helper()
	v := make([]uint32, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseUint(f, 16, 32)
		if err != nil {
			t.Fatalf("C++ reference printed %q: %v", f, err)
		}
		v[i] = uint32(n)
	}
	return v
}

func floatBits(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, f := range v {
		b[i] = math.Float32bits(f)
	}
	return b
}

// firstDiff reports where two sequences part, for failure messages.
func firstDiff[T comparable](got, want []T) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at %d: %v, want %v", i, got[i], want[i])
		}
	}
	return ""
}

type topkCase struct {
	tokens, experts, topk int
	seed                  uint32
}

func topkCases() []topkCase {
	var cases []topkCase
	for _, seed := range []uint32{1, 7, 12345} {
		for _, tokens := range []int{1, 32, 128, 256} {
			for _, experts := range []int{16, 64, 256, 288} {
				for _, topk := range []int{1, 4, 8, 9, 24, 32} {
					if topk > experts {
						continue
					}
					cases = append(cases, topkCase{tokens, experts, topk, seed})
				}
			}
		}
	}
	// Other ranks and re-routings of the default shape.
	for _, rs := range [][3]int{{5, 8, 0}, {7, 8, 0}, {3, 8, 1}, {15, 16, 3}} {
		cases = append(cases, topkCase{128, 256, 8, GenSeed(DefaultSeed, rs[0], rs[1], rs[2])})
	}
	// Many experts: with these seeds one token each (71 and 27) has equal
	// scores that libstdc++ orders differently from a stable sort.
	cases = append(cases, topkCase{128, 4096, 32, 28}, topkCase{32, 4096, 32, 58})
	return cases
}

// unstableTokens counts tokens whose top-k differs from a stable sort by
// score: only equal scores can cause that, and only partial_sort's exact heap
// moves then give libstdc++'s order.
func unstableTokens(c topkCase) int {
	g := NewMT19937(c.seed)
	var n NormalFloat32
	heap := make([]scoredExpert, c.experts)
	stable := make([]scoredExpert, c.experts)
	count := 0
	for range c.tokens {
		for e := range heap {
			heap[e] = scoredExpert{score: float32(math.Abs(float64(n.Next(g)))) + 1, expert: int32(e)}
		}
		copy(stable, heap)
		partialSortDesc(heap, c.topk)
		slices.SortStableFunc(stable, func(a, b scoredExpert) int { return cmp.Compare(b.score, a.score) })
		if !slices.Equal(heap[:c.topk], stable[:c.topk]) {
			count++
		}
	}
	return count
}

func TestAgainstLibstdcxx(t *testing.T) {
	bin := buildReference(t)

	t.Run("mt19937", func(t *testing.T) {
		seeds := []uint32{0, 1, 42, 5489, 0xffffffff}
		var jobs []string
		for _, s := range seeds {
			jobs = append(jobs, fmt.Sprintf("mt %d 2000", s))
		}
		for i, got := range runReference(t, bin, jobs) {
			want := parseInts(t, got)
			g := NewMT19937(seeds[i])
			mine := make([]int64, len(want))
			for j := range mine {
				mine[j] = int64(g.Uint32())
			}
			if d := firstDiff(mine, want); d != "" {
				t.Errorf("seed %d: %s", seeds[i], d)
			}
		}
	})

	t.Run("generate_canonical", func(t *testing.T) {
		out := runReference(t, bin, []string{"canonical 9 100000"})
		g := NewMT19937(9)
		mine := make([]float32, 100000)
		for i := range mine {
			mine[i] = CanonicalFloat32(g)
		}
		if d := firstDiff(floatBits(mine), parseBits(t, out[0])); d != "" {
			t.Error(d)
		}
	})

	t.Run("normal_distribution", func(t *testing.T) {
		// An odd count ends on a cached value; a million draws run glibc's
		// logf over a wide spread of arguments.
		const count = 1_000_001
		seeds := []uint32{1, 43}
		var jobs []string
		for _, s := range seeds {
			jobs = append(jobs, fmt.Sprintf("normal %d %d", s, count))
		}
		for i, got := range runReference(t, bin, jobs) {
			g := NewMT19937(seeds[i])
			var n NormalFloat32
			mine := make([]float32, count)
			for j := range mine {
				mine[j] = n.Next(g)
			}
			if d := firstDiff(floatBits(mine), parseBits(t, got)); d != "" {
				t.Errorf("seed %d: %s", seeds[i], d)
			}
		}
	})

	t.Run("logf", func(t *testing.T) {
		// Strided over (0, 1] (subnormals included) and densely near 1,
		// where r2 of accepted polar pairs often lies.
		jobs := []string{
			fmt.Sprintf("logf 1 %d %d", 1021, 0x3f800000/1021),
			fmt.Sprintf("logf %d 1 %d", 0x3f800000-200000, 200001),
		}
		starts := []uint32{1, 0x3f800000 - 200000}
		steps := []uint32{1021, 1}
		for i, got := range runReference(t, bin, jobs) {
			want := parseBits(t, got)
			mine := make([]uint32, len(want))
			for j := range mine {
				x := math.Float32frombits(starts[i] + uint32(j)*steps[i])
				mine[j] = math.Float32bits(glibcLogf(x))
			}
			if d := firstDiff(mine, want); d != "" {
				t.Errorf("job %q: %s", jobs[i], d)
			}
		}
	})

	t.Run("uniform_int_distribution", func(t *testing.T) {
		// Small ranges as in ep_bench, and wide ones where Lemire's
		// rejection loop runs often.
		ranges := [][2]uint32{{0, 0}, {0, 7}, {0, 127}, {3, 1000}, {0, 0x7fffffff}, {0, 0xbfffffff}, {5, 0xfffffffe}, {0, 0xffffffff}}
		var jobs []string
		for i, r := range ranges {
			jobs = append(jobs, fmt.Sprintf("uniform %d %d %d 20000", i+1, r[0], r[1]))
		}
		for i, got := range runReference(t, bin, jobs) {
			want := parseInts(t, got)
			d, err := NewUniformUint32(ranges[i][0], ranges[i][1])
			if err != nil {
				t.Fatal(err)
			}
			g := NewMT19937(uint32(i + 1))
			mine := make([]int64, len(want))
			for j := range mine {
				mine[j] = int64(d.Next(g))
			}
			if diff := firstDiff(mine, want); diff != "" {
				t.Errorf("range %v: %s", ranges[i], diff)
			}
		}
	})

	t.Run("partial_sort ties", func(t *testing.T) {
		type job struct{ seed, n, k, m uint32 }
		var cases []job
		for seed := uint32(1); seed <= 40; seed++ {
			for _, nk := range [][2]uint32{{1, 1}, {2, 1}, {2, 2}, {7, 3}, {16, 16}, {33, 8}, {256, 8}, {300, 32}, {4096, 32}} {
				cases = append(cases, job{seed, nk[0], nk[1], 1 + seed%5})
			}
		}
		jobs := make([]string, len(cases))
		for i, c := range cases {
			jobs[i] = fmt.Sprintf("psort %d %d %d %d", c.seed, c.n, c.k, c.m)
		}
		for i, got := range runReference(t, bin, jobs) {
			c := cases[i]
			g := NewMT19937(c.seed)
			s := make([]scoredExpert, c.n)
			for j := range s {
				s[j] = scoredExpert{score: float32(g.Uint32() % c.m), expert: int32(j)}
			}
			partialSortDesc(s, int(c.k))
			mine := make([]int64, c.k)
			for j := range mine {
				mine[j] = int64(s[j].expert)
			}
			if d := firstDiff(mine, parseInts(t, got)); d != "" {
				t.Errorf("%+v: %s", c, d)
			}
		}
	})

	t.Run("topk", func(t *testing.T) {
		cases := topkCases()
		jobs := make([]string, len(cases))
		for i, c := range cases {
			jobs[i] = fmt.Sprintf("topk %d %d %d %d", c.tokens, c.experts, c.topk, c.seed)
		}
		unstable, same := 0, 0
		for i, got := range runReference(t, bin, jobs) {
			c := cases[i]
			mine, err := TopK(c.tokens, c.experts, c.topk, c.seed)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(mine, parseInts(t, got)); d != "" {
				t.Errorf("T=%d E=%d K=%d seed=%d: %s", c.tokens, c.experts, c.topk, c.seed, d)
			} else {
				same++
			}
			if c.experts >= 4096 {
				unstable += unstableTokens(c)
			}
		}
		t.Logf("%d of %d routing tables identical; %d tokens ordered by ties", same, len(cases), unstable)
		if unstable == 0 {
			t.Error("no token's order depended on ties; the tie-order check did not happen")
		}
	})

	t.Run("weights", func(t *testing.T) {
		type job struct{ rank, tokens, topk int }
		var cases []job
		for _, rank := range []int{0, 1, 7, 15} {
			for _, tk := range [][2]int{{1, 1}, {128, 8}, {33, 9}, {256, 32}} {
				cases = append(cases, job{rank, tk[0], tk[1]})
			}
		}
		jobs := make([]string, len(cases))
		for i, c := range cases {
			jobs[i] = fmt.Sprintf("weights %d %d %d", c.rank, c.tokens, c.topk)
		}
		for i, got := range runReference(t, bin, jobs) {
			c := cases[i]
			mine, err := Weights(c.rank, c.tokens, c.topk)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(floatBits(mine), parseBits(t, got)); d != "" {
				t.Errorf("%+v: %s", c, d)
			}
		}
	})
}
