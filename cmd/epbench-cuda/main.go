// Command epbench-cuda is epbench with the CUDA backend. bin/epbench hands
// the process over to it when a GPU is to be used; it is not meant to be
// started by hand on a machine without a GPU, since the CUDA driver package
// it links initialises the driver before main and exits where that fails.
package main

import (
	"os"
	"runtime"

	"github.com/epbench/epbench/app"
	"github.com/epbench/epbench/gpu"
)

// CUDA contexts and MPI are used from the main OS thread only.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(app.Main(os.Args[1:], app.Options{CUDA: gpu.Hooks{}}))
}
