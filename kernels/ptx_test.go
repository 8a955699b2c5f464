package kernels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// sourceHash recomputes what scripts/ptx.sh stamps: for each kernel source in
// sorted order its name, a newline and its bytes, then "nvcc-flags: <flags>\n".
func sourceHash(t *testing.T) string {
	t.Helper()
	var names []string
	for _, pat := range []string{"*.cu", "*.cuh"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m...)
	}
	if len(names) == 0 {
		t.Fatal("no kernel sources found")
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\n", n)
		h.Write(b)
	}
	flags, err := os.ReadFile("nvcc.flags")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(h, "nvcc-flags: %s\n", strings.TrimRight(string(flags), "\n"))
	return hex.EncodeToString(h.Sum(nil))
}

func TestPTXStampMatchesSources(t *testing.T) {
	first, _, _ := bytes.Cut(embedded, []byte("\n"))
	const prefix = "// epbench-src-sha256: "
	if !bytes.HasPrefix(first, []byte(prefix)) {
		t.Fatalf("%s: first line %q lacks the source stamp: regenerate with `make ptx`", Module, first)
	}
	got := strings.TrimPrefix(string(first), prefix)
	if want := sourceHash(t); got != want {
		t.Fatalf("%s was built from other sources or flags (stamp %s, sources %s): run `make ptx` with CUDA 13", Module, got, want)
	}
}

var entryRE = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(\s*\n((?:\s*\.param[^\n]*\n)*)\s*\)`)
var paramRE = regexp.MustCompile(`\.param \.align 8 \.b8 \w+\[(\d+)\]`)

// ptxEntries maps each entry in the PTX to the sizes of its parameters.
func ptxEntries(ptx []byte) map[string][]int {
	out := map[string][]int{}
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		var sizes []int
		sc := bufio.NewScanner(bytes.NewReader(m[2]))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			p := paramRE.FindStringSubmatch(line)
			if p == nil {
				sizes = append(sizes, -1) // a parameter of another form
				continue
			}
			n, _ := strconv.Atoi(p[1])
			sizes = append(sizes, n)
		}
		out[string(m[1])] = sizes
	}
	return out
}

func TestPTXHasEveryLaunchedEntry(t *testing.T) {
	got := ptxEntries(embedded)
	for _, name := range Entries {
		params, ok := got[name]
		if !ok {
			t.Errorf("%s: entry %s, which the launcher uses, is missing", Module, name)
			continue
		}
		if len(params) != 1 || params[0] != ArgsSize {
			t.Errorf("%s: entry %s takes %v, the launcher passes one %d-byte Args block", Module, name, params, ArgsSize)
		}
	}
}

func TestEntryParserRejectsMismatch(t *testing.T) {
	ptx := []byte(".visible .entry epbench_ll_dispatch(\n\t.param .align 8 .b8 p0[8]\n)\n")
	got := ptxEntries(ptx)
	if p := got[DispatchKernel]; len(p) != 1 || p[0] != 8 {
		t.Fatalf("parsed %v", got)
	}
	if _, ok := got[CombineKernel]; ok {
		t.Fatal("combine entry invented")
	}
}

func TestKernelNamesAreMatchable(t *testing.T) {
	if !strings.Contains(DispatchKernel, "dispatch") || !strings.Contains(CombineKernel, "combine") {
		t.Fatal("CUPTI matching needs dispatch/combine in the entry names")
	}
	if strings.Contains(DispatchKernel, "combine") || strings.Contains(CombineKernel, "dispatch") {
		t.Fatal("an entry name matches both phases")
	}
}

func TestArgsPutLayout(t *testing.T) {
	a := Args{Peers: 1, Expect: 19, TimeoutNs: 20, Clock: 21, Rank: 3, FP8: 1, CombineProto: 2}
	b := make([]byte, ArgsSize)
	a.Put(b)
	le := func(o int) uint64 {
		var v uint64
		for i := 7; i >= 0; i-- {
			v = v<<8 | uint64(b[o+i])
		}
		return v
	}
	if le(0) != 1 || le(22*8) != 19 || le(23*8) != 20 || le(24*8) != 21 {
		t.Fatalf("pointer fields misplaced: % x", b[:25*8])
	}
	if b[25*8] != 3 || b[ArgsSize-16] != 1 || b[ArgsSize-8] != 2 {
		t.Fatalf("int fields misplaced: % x", b[25*8:])
	}
	if allocs := testing.AllocsPerRun(100, func() { a.Put(b) }); allocs != 0 {
		t.Fatalf("Put allocates %v times", allocs)
	}
}

func TestPTXOverride(t *testing.T) {
	dir := t.TempDir()
	if _, err := PTX(dir); err == nil {
		t.Fatal("missing override file accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, Module), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := PTX(dir)
	if err != nil || string(b) != "x" {
		t.Fatalf("override: %q %v", b, err)
	}
	if b, _ := PTX(""); !bytes.Equal(b, embedded) {
		t.Fatal("default is not the embedded PTX")
	}
}
