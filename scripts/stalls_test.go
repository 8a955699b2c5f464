package scripts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// srcRow is one SASS instruction of Nsight Compute's source page: its
// text, how many warps executed it, and its warp samples by stall reason
// (the reasons' names without the stall_ prefix).
type srcRow struct {
	sass    string
	execd   int
	stalled map[string]int
}

// stallReasons are the per-reason columns the fixture's header carries, in
// ncu's order; each also comes as a "(Not Issued)" column, which the
// script must ignore (the fixture fills those with a large number).
var stallReasons = []string{"barrier", "imc", "long_sb", "no_inst", "wait"}

// ncuSource is `ncu --page source --csv --print-source sass` for one
// kernel: every field quoted, a kernel name row, a header, one row per
// instruction.
func ncuSource(kernel string, rows []srcRow) string {
	q := func(fields ...string) string { return `"` + strings.Join(fields, `","`) + `"` + "\n" }
	header := []string{"Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
		"# Samples", "Instructions Executed", "Address Space"}
	for _, r := range stallReasons {
		header = append(header, "stall_"+r)
	}
	for _, r := range stallReasons {
		header = append(header, "stall_"+r+" (Not Issued)")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\"Kernel Name\",\"%s\",\n", kernel)
	b.WriteString(q(header...))
	for i, r := range rows {
		all := 0
		for _, n := range r.stalled {
			all += n
		}
		// "# Samples" differs from the stall samples' sum, so that reading
		// the wrong column shows.
		f := []string{fmt.Sprintf("0x7f00%04x", 16*i), r.sass, fmt.Sprint(all), "", fmt.Sprint(all + 1), fmt.Sprint(r.execd), "Generic"}
		for _, name := range stallReasons {
			f = append(f, fmt.Sprint(r.stalled[name]))
		}
		for range stallReasons {
			f = append(f, "999")
		}
		b.WriteString(q(f...))
	}
	return b.String()
}

// dispatchRows: 64 warps; a barrier never executed (a branch around it)
// before the first executed one, a constant read that waits, an
// instruction executed twice per warp, and one past the barrier that
// waits on the constant cache too (not on the path to the barrier).
var dispatchRows = []srcRow{
	{"LDC R1, c[0x0][0x28]", 64, map[string]int{"no_inst": 10}},
	{"ULDC UR4, c[0x0][0x328]", 64, map[string]int{"imc": 28, "wait": 2}},
	{"@!P0 BAR.SYNC 0x0", 0, nil},
	{"IADD3 R0, R1, R2, RZ", 128, map[string]int{"wait": 20}},
	{"BAR.SYNC.DEFER_BLOCKING 0x0", 64, map[string]int{"barrier": 40}},
	{"LDG.E R2, desc[UR4][R2.64]", 64, map[string]int{"long_sb": 90, "imc": 10}},
}

func writeCSV(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func runStalls(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runScript(t, nil, "stalls.sh", args...)
}

func TestStallsSummarizesAKernelAndItsPathToTheFirstBarrier(t *testing.T) {
	f := writeCSV(t, t.TempDir(), "disp.csv", ncuSource("epbench_ll_dispatch", dispatchRows))
	out, stderr, code := runStalls(t, f)
	require.Equal(t, 0, code, stderr)
	// 200 samples; the path to the barrier is rows 0-4: (64+64+0+128+64)/64
	// = 5 instructions a warp, 100 samples.
	assert.Equal(t, f+": epbench_ll_dispatch: 200 samples, 64 warps\n"+
		"  all: long_sb 45.0 %, barrier 20.0 %, imc 19.0 %, wait 11.0 %, no_inst 5.0 %\n"+
		"  to the first barrier (instruction 4): 5 instructions a warp, 50.0 % of the samples: barrier 40.0 %, imc 28.0 %, wait 22.0 %, no_inst 10.0 %\n"+
		"  constant-cache waits there: c[0x0][0x328] 28\n", out)
}

func TestStallsReadsEveryKernelAndKeepsTheLargestReasons(t *testing.T) {
	noBarrier := []srcRow{
		{"ULDC UR4, c[0x0][0x2f0]", 32, map[string]int{"imc": 5, "wait": 5}},
		{"EXIT", 32, map[string]int{"no_inst": 10}},
	}
	body := ncuSource("epbench_ll_dispatch", dispatchRows) + ncuSource("epbench_ll_combine", noBarrier)
	f := writeCSV(t, t.TempDir(), "both.csv", body)
	out, stderr, code := runStalls(t, "-n", "2", f)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, f+": epbench_ll_dispatch: 200 samples, 64 warps\n"+
		"  all: long_sb 45.0 %, barrier 20.0 %\n"+
		"  to the first barrier (instruction 4): 5 instructions a warp, 50.0 % of the samples: barrier 40.0 %, imc 28.0 %\n"+
		"  constant-cache waits there: c[0x0][0x328] 28\n"+
		f+": epbench_ll_combine: 20 samples, 32 warps\n"+
		// Equal shares in the reasons' names' order.
		"  all: no_inst 50.0 %, imc 25.0 %\n"+
		"  no barrier executed\n", out)
}

func TestStallsReportsAFileItCannotReadAndGoesOn(t *testing.T) {
	dir := t.TempDir()
	good := writeCSV(t, dir, "good.csv", ncuSource("epbench_ll_combine", dispatchRows))
	plain := writeCSV(t, dir, "plain.csv", "\"Kernel Name\",\"epbench_ll_dispatch\",\n\"Address\",\"Source\",\"Instructions Executed\"\n\"0x0\",\"EXIT\",\"1\"\n")
	notCSV := writeCSV(t, dir, "log.txt", "==PROF== Disconnected\n")
	out, stderr, code := runStalls(t, filepath.Join(dir, "missing.csv"), plain, notCSV, good)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "stalls: "+filepath.Join(dir, "missing.csv")+": not a readable file\n")
	assert.Contains(t, stderr, "stalls: "+plain+": kernel epbench_ll_dispatch: the source page lacks the sampling columns (--section SourceCounters)\n")
	assert.Contains(t, stderr, "stalls: "+notCSV+": no kernel in it (ncu --page source --csv)\n")
	assert.Equal(t, 3, strings.Count(stderr, "\n"), stderr)
	assert.True(t, strings.HasPrefix(out, good+": epbench_ll_combine: 200 samples, 64 warps\n"), out)
	assert.Equal(t, 4, strings.Count(out, "\n"), out)
}

func TestStallsUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "no CSV named"},
		{[]string{"-n", "0", "x.csv"}, "-n takes a positive count, got '0'"},
		{[]string{"-n"}, "-n needs a value"},
		{[]string{"-x"}, "unknown option -x"},
	} {
		out, stderr, code := runStalls(t, c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Equal(t, "stalls: "+c.msg+"\nusage: scripts/stalls.sh [-n TOP] CSV...\n", stderr, c.args)
	}
	out, _, code := runStalls(t, "-h")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "Summarizes Nsight Compute's per-instruction warp-stall sampling"), out)
	assert.Contains(t, out, "Exit 0, 1 when a file is not such a CSV")
}

func TestStallsReadsWindowsLineEnds(t *testing.T) {
	dir := t.TempDir()
	lf := ncuSource("epbench_ll_dispatch", dispatchRows)
	f := writeCSV(t, dir, "disp.csv", lf)
	g := writeCSV(t, dir, "crlf.csv", strings.ReplaceAll(lf, "\n", "\r\n"))
	want, _, code := runStalls(t, f)
	require.Equal(t, 0, code)
	got, stderr, code := runStalls(t, g)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, strings.ReplaceAll(want, f, g), got)
}

func TestStallsRefusesWhatItCannotSummarizeRightly(t *testing.T) {
	dir := t.TempDir()
	full := ncuSource("epbench_ll_dispatch", dispatchRows)
	lines := strings.SplitAfter(full, "\n")
	header := lines[1]
	// The same header again under one kernel name: the rows after it would
	// be added to the kernel's as if they were one block.
	twice := writeCSV(t, dir, "twice.csv", strings.Join(lines[:4], "")+header+strings.Join(lines[4:], ""))
	// Sampling columns without the per-reason ones: shares of nothing.
	noReasons := writeCSV(t, dir, "noreasons.csv", "\"Kernel Name\",\"k\",\n"+
		"\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\",\"Instructions Executed\"\n\"0x0\",\"EXIT\",\"5\",\"1\"\n")
	// A header and no instruction under it.
	empty := writeCSV(t, dir, "empty.csv", lines[0]+header)
	// Nothing at all.
	nothing := writeCSV(t, dir, "nothing.csv", "")
	for _, c := range []struct {
		file, msg string
	}{
		{twice, "kernel epbench_ll_dispatch: a second header under one kernel name; not summarized"},
		{noReasons, "kernel k: the source page has no stall_* columns (--section SourceCounters)"},
		{empty, "kernel epbench_ll_dispatch: no instructions under its header"},
		{nothing, "no kernel in it (ncu --page source --csv)"},
		{dir, "not a readable file"},
	} {
		out, stderr, code := runStalls(t, c.file)
		assert.Equal(t, 1, code, c.file)
		assert.Empty(t, out, c.file)
		assert.Equal(t, "stalls: "+c.file+": "+c.msg+"\n", stderr, c.file)
	}
}

// Local memory: the loads and stores the warps executed, and the slots
// loaded that no executed store wrote, byte by byte (a 64-bit load half
// written counts, and says how much was not), in the order the code
// reaches them.
func TestStallsNamesLocalSlotsLoadedButNeverWritten(t *testing.T) {
	rows := []srcRow{
		{"STL [R1+0x10], R0", 32, nil},
		{"STL [R1+0xc], RZ", 32, nil},
		{"STL.S16 [R1+0x20], R4", 0, nil}, // never executed: [R1+0x20] stays unwritten
		{"LDL R2, [R1+0x10]", 32, map[string]int{"long_sb": 1}},
		{"LDL.64 R4, [R1+0xc]", 32, nil},  // bytes 0xc-0x13, all written
		{"LDL.64 R4, [R1+0x10]", 32, nil}, // bytes 0x14-0x17 never written
		{"@!P0 LDL.LU R6, [R1+0x20]", 16, nil},
		{"LDL R7, [R1]", 32, nil},
		{"LDL R8, [R1+0x20]", 8, nil},
		{"LDL R9, [R1+0x30]", 0, nil}, // not executed: not counted
		{"EXIT", 32, nil},
	}
	f := writeCSV(t, t.TempDir(), "comb.csv", ncuSource("epbench_ll_combine", rows))
	out, stderr, code := runStalls(t, f)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "  local memory: 152 loads and 64 stores (warp instructions); loaded but never written: "+
		"[R1+0x10] 32 (4 of 8 bytes), [R1+0x20] 24, [R1+0x0] 32\n")

	// A 16-bit store, then a 32-bit load of the same slot (the flags of
	// kernels v45's combine): two of its four bytes were never written.
	narrow := []srcRow{{"STL.S16 [R1+0x18], R34", 14, nil}, {"LDL.LU R83, [R1+0x18]", 14, nil}, {"EXIT", 14, nil}}
	f = writeCSV(t, t.TempDir(), "narrow.csv", ncuSource("epbench_ll_combine", narrow))
	out, _, _ = runStalls(t, f)
	assert.Contains(t, out, "loaded but never written: [R1+0x18] 14 (2 of 4 bytes)\n")

	written := []srcRow{{"STL [R1+0x4], R0", 32, nil}, {"LDL R1, [R1+0x4]", 32, nil}, {"EXIT", 32, nil}}
	f = writeCSV(t, t.TempDir(), "ok.csv", ncuSource("epbench_ll_combine", written))
	out, _, _ = runStalls(t, f)
	assert.Contains(t, out, "  local memory: 32 loads and 32 stores (warp instructions); every slot loaded was written\n")

	f = writeCSV(t, t.TempDir(), "none.csv", ncuSource("epbench_ll_dispatch", dispatchRows))
	out, _, _ = runStalls(t, f)
	assert.NotContains(t, out, "local memory", "a kernel without local memory gets no such line")
}
