package mpi_test

import (
	"context"
	"errors"
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

const (
	// sizeVar is set by Open MPI's mpirun in every rank it starts.
	sizeVar = "OMPI_COMM_WORLD_SIZE"
	rankVar = "OMPI_COMM_WORLD_RANK"
	// optOutVar lets machines without Open MPI run the tests that need no
	// MPI job instead of failing.
	optOutVar = "EPBENCH_NO_MPIRUN"
	// jobTimeout bounds one mpirun so a rank stuck in a collective cannot
	// hang the test run.
	jobTimeout = 2 * time.Minute
)

// jobSizes are the world sizes every MPI test runs at: the smallest job and
// one that needs oversubscription on small machines.
var jobSizes = []int{2, 4}

var (
	// underMPI is true in a rank started by mpirun.
	underMPI bool
	// calls carries work to the goroutine that initialized MPI; with
	// MPI_THREAD_FUNNELED no other thread may call MPI.
	calls chan func()
)

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(sizeVar); ok {
		os.Exit(runRank(m))
	}
	os.Exit(runLauncher(m))
}

// runLauncher runs the test binary under mpirun at every job size, then the
// tests that need no MPI job in this process.
func runLauncher(m *testing.M) int {
	code := 0
	mpirun, err := exec.LookPath("mpirun")
	switch {
	case err == nil:
		for _, np := range jobSizes {
			if err := runJob(mpirun, np); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
				code = 1
			}
		}
	case os.Getenv(optOutVar) != "":
		fmt.Fprintf(os.Stderr, "mpi: mpirun not found and %s is set: MPI tests do not run\n", optOutVar)
	default:
		fmt.Fprintf(os.Stderr, "FAIL: mpirun not found in PATH; install Open MPI, or set %s=1 to run only the tests that need no MPI job\n", optOutVar)
		code = 1
	}
	if c := m.Run(); c != 0 {
		code = c
	}
	return code
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
	args = append(args, rankFlags(os.Args[1:])...)

	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// mpirun forwards SIGTERM to its ranks; SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	line := strings.Join(cmd.Args, " ")
	fmt.Printf("mpi: running %s\n", line)
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: no result within %v: %v", line, jobTimeout, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", line, err)
	}
	return nil
}

// rankFlags passes the test flags on to the ranks, except those naming
// output files that several ranks would overwrite.
func rankFlags(args []string) []string {
	perProcess := []string{"testlogfile", "coverprofile", "cpuprofile", "memprofile",
		"blockprofile", "mutexprofile", "trace"}
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		drop := false
		for _, p := range perProcess {
			if name == "test."+p {
				drop = true
			}
		}
		if !drop {
			out = append(out, args[i])
		} else if !hasValue {
			i++
		}
	}
	return out
}

// runRank initializes MPI on the main goroutine, runs the tests while
// serving their MPI calls on it, and checks shutdown. Only rank 0 prints as
// it goes; other ranks print their output only if they fail.
func runRank(m *testing.M) int {
	runtime.LockOSThread()
	rank := os.Getenv(rankVar)
	var held *os.File
	if rank != "0" {
		f, err := os.CreateTemp("", "mpi-test-rank-*.out")
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", rank, err)
			return 1
		}
		defer os.Remove(f.Name())
		defer f.Close()
		held, os.Stdout = f, f
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: Init: %v\n", rank, err)
		return 1
	}
	underMPI = true
	calls = make(chan func())
	result := make(chan int)
	go func() { result <- m.Run() }()
	code := -1
	for code < 0 {
		select {
		case f := <-calls:
			f()
		case code = <-result:
		}
	}
	if err := checkShutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: FAIL: %v\n", rank, err)
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

// checkShutdown finalizes MPI and checks what the package promises after
// Finalize. Finalize also fails if a test left a request in flight.
func checkShutdown() error {
	if err := mpi.Finalize(); err != nil {
		return fmt.Errorf("Finalize: %w", err)
	}
	if !mpi.Finalized() {
		return errors.New("Finalized() is false after Finalize")
	}
	if err := mpi.Barrier(); !errors.Is(err, mpi.ErrFinalized) {
		return fmt.Errorf("Barrier after Finalize returned %v, want ErrFinalized", err)
	}
	if err := mpi.Init(); !errors.Is(err, mpi.ErrFinalized) {
		return fmt.Errorf("Init after Finalize returned %v, want ErrFinalized", err)
	}
	if r := mpi.World().Rank(); r != -1 {
		return fmt.Errorf("World().Rank() after Finalize = %d, want -1", r)
	}
	return nil
}

// requireMPI skips tests that need an MPI job in the launching process; they
// run in the ranks that TestMain starts under mpirun.
func requireMPI(t *testing.T) {
	t.Helper()
	if !underMPI {
		t.Skip("needs an MPI job: TestMain runs this test in every rank under mpirun")
	}
}

// onMain runs f on the goroutine that initialized MPI and waits for it. f
// reports problems with t.Errorf rather than t.Fatal, so every rank still
// makes the same sequence of collective calls.
func onMain(f func()) {
	done := make(chan struct{})
	calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

// rankSize returns this rank and the world size, as mpirun announced them.
func rankSize(t *testing.T) (int, int) {
	t.Helper()
	rank, err := strconv.Atoi(os.Getenv(rankVar))
	if err != nil {
		t.Fatalf("%s: %v", rankVar, err)
	}
	size, err := strconv.Atoi(os.Getenv(sizeVar))
	if err != nil {
		t.Fatalf("%s: %v", sizeVar, err)
	}
	return rank, size
}

// mpiError returns the *mpi.Error in err, failing the test if there is none.
func mpiError(t *testing.T, err error) *mpi.Error {
	t.Helper()
	var e *mpi.Error
	if !errors.As(err, &e) {
		t.Errorf("error %v is not an *mpi.Error", err)
		return nil
	}
	if e.Msg == "" {
		t.Errorf("error %v has an empty message", err)
	}
	return e
}
