package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epbench/epbench/mpi"
)

// The test binary runs itself under mpirun at every job size; inside a job
// (Open MPI sets OMPI_COMM_WORLD_SIZE) it initializes MPI and runs every test
// on every rank, serving MPI calls on the main thread.
const (
	worldSizeEnv = "OMPI_COMM_WORLD_SIZE"
	worldRankEnv = "OMPI_COMM_WORLD_RANK"
	noMPIRunEnv  = "EPBENCH_NO_MPIRUN"
	jobLimit     = 2 * time.Minute
)

var jobRanks = []int{2, 4}

var (
	inJob   bool
	mpiWork chan func()
)

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(worldSizeEnv); ok {
		os.Exit(rankMain(m))
	}
	code := 0
	mpirun, err := exec.LookPath("mpirun")
	switch {
	case err == nil:
		for _, np := range jobRanks {
			if err := runJob(mpirun, np); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
				code = 1
			}
		}
	case os.Getenv(noMPIRunEnv) != "":
		fmt.Fprintf(os.Stderr, "bench: mpirun not found and %s is set: the MPI tests do not run\n", noMPIRunEnv)
	default:
		fmt.Fprintf(os.Stderr, "FAIL: bench: mpirun not found in PATH; install Open MPI, or set %s=1\n", noMPIRunEnv)
		code = 1
	}
	if c := m.Run(); c != 0 {
		code = c
	}
	os.Exit(code)
}

func runJob(mpirun string, np int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-np", strconv.Itoa(np), "--oversubscribe"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, self)
	for _, a := range os.Args[1:] {
		// Output files would be written by every rank at once.
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasSuffix(name, "profile") || name == "test.trace" || name == "test.testlogfile" {
			continue
		}
		args = append(args, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	fmt.Printf("bench: mpirun -np %d\n", np)
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("mpirun -np %d: no result within %v: %v", np, jobLimit, err)
	}
	if err != nil {
		return fmt.Errorf("mpirun -np %d: %w", np, err)
	}
	return nil
}

// rankMain serves MPI calls on the locked main goroutine while the tests
// run; ranks other than 0 show their output only when they fail. Finalize
// fails when a test left a request in flight.
func rankMain(m *testing.M) int {
	runtime.LockOSThread()
	rank := os.Getenv(worldRankEnv)
	var held *os.File
	if rank != "0" {
		f, err := os.CreateTemp("", "bench-rank-*.out")
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", rank, err)
			return 1
		}
		defer os.Remove(f.Name())
		defer f.Close()
		held, os.Stdout = f, f
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: mpi.Init: %v\n", rank, err)
		return 1
	}
	inJob = true
	mpiWork = make(chan func())
	done := make(chan int)
	go func() { done <- m.Run() }()
	code := -1
	for code < 0 {
		select {
		case f := <-mpiWork:
			f()
		case code = <-done:
		}
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: mpi.Finalize: %v\n", rank, err)
		code = 1
	}
	if held != nil && code != 0 {
		fmt.Fprintf(os.Stderr, "---- output of failing rank %s ----\n", rank)
		if _, err := held.Seek(0, io.SeekStart); err == nil {
			_, _ = io.Copy(os.Stderr, held)
		}
	}
	return code
}

// needMPI skips a test outside the MPI job; it runs in every rank.
func needMPI(t *testing.T) {
	t.Helper()
	if !inJob {
		t.Skip("needs an MPI job: TestMain runs this test in every rank under mpirun")
	}
}

// onMPI runs f on the goroutine that initialized MPI and waits for it; f
// reports with t.Errorf, not t.Fatal, so every rank keeps in step.
func onMPI(f func()) {
	done := make(chan struct{})
	mpiWork <- func() {
		defer close(done)
		f()
	}
	<-done
}
