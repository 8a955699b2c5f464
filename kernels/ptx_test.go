package kernels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kernelSources lists the kernel sources (*.cu, *.cuh), sorted by name.
func kernelSources(t *testing.T) []string {
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
	return names
}

// sourceHash recomputes what scripts/ptx.sh stamps on variant v's file: for
// each kernel source in sorted order its name, a newline and its bytes, then
// "nvcc-flags: <flags>\n" and "variant: <defines>\n".
func sourceHash(t *testing.T, v Variant) string {
	t.Helper()
	h := sha256.New()
	for _, n := range kernelSources(t) {
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
	// fenced 0, lines 2 << 4, FP8 1 << 8, direct_send 1 << 12
	if a.Modes != 0x1120 || !a.FP8() {
		t.Errorf("SetArgs: modes %#x, want 0x1120", a.Modes)
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

// Put writes the block without allocating (TestArgsPutMirrorsLLArgs checks
// where it writes each field).
func TestArgsPutAllocatesNothing(t *testing.T) {
	a := Args{Peers: 1, Expect: 19, Rank: 3}
	b := make([]byte, ArgsSize)
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
	stamp, _ := ptxInterfaceStamp(embeddedPTX(t, v))
	x := "// epbench-src-sha256: another build\n" + interfaceStampPrefix + stamp + "\n//\nx"
	if err := os.WriteFile(filepath.Join(dir, v.Module()), []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := PTX(dir, v)
	if err != nil || string(b) != x {
		t.Fatalf("override: %q %v", b, err)
	}
	if b, _ := PTX("", v); !bytes.Equal(b, embeddedPTX(t, v)) || bytes.Equal(b, []byte(x)) {
		t.Fatal("default is not the embedded PTX")
	}
}

// variants.txt parses (Variants would otherwise list only its lines up to
// the error), and each name is its variant's String.
func TestVariantsFileParses(t *testing.T) {
	if variantsErr != nil {
		t.Fatal(variantsErr)
	}
	for _, v := range Variants() {
		if w, err := parseVariant(v.String()); err != nil || w != v {
			t.Errorf("%s: parsed back as %v, %v", v, w, err)
		}
	}
}

func TestParseVariantsRejects(t *testing.T) {
	for _, text := range []string{
		"",
		"# nothing\n\n",
		"fenced_fenced_bf16_rlr fenced_fenced_bf16_ds\n",
		"fenced_fenced_bf16_rlr\nfenced_fenced_bf16_rlr # again\n",
		"fenced_fenced_bf16\n",
		"fenced_fenced_bf16_rlr_\n",
		"fenced_tcp_bf16_rlr\n",
		"fenced_fenced_fp16_rlr\n",
		"fenced_fenced_bf16_direct\n",
	} {
		if v, err := parseVariants(text); err == nil {
			t.Errorf("%q: parsed as %v", text, v)
		}
	}
	v, err := parseVariants("# list\n  lines_lines_fp8_ds  # a comment\n\ninline_inline_bf16_rlr\n")
	want := []Variant{{Dispatch: ProtoLines, Combine: ProtoLines, FP8: true, DirectSend: true}, {Dispatch: ProtoInline, Combine: ProtoInline}}
	if err != nil || !slices.Equal(v, want) {
		t.Fatalf("parsed %v, %v; want %v", v, err, want)
	}
}

// ptxScriptDefines runs `scripts/ptx.sh --defines` from the repository root
// root: the file and the nvcc definitions of each variant it builds.
func ptxScriptDefines(t *testing.T, root string) ([][2]string, error) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIPPED: no bash here to run scripts/ptx.sh: its variant definitions are unchecked")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bash, filepath.Join(root, "scripts", "ptx.sh"), "--defines")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.Bytes())
	}
	var got [][2]string
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		file, defines, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("scripts/ptx.sh --defines: line %q", line)
		}
		got = append(got, [2]string{file, defines})
	}
	return got, nil
}

func variantDefines(vs []Variant) [][2]string {
	var out [][2]string
	for _, v := range vs {
		out = append(out, [2]string{v.Module(), v.Defines()})
	}
	return out
}

// scripts/ptx.sh builds the variants of variants.txt, in its order, each
// with the definitions Variant.Defines gives (which the stamp hashes).
func TestPTXScriptBuildsTheVariants(t *testing.T) {
	got, err := ptxScriptDefines(t, "..")
	if err != nil {
		t.Fatalf("scripts/ptx.sh --defines: %v", err)
	}
	if want := variantDefines(Variants()); !slices.Equal(got, want) {
		t.Fatalf("scripts/ptx.sh builds\n%v\nkernels.Variants are\n%v", got, want)
	}
}

// scripts/ptx.sh has no variant list of its own: given another
// kernels/variants.txt it builds that list's variants, and it refuses a
// list with a name it cannot read.
func TestPTXScriptReadsTheVariantList(t *testing.T) {
	script, err := os.ReadFile("../scripts/ptx.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{"scripts", "kernels"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "scripts", "ptx.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(root, "kernels", "variants.txt")
	text := "# another list\n\n  lines_lines_fp8_ds  # indented, with a comment\nfenced_lines_bf16_rlr\ninline_inline_fp8_rlr"
	if err := os.WriteFile(list, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	vs, err := parseVariants(text)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ptxScriptDefines(t, root)
	if err != nil {
		t.Fatalf("scripts/ptx.sh --defines: %v", err)
	}
	if want := variantDefines(vs); !slices.Equal(got, want) {
		t.Fatalf("with another list, scripts/ptx.sh builds\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []string{"fenced_fenced_bf16_rlr_\n", "fenced_tcp_bf16_rlr\n", "fenced_fenced_bf16_rlr fenced_fenced_bf16_ds\n", "# none\n"} {
		if err := os.WriteFile(list, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ptxScriptDefines(t, root); err == nil {
			t.Errorf("scripts/ptx.sh took the list %q: %v", bad, got)
		}
	}
}

func readKernelSource(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ptxScript runs `scripts/ptx.sh MODE` on the headers ll and gin (written
// to a temporary folder) and returns what it prints, or its error.
func ptxScript(t *testing.T, mode string, ll, gin []byte) (string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ll.cuh": ll, "ll_gin.cuh": gin} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("bash", "../scripts/ptx.sh", mode, dir).Output()
	return string(out), err
}

// interfaceStamp is scripts/ptx.sh's interface stamp of ll and gin.
func interfaceStamp(t *testing.T, ll, gin []byte) string {
	t.Helper()
	out, err := ptxScript(t, "--interface-stamp", ll, gin)
	if err != nil {
		t.Fatalf("scripts/ptx.sh --interface-stamp: %v", err)
	}
	return strings.TrimSpace(out)
}

// editSource replaces the first old in src by new; old must be there.
func editSource(t *testing.T, src []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("the source has no %q", old)
	}
	return bytes.Replace(src, []byte(old), []byte(new), 1)
}

func TestPTXInterfaceStampMatchesSources(t *testing.T) {
	want := interfaceStamp(t, readKernelSource(t, "ll.cuh"), readKernelSource(t, "ll_gin.cuh"))
	for _, v := range Variants() {
		got, ok := ptxInterfaceStamp(embeddedPTX(t, v))
		if !ok || got != want {
			t.Fatalf("%s: interface stamp %q (found %v), the sources' %s: run `make ptx` with CUDA 13", v.Module(), got, ok, want)
		}
	}
}

// What counts for the stamp in the real headers: tabs, CRLF line ends,
// comments and the device code the host does not mirror do not; a change to
// each kind of text the stamp covers does.
func TestInterfaceStampSeesTheInterfaceNotTheComments(t *testing.T) {
	ll, gin := readKernelSource(t, "ll.cuh"), readKernelSource(t, "ll_gin.cuh")
	base := interfaceStamp(t, ll, gin)
	edit := func(src []byte, old, new string) []byte { return editSource(t, src, old, new) }
	dos := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }
	for _, c := range []struct {
		name    string
		ll, gin []byte
		same    bool // the stamp is the sources'
	}{
		{"tabs and CRLF", dos(edit(ll, "    int32_t rank;", "\tint32_t\trank;\t// a tab")), dos(gin), true},
		{"comments, blanks and device code",
			edit(edit(edit(ll, "    int32_t rank;\n", "    int32_t   rank;   // renamed in a comment only\n\n"),
				"struct LLArgs {", "// a comment before\nstruct LLArgs {"),
				"__device__ __forceinline__ float mul_add_rn(", "__device__ __forceinline__ float mul_add_rn2("), gin, true},
		{"fields swapped", edit(ll, "    int32_t rank;\n    int32_t ranks;\n", "    int32_t ranks;\n    int32_t rank;\n"), gin, false},
		{"a GinArgs field renamed", ll, edit(gin, "uint64_t region;", "uint64_t region2;"), false},
		{"a constant", edit(ll, "constexpr int kLineWords = 14;", "constexpr int kLineWords = 13;"), gin, false},
		{"a size's last line", edit(ll, "lines_row_lines(hidden, false));", "lines_row_lines(hidden, true));"), gin, false},
		{"a GIN constant", ll, edit(gin, "constexpr int kGinMaskWords = 256 / 64;", "constexpr int kGinMaskWords = 8;"), false},
	} {
		if got := interfaceStamp(t, c.ll, c.gin); (got == base) != c.same {
			t.Errorf("%s: the stamp changed %v, want %v", c.name, got != base, !c.same)
		}
	}
	for _, bad := range [][2][]byte{{edit(ll, "struct LLArgs {", "struct Other {"), gin},
		{ll, edit(gin, "struct GinArgs {", "struct Other {")}} {
		if out, err := ptxScript(t, "--interface-stamp", bad[0], bad[1]); err == nil {
			t.Errorf("scripts/ptx.sh --interface-stamp took headers without one of the argument blocks: %s", out)
		}
	}
}

// The rules on the shapes the real headers lack: each edit of a made-up
// header changes the stamp, or does not, as the rules say.
func TestInterfaceStampRulesOnMadeUpHeaders(t *testing.T) {
	const ll = `// a made-up ll.cuh
struct LLArgs {
    int a;  // };
    int b;
};
constexpr int kA = 1;  // a comment
__host__ __device__ inline int decl(int x);
__device__ int dev_after_decl() { return 1; }
__host__ __device__ inline int split(int x)
{
    return x + 1;  // } in a comment
}
__device__ int dev_after_split() { return 2; }
__host__ __device__ inline int nested(int x) {
    if (x) {
        return 3;
    }
    return 4;  // { in a comment
}
__device__ int dev() {
    constexpr int kLocal = 5;
    return kLocal;
}
constexpr int kLast = 6;`
	gin := []byte("struct GinArgs {\n    int w;\n};\n")
	base := interfaceStamp(t, []byte(ll), gin)
	for _, c := range []struct {
		old, new string
		same     bool
	}{
		{"    int b;", "    int c;", false},
		{"kA = 1;", "kA = 2;", false},
		{"kLast = 6;", "kLast = 7;", false},
		{"decl(int x);", "decl(long x);", false},
		{"return x + 1;", "return x + 2;", false}, // the brace on the next line
		{"return 4;", "return 5;", false},         // past a nested block
		{"    int a;  // };", "    int a;  // }; but other words", true},
		{"return x + 1;  // } in a comment", "return x + 1;  // still in a comment", true},
		{"return 4;  // { in a comment", "return 4;  // still in a comment", true},
		{"{ return 1; }", "{ return 9; }", true}, // device code after a declaration
		{"{ return 2; }", "{ return 9; }", true}, // device code after a function
		{"kLocal = 5;", "kLocal = 9;", true},     // a constexpr inside device code
	} {
		if got := interfaceStamp(t, editSource(t, []byte(ll), c.old, c.new), gin); (got == base) != c.same {
			t.Errorf("%q -> %q: the stamp changed %v, want %v", c.old, c.new, got != base, !c.same)
		}
	}
}

// Every constant and size function the Go side mirrors from ll.cuh and
// ll_gin.cuh is in the text the stamp hashes: written in a form the rules
// see.
func TestInterfaceTextHoldsTheMirrors(t *testing.T) {
	text, err := ptxScript(t, "--interface-text", readKernelSource(t, "ll.cuh"), readKernelSource(t, "ll_gin.cuh"))
	if err != nil {
		t.Fatalf("scripts/ptx.sh --interface-text: %v", err)
	}
	for _, c := range []string{"kMaxRanks", "kMaxTopK", "kTracePoints", "kClockWords", "kProtoFenced", "kProtoInline",
		"kProtoLines", "kPhaseDispatch", "kPhaseCombine", "kPhaseVariant", "kPhaseStale", "kModeRankLocalReduce",
		"kModeDirectSend", "kModeRankMajor", "kFlagPrescale", "kLineWords", "kScaleBlock", "kGinMaskWords"} {
		if !strings.Contains(text, "constexprint"+c+"=") {
			t.Errorf("the interface text has no constexpr int %s", c)
		}
	}
	for _, f := range []string{"header_bytes", "message_bytes", "row_bytes", "inline_payload_unit", "inline_slot_units",
		"inline_row_units", "lines_header_lines", "lines_row_words", "lines_row_lines", "lines_slot_bytes"} {
		if !strings.Contains(text, "__host____device__inlineint"+f+"(") {
			t.Errorf("the interface text has no __host__ __device__ %s", f)
		}
	}
	for _, d := range []string{"structLLArgs{", "structGinArgs{"} {
		if !strings.Contains(text, d) {
			t.Errorf("the interface text has no %s", d)
		}
	}
}

func TestPTXDirRefusesAnotherInterface(t *testing.T) {
	v := Variants()[0]
	own := embeddedPTX(t, v)
	stamp, ok := ptxInterfaceStamp(own)
	if !ok {
		t.Fatalf("%s has no interface stamp", v.Module())
	}
	for _, c := range []struct {
		name, ptx, refusal string
	}{
		{"the same interface", string(own), ""},
		{"another interface", strings.Replace(string(own), stamp, strings.Repeat("0", len(stamp)), 1), "another interface"},
		{"no stamp", strings.Replace(string(own), interfaceStampPrefix+stamp+"\n", "", 1), "no interface stamp"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, v.Module()), []byte(c.ptx), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := PTX(dir, v)
		switch {
		case c.refusal == "" && (err != nil || string(b) != c.ptx):
			t.Errorf("%s: %v", c.name, err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.refusal)
		}
	}
}
