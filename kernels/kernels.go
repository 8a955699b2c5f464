// Package kernels holds the CUDA C++ sources of the LL dispatch and combine
// kernels, their PTX (built by `make ptx` with CUDA 13 and embedded here), the
// entry names shared by the launcher and the CUPTI name matching, and the Go
// mirror of the kernels' argument block.
package kernels

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// Entry points. CUPTI attributes kernel time by these names: a record whose
// name contains "dispatch" counts as dispatch, "combine" as combine.
const (
	DispatchKernel = "epbench_ll_dispatch"
	CombineKernel  = "epbench_ll_combine"
)

// Entries are the entry points the launcher uses, each taking one by-value
// Args block.
var Entries = []string{DispatchKernel, CombineKernel}

// Module is the PTX file that holds the entries.
const Module = "ll.ptx"

// ThreadsPerBlock is the block size the kernels are written for
// (kThreads in ll.cu).
const ThreadsPerBlock = 512

//go:embed ll.ptx
var embedded []byte

// PTX returns the module's PTX: the embedded one, or, when dir is not empty,
// the development override dir/ll.ptx.
func PTX(dir string) ([]byte, error) {
	if dir == "" {
		return embedded, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, Module))
	if err != nil {
		return nil, fmt.Errorf("--ptx-dir: %w", err)
	}
	return b, nil
}
