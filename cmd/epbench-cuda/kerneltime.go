package main

import "github.com/epbench/epbench/bench"

// kernelTimer opens the in-process CUPTI collector, or says why there is none.
func kernelTimer() (bench.KernelTimer, string) {
	return nil, "CUPTI not available (collector not built yet); kernel timing disabled."
}
