package main

import (
	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/cupti"
	"github.com/epbench/epbench/report"
)

// kernelTimer opens the in-process CUPTI collector (after the CUDA context
// exists), or says why there is none.
func kernelTimer() (bench.KernelTimer, func(), string) {
	c, err := cupti.Open()
	if err != nil {
		return nil, func() {}, report.NoteCUPTIUnavailable(err.Error())
	}
	return c, func() { _ = c.Close() }, ""
}
