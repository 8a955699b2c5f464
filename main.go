// Command epbench benchmarks Mixture-of-Experts expert-parallel low-latency
// dispatch and combine, the way NCCL-EP's ep_bench does, under MPI:
//
//	mpirun -np 8 epbench -t 128 -d 7168 -k 8 -e 256
//
// This executable runs on any machine: it holds the CPU reference backend,
// routing, compare and the reports. For the CUDA backend it hands the process
// over to bin/epbench-cuda (see app/handoff.go).
package main

import (
	"os"
	"runtime"

	"github.com/epbench/epbench/app"
)

// MPI is initialised with MPI_THREAD_FUNNELED: every MPI call must come from
// the main OS thread.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(app.Main(os.Args[1:], app.Options{}))
}
