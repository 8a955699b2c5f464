package scripts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePtxas "assembles" by copying the PTX file to the -o path (the test's
// PTX files hold the listing cuobjdump is to print); a file that contains
// BROKEN fails as ptxas does on an unsupported PTX ISA.
const fakePtxas = `#!/bin/sh
out=
while [ $# -gt 1 ]; do
	case $1 in -o) out=$2; shift ;; esac
	shift
done
[ -f "$1" ] || { echo "ptxas fatal   : Input file missing" >&2; exit 255; }
if grep -q BROKEN "$1"; then echo "ptxas fatal   : Unsupported .version 9.0" >&2; exit 255; fi
cp "$1" "$out"
`

// fakeCuobjdump prints the "cubin", which is the listing itself; one
// that contains NOELF fails as cuobjdump does on a file it cannot read.
const fakeCuobjdump = `#!/bin/sh
[ "$1" = -sass ] || exit 1
if grep -q NOELF "$2"; then echo "cuobjdump fatal : Could not open input file" >&2; exit 1; fi
cat "$2"
`

// listing is cuobjdump -sass's text for a module whose entries (short
// names: dispatch, spread for dispatch_spread, combine) have the given
// instruction counts, in its layout: a function header, then each
// instruction on a line that starts with its offset and its text and ends
// with the first half of its encoding, the second half on the next line;
// every fifth instruction is printed as cuobjdump prints some, with its
// encoding only.
func listing(entries map[string]int) string {
	var b strings.Builder
	b.WriteString("\n\tcode for sm_90\n")
	for _, name := range []string{"combine", "dispatch", "spread"} {
		n, ok := entries[name]
		if !ok {
			continue
		}
		fn := "epbench_ll_" + name
		if name == "spread" {
			fn = "epbench_ll_dispatch_spread"
		}
		fmt.Fprintf(&b, "\t\tFunction : %s\n", fn)
		b.WriteString("\t.headerflags    @\"EF_CUDA_SM90 EF_CUDA_PTX_SM(EF_CUDA_SM90)\"\n")
		for i := 0; i < n; i++ {
			if i%5 == 4 {
				b.WriteString("                                                              /* 0xffffffff71177848 */\n")
			} else {
				fmt.Fprintf(&b, "        /*%04x*/                   LDC R1, c[0x0][0x28] ;        /* 0x00000a00ff017b82 */\n", 16*i)
			}
			b.WriteString("                                                              /* 0x000e240000000800 */\n")
		}
		b.WriteString("\t\t..........\n\n")
	}
	return b.String()
}

// sassFolder is a temporary folder whose bin/ holds the stand-ins for
// ptxas and cuobjdump.
func sassFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	for name, body := range map[string]string{"ptxas": fakePtxas, "cuobjdump": fakeCuobjdump} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", name), []byte(body), 0o755))
	}
	return dir
}

// sassModule writes dir/folder/ll_name.ptx holding body; returns the folder.
func sassModule(t *testing.T, dir, folder, name, body string) string {
	t.Helper()
	d := filepath.Join(dir, folder)
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "ll_"+name+".ptx"), []byte(body), 0o644))
	return d
}

// runSassSize runs sass-size.sh with dir's stand-ins first in PATH; returns
// stdout, stderr and the exit status.
func runSassSize(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runSassSizeEnv(t, dir, nil, args...)
}

// runSassSizeEnv is runSassSize with env (NAME=VALUE) over the environment.
func runSassSizeEnv(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	env = append([]string{"PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"), "PTXAS=ptxas", "CUOBJDUMP=cuobjdump"}, env...)
	return runScript(t, env, "sass-size.sh", args...)
}

// runScript runs bash SCRIPT ARGS in this folder with env (NAME=VALUE)
// over the environment: its stdout, its stderr and its exit code.
func runScript(t *testing.T, env []string, script string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

func TestSassSizeCountsEachEntry(t *testing.T) {
	dir := sassFolder(t)
	d := sassModule(t, dir, "new", "lines_lines_bf16_rlr", listing(map[string]int{"dispatch": 300, "combine": 212}))
	sassModule(t, dir, "new", "fenced_fenced_fp8_ds", listing(map[string]int{"dispatch": 7, "spread": 40, "combine": 9}))
	sassModule(t, dir, "new", "inline_inline_bf16_rm", listing(map[string]int{"spread": 30, "combine": 34}))
	out, stderr, code := runSassSize(t, dir, d)
	require.Equal(t, 0, code, stderr)
	// The larger dispatch entry makes the pair: 40 + 9 and 300 + 212 instructions.
	assert.Equal(t, "| module | dispatch / spread dispatch / combine instructions (larger dispatch with combine) |\n|---|---|\n"+
		"| fenced_fenced_fp8_ds | 7 / 40 / 9 (0.8 KiB) |\n"+
		"| inline_inline_bf16_rm | - / 30 / 34 (1.0 KiB) |\n"+
		"| lines_lines_bf16_rlr | 300 / - / 212 (8.0 KiB) |\n", out)
}

func TestSassSizeAgainstABase(t *testing.T) {
	dir := sassFolder(t)
	b := sassModule(t, dir, "base", "lines_lines_bf16_rlr", listing(map[string]int{"dispatch": 256, "combine": 128}))
	sassModule(t, dir, "base", "fenced_fenced_bf16_rlr", listing(map[string]int{"dispatch": 100, "spread": 50, "combine": 10}))
	d := sassModule(t, dir, "new", "lines_lines_bf16_rlr", listing(map[string]int{"dispatch": 320, "combine": 120}))
	sassModule(t, dir, "new", "fenced_fenced_bf16_rlr", listing(map[string]int{"dispatch": 90, "spread": 150, "combine": 10}))
	sassModule(t, dir, "new", "inline_inline_bf16_rlr", listing(map[string]int{"dispatch": 1, "combine": 1}))
	// Only the modules named are measured, in the order named.
	out, stderr, code := runSassSize(t, dir, "-b", b, d, "lines_lines_bf16_rlr", "fenced_fenced_bf16_rlr")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "| module | BASE "+b+" | "+d+" | difference |\n|---|---|---|---|\n"+
		"| lines_lines_bf16_rlr | 256 / - / 128 (6.0 KiB) | 320 / - / 120 (6.9 KiB) | +64 / +0 / -8 (+0.9 KiB), code differs |\n"+
		"| fenced_fenced_bf16_rlr | 100 / 50 / 10 (1.7 KiB) | 90 / 150 / 10 (2.5 KiB) | -10 / +100 / +0 (+0.8 KiB), code differs |\n", out)
}

// Two builds whose modules have the same sizes are told apart by their
// instructions: the same listing is the same code, one instruction's text
// or encoding changed is not (what a kernel change must show for the
// modules it did not mean to change).
func TestSassSizeTellsTheSameCodeFromTheSameSize(t *testing.T) {
	dir := sassFolder(t)
	same := listing(map[string]int{"dispatch": 40, "combine": 20})
	renamed := strings.Replace(same, "LDC R1, c[0x0][0x28]", "LDC R2, c[0x0][0x28]", 1)
	reencoded := strings.Replace(same, "0x00000a00ff017b82", "0x00000a00ff027b82", 1)
	require.NotEqual(t, same, renamed)
	require.NotEqual(t, same, reencoded)
	// Only the lines around the code differ: the header, its flags.
	reheaded := strings.Replace(same, "code for sm_90", "code for sm_90 (another file)", 1)
	reheaded = strings.Replace(reheaded, "EF_CUDA_SM90 EF_CUDA_PTX_SM", "EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM", -1)
	require.NotEqual(t, same, reheaded)
	b := sassModule(t, dir, "base", "a", same)
	sassModule(t, dir, "base", "b", same)
	sassModule(t, dir, "base", "c", same)
	sassModule(t, dir, "base", "d", same)
	d := sassModule(t, dir, "new", "a", same)
	sassModule(t, dir, "new", "b", renamed)
	sassModule(t, dir, "new", "c", reencoded)
	sassModule(t, dir, "new", "d", reheaded)
	out, stderr, code := runSassSize(t, dir, "-b", b, d)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Equal(t, "| a | 40 / - / 20 (0.9 KiB) | 40 / - / 20 (0.9 KiB) | +0 / +0 / +0 (+0.0 KiB), same code |", lines[2])
	assert.Equal(t, "| b | 40 / - / 20 (0.9 KiB) | 40 / - / 20 (0.9 KiB) | +0 / +0 / +0 (+0.0 KiB), code differs |", lines[3])
	assert.Equal(t, "| c | 40 / - / 20 (0.9 KiB) | 40 / - / 20 (0.9 KiB) | +0 / +0 / +0 (+0.0 KiB), code differs |", lines[4])
	assert.Equal(t, "| d | 40 / - / 20 (0.9 KiB) | 40 / - / 20 (0.9 KiB) | +0 / +0 / +0 (+0.0 KiB), same code |", lines[5])
}

func TestSassSizeReportsAFailedModuleAndGoesOn(t *testing.T) {
	dir := sassFolder(t)
	d := sassModule(t, dir, "new", "a_broken", "BROKEN\n")
	sassModule(t, dir, "new", "b_no_combine", listing(map[string]int{"dispatch": 5}))
	sassModule(t, dir, "new", "c_unreadable", "NOELF\n")
	sassModule(t, dir, "new", "d_good", listing(map[string]int{"dispatch": 64, "combine": 64}))
	out, _, code := runSassSize(t, dir, d)
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Equal(t, "| a_broken | FAIL: ptxas fatal   : Unsupported .version 9.0  |", lines[2])
	assert.Equal(t, "| b_no_combine | FAIL: no dispatch entry or no epbench_ll_combine in the listing  |", lines[3])
	assert.Equal(t, "| c_unreadable | FAIL: cuobjdump fatal : Could not open input file  |", lines[4])
	assert.Equal(t, "| d_good | 64 / - / 64 (2.0 KiB) |", lines[5])
}

func TestSassSizeFailsInTheColumnOfTheBuildThatFailed(t *testing.T) {
	dir := sassFolder(t)
	good := listing(map[string]int{"dispatch": 2, "combine": 2})
	d := sassModule(t, dir, "new", "x", good)
	sassModule(t, dir, "new", "y", "BROKEN\n")
	b := sassModule(t, dir, "base", "y", good)
	out, _, code := runSassSize(t, dir, "-b", b, d)
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	// x is missing from the base; y fails in the new build.
	assert.Equal(t, "| x | FAIL: ptxas fatal   : Input file missing  | 2 / - / 2 (0.1 KiB) | |", lines[2])
	assert.Equal(t, "| y | | FAIL: ptxas fatal   : Unsupported .version 9.0  | |", lines[3])
}

func TestSassSizeUsage(t *testing.T) {
	dir := sassFolder(t)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.MkdirAll(empty, 0o755))
	d := sassModule(t, dir, "new", "x", listing(map[string]int{"dispatch": 2, "combine": 2}))
	for _, c := range []struct {
		args []string
		env  string
		msg  string
	}{
		{[]string{filepath.Join(dir, "missing")}, "", "no folder"},
		{[]string{empty}, "", "no ll_*.ptx"},
		{[]string{"-b", filepath.Join(dir, "missing"), empty}, "", "no folder"},
		{[]string{d, "y"}, "", "no module y in " + d},
		{[]string{d}, "PTXAS=noptxas", "no noptxas (set PTXAS and CUOBJDUMP)"},
		{[]string{"-x"}, "", "unknown option -x"},
		{[]string{"-b"}, "", "-b needs a value"},
	} {
		var env []string
		if c.env != "" {
			env = []string{c.env}
		}
		out, stderr, code := runSassSizeEnv(t, dir, env, c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.Contains(t, stderr, "usage: scripts/sass-size.sh", c.args)
	}
	out, _, code := runSassSize(t, dir, "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Usage: scripts/sass-size.sh [-b BASE] [DIR] [MODULE...]")
}

func TestSassSizeLeavesNoTemporaryFiles(t *testing.T) {
	dir := sassFolder(t)
	d := sassModule(t, dir, "new", "x", listing(map[string]int{"dispatch": 2, "combine": 2}))
	tmp := t.TempDir()
	_, stderr, code := runSassSizeEnv(t, dir, []string{"TMPDIR=" + tmp}, d)
	require.Equal(t, 0, code, stderr)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
}
