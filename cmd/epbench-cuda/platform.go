package main

import (
	"fmt"
	"time"

	"gorgonia.org/cu"

	"github.com/epbench/epbench/app"
	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/cupti"
	"github.com/epbench/epbench/gpu"
	"github.com/epbench/epbench/report"
)

// Platform sets one rank up for the benchmark on its GPU.
func (cudaHooks) Platform(w *app.World, cfg *config.Config) (*app.Platform, error) {
	if cfg.KernelTiming && !cfg.CUPTIRegion {
		if err := cupti.CheckEnv(); err != nil {
			return nil, app.Usage(err)
		}
	}
	dev, err := gpu.Open(w.LocalRank)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			dev.Close()
		}
	}()
	freePre, total, err := cu.MemInfo()
	if err != nil {
		return nil, fmt.Errorf("cuMemGetInfo: %w", err)
	}
	t0 := time.Now()
	me := rankDevice{Rank: w.Rank, LocalRank: w.LocalRank, Host: w.Host, GPU: dev.Info}
	all, err := gatherJSON(w, me)
	if err != nil {
		return nil, fmt.Errorf("exchanging GPU records: %w", err)
	}
	for _, p := range all {
		if p.Host != w.Host {
			continue
		}
		reach, err := dev.CanAccessPeer(p.GPU.Ordinal)
		if err != nil {
			return nil, fmt.Errorf("P2P check with rank %d: %w", p.Rank, err)
		}
		if !reach {
			return nil, fmt.Errorf("rank %d's GPU (%s) cannot access rank %d's GPU (%s) by P2P", w.Rank, dev.Info.PCIBusID, p.Rank, p.GPU.PCIBusID)
		}
	}
	transport, err := gpu.NewIPC(w.Comm, w.Size, w.LocalSize)
	if err != nil {
		return nil, err
	}
	groupMs := float64(time.Since(t0).Microseconds()) / 1000
	b, err := gpu.NewBackend(dev, w.Comm, transport, bench.ShapeOf(cfg, w.Rank, w.Size), cfg, nvlinkAll(all))
	if err != nil {
		return nil, err
	}
	cl := &closer{Backend: b, dev: dev, release: func() {}}
	plat := &app.Platform{
		Backend:  cl,
		GroupMs:  groupMs,
		Topology: topology(all, b),
	}
	plat.Memory = func() *report.Memory {
		free, _, err := cu.MemInfo()
		if err != nil {
			return nil
		}
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		return &report.Memory{
			TotalMiB:           mib(total),
			UsedPreCreateMiB:   mib(total - freePre),
			UsedPostCombineMiB: mib(total - free),
			DeltaMiB:           mib(freePre - free),
		}
	}
	switch {
	case !cfg.KernelTiming:
		plat.KernelNote = report.NoteKernelDisabled
	case cfg.CUPTIRegion:
		plat.KernelNote = report.NoteCUPTIRegion
		plat.BeforeTimed = gpu.ProfilerStart
		plat.AfterTimed = gpu.ProfilerStop
	default:
		plat.Kernel, cl.release, plat.KernelNote = kernelTimer()
	}
	ok = true
	return plat, nil
}

// closer also releases the kernel timer and the device when the backend is
// closed.
type closer struct {
	*gpu.Backend
	dev     *gpu.Device
	release func()
}

func (c *closer) Close() error {
	c.release()
	err := c.Backend.Close()
	c.dev.Close()
	return err
}

// nvlinkAll reports whether NVML says every pair of the ranks' GPUs reach
// each other over NVLink (all ranks run on one host).
func nvlinkAll(all []rankDevice) bool {
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.Host != b.Host || (a.GPU.PCIBusID != b.GPU.PCIBusID && !gpu.NVLinkP2P(a.GPU.PCIBusID, b.GPU.PCIBusID)) {
				return false
			}
		}
	}
	return true
}

func topology(all []rankDevice, b *gpu.Backend) []string {
	lines := []string{"GPU topology:"}
	for _, d := range all {
		lines = append(lines, fmt.Sprintf("  rank %d: %s, %s, GPU %d %s (%s), %d SMs, %d NVLinks active, driver %s, CUDA %d.%d",
			d.Rank, d.Host, fmt.Sprintf("local rank %d", d.LocalRank), d.GPU.Ordinal, d.GPU.Name, d.GPU.PCIBusID,
			d.GPU.SMs, d.GPU.NVLinkActive, orUnknown(d.GPU.Driver), d.GPU.CUDADriver/1000, d.GPU.CUDADriver%1000/10))
	}
	d, c := b.Protocols()
	launch := "launches"
	if b.Graphs() {
		launch = "CUDA graphs"
	}
	lines = append(lines, fmt.Sprintf("  transport: CUDA IPC over NVLink P2P; kernels: %d blocks x 512 threads, %s; signalling: dispatch %s, combine %s", b.Grid(), launch, d, c))
	return lines
}
