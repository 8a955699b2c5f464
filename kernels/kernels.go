// Package kernels holds the CUDA C++ sources of the LL dispatch and combine
// kernels, their PTX (one file per Variant in ptx/, the variants listed in
// variants.txt, built by `make ptx` with CUDA 13 and embedded here), the
// entry names shared by the launcher and the CUPTI name matching, and the Go
// mirror of the kernels' argument block.
package kernels

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Entry points. CUPTI attributes kernel time by these names: a record whose
// name contains "dispatch" counts as dispatch, "combine" as combine. A
// dispatch runs DispatchSpreadKernel when its variant spreads at its token
// count (Variant.Spreads), else DispatchKernel: the two entries are the same
// kernel with one send path each.
const (
	DispatchKernel       = "epbench_ll_dispatch"
	DispatchSpreadKernel = "epbench_ll_dispatch_spread"
	CombineKernel        = "epbench_ll_combine"
)

// ThreadsPerBlock is the block size the kernels are written for
// (kThreads in ll.cu).
const ThreadsPerBlock = 512

// Variant is what one kernel module is built for (ll.cuh): the signalling
// of dispatch and of combine (Proto*), the dispatch dtype and the combine
// mode. Each variant is its own PTX file, so a launch runs through the code
// of its variant only.
type Variant struct {
	Dispatch, Combine int32 // Proto*
	FP8               bool  // dispatch carries E4M3
	DirectSend        bool  // combine mode direct_send (else rank_local_reduce)
	RankMajor         bool  // the rank-major layout (its combine reduces per rank; never with DirectSend)
	// GIN: the build whose peers outside the NVLink domain are written
	// through mirrors and NCCL GIN puts (ll_gin.cuh), of the fenced
	// protocols with a per-rank combine only; its module's name starts
	// with ll_nccl_.
	GIN bool
}

// NCCLVersion is the NCCL version (NCCL_VERSION_CODE) whose device headers
// the GIN modules are built against: the layout of the device communicator
// they are given is that version's. It is kernels/nccl.version, which
// scripts/ptx.sh reads too and checks the headers against.
var NCCLVersion = mustAtoi(ncclVersionFile)

//go:embed nccl.version
var ncclVersionFile string

func mustAtoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		panic("kernels/nccl.version: " + err.Error())
	}
	return n
}

// ginPrefix starts a GIN variant's name.
const ginPrefix = "nccl_"

// Spreads reports whether a dispatch of `tokens` tokens in this variant
// sends its rows spread over the grid (DispatchSpreadKernel), as spreads()
// in ll.cu decides, which a launch of the other entry reports as an error:
// an inline dispatch always (config.InlineMaxTokens is below SpreadTokens),
// a fenced one below SpreadTokens tokens, a lines one never.
func (v Variant) Spreads(tokens int) bool {
	return v.Dispatch == ProtoInline || (v.Dispatch == ProtoFenced && tokens < SpreadTokens)
}

// Entries are the entry points of the variant's module, each taking one
// by-value Args block: the dispatch entries of the token counts it takes
// (both for a fenced dispatch, the spreading one for an inline dispatch, the
// other for a lines dispatch) and the combine entry.
func (v Variant) Entries() []string {
	var e []string
	if !v.Spreads(SpreadTokens) { // any count from SpreadTokens on
		e = append(e, DispatchKernel)
	}
	if v.Spreads(1) {
		e = append(e, DispatchSpreadKernel)
	}
	return append(e, CombineKernel)
}

// DispatchEntry is the entry point of a dispatch of `tokens` tokens.
func (v Variant) DispatchEntry(tokens int) string {
	if v.Spreads(tokens) {
		return DispatchSpreadKernel
	}
	return DispatchKernel
}

// ProtoNames are the Proto* values' names.
var ProtoNames = [...]string{ProtoFenced: "fenced", ProtoInline: "inline", ProtoLines: "lines"}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (v Variant) String() string {
	dt, mode := "bf16", "rlr"
	if v.FP8 {
		dt = "fp8"
	}
	if v.DirectSend {
		mode = "ds"
	}
	if v.RankMajor {
		mode = "rm"
	}
	name := fmt.Sprintf("%s_%s_%s_%s", ProtoNames[v.Dispatch], ProtoNames[v.Combine], dt, mode)
	if v.GIN {
		name = ginPrefix + name
	}
	return name
}

// Module is the name of the variant's PTX file, e.g. ll_inline_inline_bf16_rlr.ptx.
func (v Variant) Module() string { return "ll_" + v.String() + ".ptx" }

// Defines are the nvcc macro definitions that build the variant
// (scripts/ptx.sh derives the same from the variant's name; the PTX stamp
// hashes them, so their spelling is fixed).
func (v Variant) Defines() string {
	d := fmt.Sprintf("-DEPBENCH_DISPATCH_PROTO=%d -DEPBENCH_COMBINE_PROTO=%d -DEPBENCH_FP8=%d -DEPBENCH_COMBINE_MODE=%d",
		v.Dispatch, v.Combine, b01(v.FP8), v.mode())
	if v.GIN {
		d += fmt.Sprintf(" -DEPBENCH_GIN=1 -DEPBENCH_NCCL_VERSION=%d", NCCLVersion)
	}
	return d
}

// mode is the variant's combine mode in LLArgs.modes (Mode*).
func (v Variant) mode() int32 {
	switch {
	case v.RankMajor:
		return ModeRankMajor
	case v.DirectSend:
		return ModeDirectSend
	}
	return ModeRankLocalReduce
}

// SetArgs sets the fields of a.Modes that name the variant (the kernels
// check them against their module's), keeping its flags.
func (v Variant) SetArgs(a *Args) {
	a.Modes = a.Modes&^ModesVariantMask | ModesWord(v.Dispatch, v.Combine, int32(b01(v.FP8)), v.mode())
}

// variantsFile lists the variants, one name (Variant.String) a line, #
// comments: the one list, which scripts/ptx.sh reads too (it has no Go).
//
//go:embed variants.txt
var variantsFile string

// variants is variantsFile parsed; variantsErr, its first error (a test
// checks there is none).
var variants, variantsErr = parseVariants(variantsFile)

// Variants are the variants a launch can ask for, one PTX file each, in the
// order variants.txt lists them: every dtype and combine mode with the
// protocol pairs the configuration allows (config.Protocol): both inline, or
// dispatch fenced or lines and combine fenced or lines, except a lines
// dispatch with a fenced combine (lines need NVLink, and over NVLink every
// combine above the inline size uses lines when its dispatch does).
func Variants() []Variant { return slices.Clone(variants) }

// parseVariants reads a variant list: one name a line, as Variant.String
// spells it, blank lines and what follows a # ignored. It returns the
// variants up to the first error.
func parseVariants(text string) ([]Variant, error) {
	var out []Variant
	seen := map[Variant]bool{}
	for i, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) > 1 {
			return out, fmt.Errorf("variants.txt:%d: %q: one name a line", i+1, line)
		}
		v, err := parseVariant(f[0])
		if err != nil {
			return out, fmt.Errorf("variants.txt:%d: %w", i+1, err)
		}
		if seen[v] {
			return out, fmt.Errorf("variants.txt:%d: %s listed twice", i+1, v)
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("variants.txt lists no variant")
	}
	return out, nil
}

// parseVariant is the variant of a name Variant.String gives:
// <dispatch>_<combine>_<bf16|fp8>_<rlr|ds|rm>, the protocols by ProtoNames.
func parseVariant(name string) (Variant, error) {
	base, gin := strings.CutPrefix(name, ginPrefix)
	parts := strings.Split(base, "_")
	if len(parts) != 4 {
		return Variant{}, fmt.Errorf("variant %q: not <dispatch>_<combine>_<bf16|fp8>_<rlr|ds|rm>", name)
	}
	var v Variant
	for i, p := range []*int32{&v.Dispatch, &v.Combine} {
		j := slices.Index(ProtoNames[:], parts[i])
		if j < 0 {
			return Variant{}, fmt.Errorf("variant %q: protocol %q is none of %v", name, parts[i], ProtoNames)
		}
		*p = int32(j)
	}
	switch parts[2] {
	case "bf16", "fp8":
		v.FP8 = parts[2] == "fp8"
	default:
		return Variant{}, fmt.Errorf("variant %q: dtype %q is neither bf16 nor fp8", name, parts[2])
	}
	switch parts[3] {
	case "rlr", "ds", "rm":
		v.DirectSend, v.RankMajor = parts[3] == "ds", parts[3] == "rm"
	default:
		return Variant{}, fmt.Errorf("variant %q: combine mode %q is none of rlr, ds, rm", name, parts[3])
	}
	v.GIN = gin
	if gin && (v.Dispatch != ProtoFenced || v.Combine != ProtoFenced || v.DirectSend) {
		return Variant{}, fmt.Errorf("variant %q: a GIN build is of the fenced protocols with rank_local_reduce or rank-major", name)
	}
	return v, nil
}

// Built refuses a variant no PTX file is built for (variants.txt).
func Built(v Variant) error {
	if slices.Contains(variants, v) {
		return nil
	}
	return fmt.Errorf("no kernel module is built for a %s dispatch with a %s combine (%s)", ProtoNames[v.Dispatch], ProtoNames[v.Combine], v)
}

// ptxDir holds the PTX of every variant, built by `make ptx`.
const ptxDir = "ptx"

//go:embed ptx/*.ptx
var embedded embed.FS

// PTX returns the PTX of variant v: the embedded file, or, when dir is not
// empty, the development override dir/<v.Module()>, which must carry the
// embedded file's interface stamp: kernels built for another layout of the
// argument blocks, or for other message and slot sizes, would read every
// field at another offset than Args writes it or write past the buffers the
// host sized, and still run.
func PTX(dir string, v Variant) ([]byte, error) {
	own, err := embedded.ReadFile(ptxDir + "/" + v.Module())
	if dir == "" || err != nil {
		if err != nil && dir != "" {
			err = fmt.Errorf("--ptx-dir: %s is not embedded, so its interface is not known: %w", v.Module(), err)
		}
		return own, err
	}
	path := filepath.Join(dir, v.Module())
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ptx-dir: %w", err)
	}
	want, ok := ptxInterfaceStamp(own)
	if !ok {
		return nil, fmt.Errorf("--ptx-dir: the embedded %s has no interface stamp to compare with: rebuild kernels/ptx with scripts/ptx.sh", v.Module())
	}
	got, ok := ptxInterfaceStamp(b)
	switch {
	case !ok:
		return nil, fmt.Errorf("--ptx-dir: %s has no interface stamp (%q, the second line of scripts/ptx.sh's "+
			"files), so nothing shows that its kernels read their arguments and size their messages as this binary "+
			"does: run it with the epbench of the tree it was built from, or build it again with this tree's "+
			"scripts/ptx.sh", path, strings.TrimSpace(interfaceStampPrefix))
	case got != want:
		return nil, fmt.Errorf("--ptx-dir: %s was built for another interface (the argument blocks, constants and "+
			"sizes of ll.cuh and ll_gin.cuh) than this binary's (stamp %.12s…, this binary's %.12s…): run it with the "+
			"epbench of the tree it was built from", path, got, want)
	}
	return b, nil
}

// interfaceStampPrefix starts the second line scripts/ptx.sh writes into
// every PTX file: the sha256 of what the host mirrors of the kernels' headers
// (`scripts/ptx.sh --interface-text` prints it).
const interfaceStampPrefix = "// epbench-interface-sha256: "

// ptxInterfaceStamp is the interface stamp among a PTX file's leading
// comment lines.
func ptxInterfaceStamp(ptx []byte) (string, bool) {
	for rest := string(ptx); strings.HasPrefix(rest, "//"); {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if s, ok := strings.CutPrefix(line, interfaceStampPrefix); ok {
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}
