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
if grep -q BROKEN "$1"; then echo "ptxas fatal   : Unsupported .version 9.0" >&2; exit 255; fi
cp "$1" "$out"
`

// fakeCuobjdump prints the "cubin", which is the listing itself.
const fakeCuobjdump = `#!/bin/sh
[ "$1" = -sass ] || exit 1
cat "$2"
`

// listing is cuobjdump -sass's text for a module whose entries have the
// given instruction counts, in its layout: a function header, then each
// instruction on a line that starts with its offset and the second half
// of its encoding on the next.
func listing(entries map[string]int) string {
	var b strings.Builder
	b.WriteString("\n\tcode for sm_90\n")
	for _, name := range []string{"epbench_ll_combine", "epbench_ll_dispatch"} {
		n, ok := entries[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\t\tFunction : %s\n", name)
		b.WriteString("\t.headerflags    @\"EF_CUDA_SM90 EF_CUDA_PTX_SM(EF_CUDA_SM90)\"\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "        /*%04x*/                   LDC R1, c[0x0][0x28] ;        /* 0x00000a00ff017b82 */\n", 16*i)
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
	cmd := exec.Command("bash", append([]string{"sass-size.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
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
	d := sassModule(t, dir, "new", "lines_lines_bf16_rlr", listing(map[string]int{"epbench_ll_dispatch": 300, "epbench_ll_combine": 212}))
	sassModule(t, dir, "new", "inline_inline_fp8_ds", listing(map[string]int{"epbench_ll_dispatch": 7, "epbench_ll_combine": 9}))
	out, stderr, code := runSassSize(t, dir, d)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "| module | dispatch / combine instructions (pair) |\n|---|---|\n"+
		"| inline_inline_fp8_ds | 7 / 9 (0.2 KiB) |\n"+
		"| lines_lines_bf16_rlr | 300 / 212 (8.0 KiB) |\n", out)
}

func TestSassSizeAgainstABase(t *testing.T) {
	dir := sassFolder(t)
	b := sassModule(t, dir, "base", "lines_lines_bf16_rlr", listing(map[string]int{"epbench_ll_dispatch": 256, "epbench_ll_combine": 128}))
	d := sassModule(t, dir, "new", "lines_lines_bf16_rlr", listing(map[string]int{"epbench_ll_dispatch": 320, "epbench_ll_combine": 120}))
	sassModule(t, dir, "new", "fenced_fenced_bf16_rlr", listing(map[string]int{"epbench_ll_dispatch": 1, "epbench_ll_combine": 1}))
	// Only the module named is measured.
	out, stderr, code := runSassSize(t, dir, "-b", b, d, "lines_lines_bf16_rlr")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "| module | base: dispatch / combine (pair) | "+d+": dispatch / combine (pair) | difference |\n|---|---|---|---|\n"+
		"| lines_lines_bf16_rlr | 256 / 128 (6.0 KiB) | 320 / 120 (6.9 KiB) | +64 / -8 (+0.9 KiB) |\n", out)
}

func TestSassSizeReportsAFailedModuleAndGoesOn(t *testing.T) {
	dir := sassFolder(t)
	d := sassModule(t, dir, "new", "a_broken", "BROKEN\n")
	sassModule(t, dir, "new", "b_no_combine", listing(map[string]int{"epbench_ll_dispatch": 5}))
	sassModule(t, dir, "new", "c_good", listing(map[string]int{"epbench_ll_dispatch": 64, "epbench_ll_combine": 64}))
	out, _, code := runSassSize(t, dir, d)
	assert.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	assert.Equal(t, "| a_broken | FAIL: ptxas fatal   : Unsupported .version 9.0  |", lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "| b_no_combine | FAIL"), lines[3])
	assert.Equal(t, "| c_good | 64 / 64 (2.0 KiB) |", lines[4])
}

func TestSassSizeFailsWhenTheBaseLacksTheModule(t *testing.T) {
	dir := sassFolder(t)
	d := sassModule(t, dir, "new", "x", listing(map[string]int{"epbench_ll_dispatch": 2, "epbench_ll_combine": 2}))
	b := filepath.Join(dir, "emptybase")
	require.NoError(t, os.MkdirAll(b, 0o755))
	out, _, code := runSassSize(t, dir, "-b", b, d)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "| x | FAIL")
	assert.Contains(t, out, "| 2 / 2 (0.1 KiB) |")
}

func TestSassSizeUsage(t *testing.T) {
	dir := sassFolder(t)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.MkdirAll(empty, 0o755))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{filepath.Join(dir, "missing")}, "no folder"},
		{[]string{empty}, "no ll_*.ptx"},
		{[]string{"-b", filepath.Join(dir, "missing"), empty}, "no folder"},
		{[]string{"-x"}, "unknown option -x"},
		{[]string{"-b"}, "-b needs a value"},
	} {
		out, stderr, code := runSassSize(t, dir, c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Contains(t, stderr, c.msg, c.args)
		assert.Contains(t, stderr, "usage: scripts/sass-size.sh", c.args)
	}
	out, _, code := runSassSize(t, dir, "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Usage: scripts/sass-size.sh [-b BASE] [DIR] [MODULE...]")
}
