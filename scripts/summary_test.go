package scripts

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// timerNotes runs summary.sh's timer_notes on log (and limit, its MAX, when
// given).
func timerNotes(t *testing.T, log string, limit ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "gpu-check.log")
	require.NoError(t, os.WriteFile(f, []byte(log), 0o644))
	out, stderr, code := runScript(t, nil, "-c", append([]string{`source "$1"; shift; timer_notes "$@"`, "bash", "summary.sh", f}, limit...)...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	return out
}

func TestTimerNotesNamesTheRunOfEachNote(t *testing.T) {
	log := "epbench: kernel timer: rank 0 dispatch: early\n" +
		"### defaults rank_local_reduce: mpirun -np 1 bin/epbench -w 3 -i 50\n" +
		"Dispatch: avg=6.3 us\n" +
		"epbench: kernel timer: rank 0 combine: the first timed pair took 40.00 us\n" +
		"### sweep cuda-graph: mpirun -np 1 bin/epbench sweep --cuda-graph: x\n" +
		"epbench: kernel timer: rank 1 dispatch: CUPTI kernel average 9.00 us exceeds\n" +
		"epbench: kernel timer: rank 0 dispatch: CUPTI kernel average 8.00 us exceeds\n"
	out := timerNotes(t, log)
	assert.Contains(t, out, "kernel timer notes: 4 (grep 'kernel timer:' ")
	assert.Contains(t, out, "\n  (before any run): rank 0 dispatch: early\n"+
		"  defaults rank_local_reduce: rank 0 combine: the first timed pair took 40.00 us\n"+
		"  sweep cuda-graph: rank 1 dispatch: CUPTI kernel average 9.00 us exceeds\n"+
		"  sweep cuda-graph: rank 0 dispatch: CUPTI kernel average 8.00 us exceeds\n")

	// At most MAX notes are printed; the count is of all of them.
	out = timerNotes(t, log, "2")
	assert.Contains(t, out, "kernel timer notes: 4 ")
	assert.Contains(t, out, "  defaults rank_local_reduce: rank 0 combine")
	assert.NotContains(t, out, "sweep cuda-graph")
}

func TestTimerNotesWithoutNotes(t *testing.T) {
	out := timerNotes(t, "### defaults: mpirun -np 1 bin/epbench\nDispatch: avg=6.3 us\n")
	assert.Regexp(t, `^kernel timer notes: 0 \(grep 'kernel timer:' .*gpu-check\.log\)\n$`, out)
}

func TestTimerNotesListsFiveByDefault(t *testing.T) {
	log := "### sweep: mpirun -np 1 bin/epbench sweep\n"
	for i := 1; i <= 6; i++ {
		log += fmt.Sprintf("epbench: kernel timer: note %d\n", i)
	}
	out := timerNotes(t, log)
	assert.Contains(t, out, "kernel timer notes: 6 ")
	assert.Contains(t, out, "  sweep: note 5\n")
	assert.NotContains(t, out, "note 6")
}

// pairFloors runs summary.sh's pair_floors on a profiler report.
func pairFloors(t *testing.T, csv string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "floor.csv")
	require.NoError(t, os.WriteFile(f, []byte(csv), 0o644))
	out, stderr, code := runScript(t, nil, "-c", `source "$1"; shift; pair_floors "$@"`, "bash", "summary.sh", f)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	return out
}

func TestPairFloorsMediansPerKernelAndGrid(t *testing.T) {
	// The profiler's own lines before the report, its unit row in
	// microseconds, a template kernel whose name holds spaces, and one kernel
	// at two grids.
	csv := "==PROF== Connected to process 7\n" +
		`"ID","Process ID","Kernel Name","Grid Size","gpu__time_duration.sum"` + "\n" +
		`"","","","","usecond"` + "\n" +
		`"0","7","void floor_dispatch<false, 0>(const long *, int)","(132, 1, 1)","6.59"` + "\n" +
		`"1","7","floor_combine(const uint4 *, int)","(132, 1, 1)","5.22"` + "\n" +
		`"2","7","void floor_dispatch<false, 0>(const long *, int)","(132, 1, 1)","6.70"` + "\n" +
		`"3","7","void floor_dispatch<false, 0>(const long *, int)","(132, 1, 1)","6.50"` + "\n" +
		`"4","7","pair_read(const uint4 *)","(264, 1, 1)","3,970.5"` + "\n" +
		`"5","7","pair_read(const uint4 *)","(132, 1, 1)","4.00"` + "\n"
	assert.Equal(t,
		"pair floor: floor_combine     132 blocks: 5.22 us (median of 1)\n"+
			"pair floor: floor_dispatch<false,0>  132 blocks: 6.59 us (median of 3)\n"+
			"pair floor: pair_read         132 blocks: 4.00 us (median of 1)\n"+
			"pair floor: pair_read         264 blocks: 3970.50 us (median of 1)\n",
		pairFloors(t, csv))
}

func TestPairFloorsNanosecondsAndLowerMedian(t *testing.T) {
	csv := `"ID","Kernel Name","Grid Size","gpu__time_duration.sum"` + "\n" +
		`"","","","nsecond"` + "\n" +
		`"0","empty()","(132, 1, 1)","1,344"` + "\n" +
		`"1","empty()","(132, 1, 1)","1,312"` + "\n"
	assert.Equal(t, "pair floor: empty             132 blocks: 1.31 us (median of 2)\n", pairFloors(t, csv))
}
