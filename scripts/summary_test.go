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
