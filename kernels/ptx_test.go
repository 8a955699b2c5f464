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
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// sourceHash recomputes what scripts/ptx.sh stamps on variant v's file: for
// each kernel source in sorted order its name, a newline and its bytes, then
// "nvcc-flags: <flags>\n" and "variant: <defines>\n".
func sourceHash(t *testing.T, v Variant) string {
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
	fmt.Fprintf(h, "variant: %s\n", v.Defines())
	return hex.EncodeToString(h.Sum(nil))
}

func embeddedPTX(t *testing.T, v Variant) []byte {
	t.Helper()
	b, err := PTX("", v)
	if err != nil {
		t.Fatalf("%s: %v: regenerate with `make ptx`", v.Module(), err)
	}
	return b
}

func TestPTXStampMatchesSources(t *testing.T) {
	for _, v := range Variants() {
		first, _, _ := bytes.Cut(embeddedPTX(t, v), []byte("\n"))
		const prefix = "// epbench-src-sha256: "
		if !bytes.HasPrefix(first, []byte(prefix)) {
			t.Fatalf("%s: first line %q lacks the source stamp: regenerate with `make ptx`", v.Module(), first)
		}
		got := strings.TrimPrefix(string(first), prefix)
		if want := sourceHash(t, v); got != want {
			t.Fatalf("%s was built from other sources, flags or defines (stamp %s, sources %s): run `make ptx` with CUDA 13",
				v.Module(), got, want)
		}
	}
}

func TestPTXFilesAreTheVariants(t *testing.T) {
	want := map[string]bool{}
	for _, v := range Variants() {
		if want[v.Module()] {
			t.Fatalf("two variants share the file %s", v.Module())
		}
		want[v.Module()] = true
	}
	files, err := embedded.ReadDir(ptxDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[f.Name()] {
			t.Errorf("%s/%s is no variant's: stale (`make ptx` removes it)", ptxDir, f.Name())
		}
		delete(want, f.Name())
	}
	for name := range want {
		t.Errorf("%s/%s is missing: run `make ptx`", ptxDir, name)
	}
}

func TestVariantNamesAndDefines(t *testing.T) {
	v := Variant{Dispatch: ProtoFenced, Combine: ProtoLines, FP8: true, DirectSend: true}
	if got := v.Module(); got != "ll_fenced_lines_fp8_ds.ptx" {
		t.Errorf("Module() = %q", got)
	}
	if got, want := v.Defines(), "-DEPBENCH_DISPATCH_PROTO=0 -DEPBENCH_COMBINE_PROTO=2 -DEPBENCH_FP8=1 -DEPBENCH_COMBINE_MODE=1"; got != want {
		t.Errorf("Defines() = %q, want %q", got, want)
	}
	var a Args
	v.SetArgs(&a)
	if a.InlineProto != ProtoFenced || a.CombineProto != ProtoLines || a.FP8 != 1 || a.CombineMode != 1 {
		t.Errorf("SetArgs: %+v", a)
	}
	if got := (Variant{Dispatch: ProtoInline, Combine: ProtoInline}).Module(); got != "ll_inline_inline_bf16_rlr.ptx" {
		t.Errorf("Module() = %q", got)
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
	for _, v := range Variants() {
		got := ptxEntries(embeddedPTX(t, v))
		for name := range got {
			if !slices.Contains(v.Entries(), name) {
				t.Errorf("%s: entry %s, which no launch of this variant uses", v.Module(), name)
			}
		}
		for _, name := range v.Entries() {
			params, ok := got[name]
			if !ok {
				t.Errorf("%s: entry %s, which the launcher uses, is missing", v.Module(), name)
				continue
			}
			if len(params) != 1 || params[0] != ArgsSize {
				t.Errorf("%s: entry %s takes %v, the launcher passes one %d-byte Args block", v.Module(), name, params, ArgsSize)
			}
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
	for _, name := range []string{DispatchKernel, DispatchSpreadKernel} {
		if !strings.Contains(name, "dispatch") || strings.Contains(name, "combine") {
			t.Errorf("%s: CUPTI must count it as dispatch, and only as dispatch", name)
		}
	}
	if !strings.Contains(CombineKernel, "combine") || strings.Contains(CombineKernel, "dispatch") {
		t.Errorf("%s: CUPTI must count it as combine, and only as combine", CombineKernel)
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
	v := Variant{Dispatch: ProtoLines, Combine: ProtoLines}
	if _, err := PTX(dir, v); err == nil {
		t.Fatal("missing override file accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, v.Module()), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := PTX(dir, v)
	if err != nil || string(b) != "x" {
		t.Fatalf("override: %q %v", b, err)
	}
	if b, _ := PTX("", v); !bytes.Equal(b, embeddedPTX(t, v)) || bytes.Equal(b, []byte("x")) {
		t.Fatal("default is not the embedded PTX")
	}
}
