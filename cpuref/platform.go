package cpuref

import (
	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/report"
)

// Platform sets this rank of w up for cfg on the CPU reference backend
// (collective); it has no kernel timing.
func Platform(w *bench.World, cfg *config.Config) (*bench.Platform, error) {
	b, err := New(w.Comm, ll.ShapeOf(cfg, w.Rank, w.Size), cfg)
	if err != nil {
		return nil, err
	}
	return &bench.Platform{Backend: b, KernelNote: report.NoteCPUBackend}, nil
}
