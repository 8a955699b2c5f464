package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// The Go mirrors of the kernels' constants (constexpr int in ll.cu and
// ll.cuh) match them, each checked by its C name.
func TestMirrorsMatchTheSource(t *testing.T) {
	consts := map[string]int{}
	for _, file := range []string{"ll.cuh", "ll.cu"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^constexpr int (\w+) = (-?\d+);`).FindAllSubmatch(src, -1) {
			name := string(m[1])
			if _, dup := consts[name]; dup {
				t.Errorf("%s: constexpr int %s defined twice", file, name)
			}
			consts[name], _ = strconv.Atoi(string(m[2]))
		}
	}
	for name, want := range map[string]int{
		"kThreads":             ThreadsPerBlock,
		"kMaxRanks":            MaxRanks,
		"kMaxTopK":             MaxTopK,
		"kSpreadTokens":        SpreadTokens,
		"kTracePoints":         TracePoints,
		"kClockWords":          ClockBytes / 8,
		"kProtoFenced":         int(ProtoFenced),
		"kProtoInline":         int(ProtoInline),
		"kProtoLines":          int(ProtoLines),
		"kPhaseDispatch":       PhaseDispatch,
		"kPhaseCombine":        PhaseCombine,
		"kPhaseVariant":        PhaseVariant,
		"kPhaseStale":          PhaseStale,
		"kModeRankLocalReduce": ModeRankLocalReduce,
		"kModeDirectSend":      ModeDirectSend,
		"kModeRankMajor":       ModeRankMajor,
		"kFlagPrescale":        FlagPrescale,
		"kModesDispatchShift":  ModesDispatchShift,
		"kModesCombineShift":   ModesCombineShift,
		"kModesFP8Shift":       ModesFP8Shift,
		"kModesModeShift":      ModesModeShift,
		"kModesFlagsShift":     ModesFlagsShift,
		"kModesZeroShift":      ModesZeroShift,
	} {
		got, ok := consts[name]
		if !ok {
			t.Errorf("ll.cu, ll.cuh: no constexpr int %s", name)
			continue
		}
		if got != want {
			t.Errorf("%s = %d in the kernels, the Go mirror says %d", name, got, want)
		}
	}
}

// The modes word: each variant's fields in their four bits, the flags above
// them, and neither SetArgs nor SetFlag touches the other's bits.
func TestModesWord(t *testing.T) {
	for _, c := range []struct {
		d, c, fp8, mode, want int32
	}{
		{ProtoFenced, ProtoFenced, 0, ModeRankLocalReduce, 0},
		{ProtoLines, ProtoLines, 0, ModeRankLocalReduce, 0x22},
		{ProtoInline, ProtoInline, 1, ModeDirectSend, 0x1111},
		{ProtoLines, ProtoFenced, 1, ModeRankMajor, 0x2102},
	} {
		if got := ModesWord(c.d, c.c, c.fp8, c.mode); got != c.want {
			t.Errorf("ModesWord(%d, %d, %d, %d) = %#x, want %#x", c.d, c.c, c.fp8, c.mode, got, c.want)
		}
	}
	if ModesVariantMask != 0xffff || ModesWord(3, 15, 15, 15)&^ModesVariantMask != 0 {
		t.Errorf("the variant's fields reach past bit 16 (mask %#x)", ModesVariantMask)
	}
	for _, f := range []int32{FlagPrescale} {
		if f<<ModesFlagsShift >= 1<<ModesZeroShift {
			t.Errorf("flag %#x reaches the zero bits of the modes word", f)
		}
	}
	for _, f := range []int32{0, 1 << 8, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetFlag(%#x) did not panic", f)
				}
			}()
			var a Args
			a.SetFlag(f, true)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Put of a modes word with bit 24 set did not panic")
			}
		}()
		a := Args{Modes: 1 << ModesZeroShift}
		a.Put(make([]byte, ArgsSize))
	}()
	var a Args
	a.SetFlag(FlagPrescale, true)
	v := Variant{Dispatch: ProtoLines, Combine: ProtoLines, FP8: true, RankMajor: true}
	v.SetArgs(&a)
	if want := int32(FlagPrescale<<16 | 0x2122); a.Modes != want || !a.FP8() {
		t.Errorf("SetArgs after SetFlag: modes %#x, want %#x", a.Modes, want)
	}
	a.SetFlag(FlagPrescale, false)
	if a.Modes != 0x2122 {
		t.Errorf("SetFlag(false): modes %#x, want 0x2122", a.Modes)
	}
	Variant{Dispatch: ProtoFenced, Combine: ProtoFenced}.SetArgs(&a)
	if a.Modes != 0 || a.FP8() {
		t.Errorf("SetArgs of a BF16 fenced rank_local_reduce variant: modes %#x, want 0", a.Modes)
	}
}

// The error word is written as DecodeError reads it: (phase << 24) |
// (peer + 1) by a timed-out wait, kPhaseVariant << 24 by a variant check.
func TestDecodeError(t *testing.T) {
	for file, form := range map[string]string{"ll.cuh": "(phase << 24) | (peer + 1)", "ll.cu": "kPhaseVariant << 24"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), form) {
			t.Errorf("%s no longer writes the error word as %s: update DecodeError", file, form)
		}
	}
	for _, c := range []struct {
		w           uint32
		phase, peer int
	}{
		{0, 0, -1},
		{PhaseDispatch<<24 | (0 + 1), PhaseDispatch, 0},
		{PhaseCombine<<24 | (255 + 1), PhaseCombine, 255},
		{PhaseDispatch<<24 | 0xFFFFFF, PhaseDispatch, 0xFFFFFE},
		{PhaseVariant << 24, PhaseVariant, -1},
	} {
		if phase, peer := DecodeError(c.w); phase != c.phase || peer != c.peer {
			t.Errorf("DecodeError(%#x) = %d, %d, want %d, %d", c.w, phase, peer, c.phase, c.peer)
		}
	}
}

// cField is one field of a C struct: its name, offset and size.
type cField struct {
	name         string
	offset, size int
}

var (
	cCommentRE = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	cFieldRE   = regexp.MustCompile(`^(?:const\s+)?(\w+)\s*(\*?)\s*(\w+)$`)
)

// parseCStruct lays out `struct name { ... };` of a C++ source as the
// compiler does for its fields: pointers (of any type), uint64_t and int64_t
// of 8 bytes, int32_t of 4, each at its natural alignment. It returns the
// fields in order and sizeof the struct.
func parseCStruct(src, name string) ([]cField, int, error) {
	m := regexp.MustCompile(`(?s)\bstruct ` + name + ` \{(.*?)\n\};`).FindStringSubmatch(src)
	if m == nil {
		return nil, 0, fmt.Errorf("no struct %s { ... };", name)
	}
	var fields []cField
	off, align := 0, 1
	for _, decl := range strings.Split(cCommentRE.ReplaceAllString(m[1], ""), ";") {
		decl = strings.Join(strings.Fields(decl), " ")
		if decl == "" {
			continue
		}
		d := cFieldRE.FindStringSubmatch(decl)
		if d == nil {
			return nil, 0, fmt.Errorf("struct %s: cannot lay out %q", name, decl)
		}
		size := 0
		switch {
		case d[2] == "*":
			size = 8
		case d[1] == "uint64_t" || d[1] == "int64_t":
			size = 8
		case d[1] == "int32_t":
			size = 4
		default:
			return nil, 0, fmt.Errorf("struct %s: field %s of type %s, of no known size", name, d[3], d[1])
		}
		off = (off + size - 1) / size * size
		fields = append(fields, cField{d[3], off, size})
		off += size
		align = max(align, size)
	}
	return fields, (off + align - 1) / align * align, nil
}

func TestParseCStruct(t *testing.T) {
	src := "struct S {\n    int32_t a;   // x; y\n    const float* p;\n  /* int32_t no; */ int64_t b_c;\n    int32_t d;\n};\n"
	fields, size, err := parseCStruct(src, "S")
	if err != nil {
		t.Fatal(err)
	}
	want := []cField{{"a", 0, 4}, {"p", 8, 8}, {"b_c", 16, 8}, {"d", 24, 4}}
	if !slices.Equal(fields, want) || size != 32 {
		t.Fatalf("parsed %v, size %d; want %v, size 32", fields, size, want)
	}
	if _, _, err := parseCStruct("struct S {\n    double d;\n};\n", "S"); err == nil {
		t.Fatal("a field of unknown size was laid out")
	}
	if _, _, err := parseCStruct(src, "T"); err == nil {
		t.Fatal("a missing struct was found")
	}
}

// goFieldName is the Go mirror's name of C field c: snake_case to CamelCase
// compared without case (topk is TopK, fp8 is FP8), so it is found among
// names by folding.
func goFieldName(c string, names []string) (string, bool) {
	for _, n := range names {
		if strings.EqualFold(strings.ReplaceAll(c, "_", ""), n) {
			return n, true
		}
	}
	return "", false
}

// Args mirrors struct LLArgs (ll.cuh) field for field: each field set alone
// to a sentinel, Put writes exactly its little-endian bytes at the C offset
// of the C field of its name, and nothing else; every C field has its Go
// field and every Go field its C one, in the same order; ArgsSize is
// sizeof(LLArgs).
func TestArgsPutMirrorsLLArgs(t *testing.T) {
	src, err := os.ReadFile("ll.cuh")
	if err != nil {
		t.Fatal(err)
	}
	fields, size, err := parseCStruct(string(src), "LLArgs")
	if err != nil {
		t.Fatal(err)
	}
	if size != ArgsSize {
		t.Fatalf("sizeof(LLArgs) is %d, ArgsSize %d", size, ArgsSize)
	}
	typ := reflect.TypeOf(Args{})
	var names []string
	for i := range typ.NumField() {
		n := typ.Field(i).Name
		if _, dup := goFieldName(n, names); dup {
			t.Fatalf("Args.%s: two fields of one name but for case", n)
		}
		names = append(names, n)
	}
	mirrored := map[string]bool{}
	order := 0
	for i, c := range fields {
		n, ok := goFieldName(c.name, names)
		if !ok {
			t.Errorf("LLArgs.%s has no Go mirror in Args", c.name)
			continue
		}
		mirrored[n] = true
		f, _ := typ.FieldByName(n)
		if f.Index[0] < order {
			t.Errorf("Args.%s is declared out of LLArgs' order", n)
		}
		order = f.Index[0]
		if int(f.Type.Size()) != c.size {
			t.Errorf("Args.%s is %s, LLArgs.%s %d bytes", n, f.Type, c.name, c.size)
			continue
		}
		// A sentinel of every byte nonzero, the first one the field's number.
		want := make([]byte, c.size)
		want[0] = byte(i + 1)
		for j := 1; j < c.size; j++ {
			want[j] = byte(0x80 + j)
		}
		if c.name == "modes" {
			want[3] = 0 // bits 24..31 stay zero (Put refuses them)
		}
		var a Args
		v := reflect.ValueOf(&a).Elem().FieldByIndex(f.Index)
		switch f.Type.Kind() {
		case reflect.Uint64:
			v.SetUint(binary.LittleEndian.Uint64(want))
		case reflect.Int32:
			v.SetInt(int64(int32(binary.LittleEndian.Uint32(want))))
		default:
			t.Errorf("Args.%s is %s: Put writes uint64 and int32 fields", n, f.Type)
			continue
		}
		b := make([]byte, ArgsSize+16) // past the end: nothing
		a.Put(b)
		exp := make([]byte, len(b))
		copy(exp[c.offset:], want)
		if !bytes.Equal(b, exp) {
			where := "did not write it whole"
			if at := bytes.Index(b, want); at >= 0 {
				where = fmt.Sprintf("wrote it at offset %d", at)
			}
			var stray []int
			for o := range b {
				if b[o] != 0 && (o < c.offset || o >= c.offset+c.size) {
					stray = append(stray, o)
				}
			}
			t.Errorf("Args.%s (LLArgs.%s, %d bytes at offset %d): Put %s (bytes set outside the field: %v)",
				n, c.name, c.size, c.offset, where, stray)
		}
	}
	for _, n := range names {
		if !mirrored[n] {
			t.Errorf("Args.%s mirrors no field of LLArgs", n)
		}
	}
}
