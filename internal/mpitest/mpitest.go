// Package mpitest runs a package's tests in MPI jobs: TestMain calls Main,
// which re-launches the test binary under mpirun at each job size and, in
// the ranks, initializes MPI and serves MPI calls on the main thread.
//
// It takes Init and Finalize as functions so that package mpi's own tests
// can use it without an import cycle.
package mpitest

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
)

const (
	// sizeVar is set by Open MPI's mpirun in every rank it starts.
	sizeVar = "OMPI_COMM_WORLD_SIZE"
	rankVar = "OMPI_COMM_WORLD_RANK"
	// OptOutVar lets machines without Open MPI run the tests that need no
	// MPI job instead of failing.
	OptOutVar = "EPBENCH_NO_MPIRUN"
	// DefaultTimeout bounds one mpirun so a rank stuck in a collective
	// cannot hang the test run.
	DefaultTimeout = 2 * time.Minute
)

// Options describe how a package's tests run under MPI.
type Options struct {
	Name     string        // prefixes messages and temporary file names
	Sizes    []int         // world sizes to run every test at
	Timeout  time.Duration // per job; DefaultTimeout when zero
	Init     func() error  // called on the locked main goroutine
	Finalize func() error  // called there after the tests; may check shutdown
}

// calls carries work to the goroutine that initialized MPI; with
// MPI_THREAD_FUNNELED no other thread may call MPI.
var calls chan func()

// Main runs the tests and returns the exit code for os.Exit.
func Main(m *testing.M, opts Options) int {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if InJob() {
		return runRank(m, opts)
	}
	return runLauncher(m, opts)
}

// InJob reports whether this process is a rank that mpirun started.
func InJob() bool {
	_, ok := os.LookupEnv(sizeVar)
	return ok
}

// Require skips tests that need an MPI job in the launching process; they
// run in the ranks that Main starts under mpirun.
func Require(t testing.TB) {
	t.Helper()
	if !InJob() {
		t.Skip("needs an MPI job: TestMain runs this test in every rank under mpirun")
	}
}

// Do runs f on the goroutine that initialized MPI and waits for it. f
// should report problems with t.Errorf rather than t.Fatal, so every rank
// still makes the same sequence of collective calls.
func Do(f func()) {
	if calls == nil {
		panic("mpitest.Do outside an MPI job; call Require first")
	}
	done := make(chan struct{})
	calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

// RankSize returns this rank and the world size, as mpirun announced them.
func RankSize(t testing.TB) (int, int) {
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

// runLauncher runs the test binary under mpirun at every job size, then the
// tests that need no MPI job in this process.
func runLauncher(m *testing.M, opts Options) int {
	code := 0
	mpirun, err := exec.LookPath("mpirun")
	switch {
	case err == nil:
		for _, np := range opts.Sizes {
			if err := runJob(mpirun, np, opts); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: %s: %v\n", opts.Name, err)
				code = 1
			}
		}
	case os.Getenv(OptOutVar) != "":
		fmt.Fprintf(os.Stderr, "%s: mpirun not found and %s is set: the MPI tests do not run\n", opts.Name, OptOutVar)
	default:
		fmt.Fprintf(os.Stderr, "FAIL: %s: mpirun not found in PATH; install Open MPI, or set %s=1 to run only the tests that need no MPI job\n", opts.Name, OptOutVar)
		code = 1
	}
	if c := m.Run(); c != 0 {
		code = c
	}
	return code
}

func runJob(mpirun string, np int, opts Options) error {
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

	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// mpirun forwards SIGTERM to its ranks; SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	line := strings.Join(cmd.Args, " ")
	fmt.Printf("%s: running %s\n", opts.Name, line)
	err = cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: no result within %v: %v", line, opts.Timeout, err)
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
// serving their MPI calls on it, and finalizes. Only rank 0 prints as it
// goes; other ranks print their output only if they fail.
func runRank(m *testing.M, opts Options) int {
	runtime.LockOSThread()
	rank := os.Getenv(rankVar)
	var held *os.File
	if rank != "0" {
		f, err := os.CreateTemp("", opts.Name+"-rank-*.out")
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", rank, err)
			return 1
		}
		defer os.Remove(f.Name())
		defer f.Close()
		held, os.Stdout = f, f
	}
	if err := opts.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %s: Init: %v\n", rank, err)
		return 1
	}
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
	if err := opts.Finalize(); err != nil {
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
