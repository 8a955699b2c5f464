package gpu

import (
	"fmt"
	"time"

	"gorgonia.org/cu"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/cupti"
	"github.com/epbench/epbench/internal/ranklist"
	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/nccl"
	"github.com/epbench/epbench/report"
)

// Hooks is what the CUDA executable adds to the epbench command (the
// app.CUDA interface): the GPU listing and the GPU platform.
type Hooks struct{}

// Platform sets one rank up for the benchmark on its GPU (collective): the
// device, the peers' reachability, the transport, the backend, the kernel
// timer.
func (Hooks) Platform(w *bench.World, cfg *config.Config) (*bench.Platform, error) {
	if cfg.KernelTiming && !cfg.CUPTIRegion {
		if err := cupti.CheckEnv(); err != nil {
			return nil, &config.UsageError{Flag: cupti.KindEnv, Why: err.Error()}
		}
	}
	dev, err := Open(w.LocalRank)
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
	all, err := bench.GatherJSON(w.Comm, me, slot)
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
	sh := sharingOf(all, w.Rank)
	transport, err := openTransport(w, cfg, sh.Ranks > 1)
	if err != nil {
		return nil, err
	}
	groupMs := float64(time.Since(t0).Microseconds()) / 1000
	b, err := NewBackend(dev, w.Comm, transport, ll.ShapeOf(cfg, w.Rank, w.Size), cfg, sh)
	if err != nil {
		return nil, err // NewBackend closed the transport
	}
	cl := &closer{Backend: b, dev: dev, release: func() {}}
	plat := &bench.Platform{
		Backend:  cl,
		GroupMs:  groupMs,
		NVLink:   nvlinkAll(all),
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
	if cfg.Profile {
		plat.Profiler = &bench.Profiler{Start: ProfilerStart, Stop: ProfilerStop, Push: RangePush, Pop: RangePop}
	}
	switch {
	case !cfg.KernelTiming:
		plat.KernelNote = report.NoteKernelDisabled
	case cfg.CUPTIRegion:
		plat.KernelNote = report.NoteCUPTIRegion
		plat.BeforeTimed = ProfilerStart
		plat.AfterTimed = ProfilerStop
	default:
		plat.Kernel, cl.release, plat.KernelNote = kernelTimer()
	}
	ok = true
	return plat, nil
}

// openTransport opens the transport --transport asks for (collective).
func openTransport(w *bench.World, cfg *config.Config, sharedGPU bool) (Transport, error) {
	switch cfg.TransportFor(w.Size == w.LocalSize) {
	case config.TransportNCCL:
		// NCCL's set-up steps include host work whose length differs
		// between ranks, bounded like the runner's barriers after host work.
		return nccl.NewTransport(w.Comm, sharedGPU, max(cfg.Timeout(), bench.HostWorkTimeout))
	default:
		return NewIPC(w.Comm, w.Size, w.LocalSize)
	}
}

// closer also releases the kernel timer and the device when the backend is
// closed.
type closer struct {
	*Backend
	dev     *Device
	release func()
}

func (c *closer) Close() error {
	c.release()
	err := c.Backend.Close()
	c.dev.Close()
	return err
}

// nvlinkAll reports whether NVML says every pair of the ranks' distinct
// GPUs reach each other over NVLink, all on one host (ranks that share a
// GPU need no link between them).
func nvlinkAll(all []rankDevice) bool {
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.Host != b.Host || (!a.sameGPU(b) && !NVLinkP2P(a.GPU.PCIBusID, b.GPU.PCIBusID)) {
				return false
			}
		}
	}
	return true
}

// sameGPU reports whether two ranks run on one GPU.
func (d rankDevice) sameGPU(o rankDevice) bool {
	if d.GPU.UUID != "" && o.GPU.UUID != "" {
		return d.GPU.UUID == o.GPU.UUID
	}
	return d.Host == o.Host && d.GPU.PCIBusID == o.GPU.PCIBusID
}

// sharers are the ranks that run on rank me's GPU, me included.
func sharers(all []rankDevice, me int) []int {
	var out []int
	for _, d := range all {
		if d.sameGPU(all[me]) {
			out = append(out, d.Rank)
		}
	}
	return out
}

// sharingOf is how rank me shares its GPU, and whether the lines protocol
// is verified between every pair of ranks: they share one GPU, or NVLink
// links GPUs of the compute capability epbench has measured lines on.
func sharingOf(all []rankDevice, me int) Sharing {
	cc := func(d rankDevice) string { return fmt.Sprintf("%d.%d", d.GPU.CCMajor, d.GPU.CCMinor) }
	verified := true
	for i, a := range all {
		for _, b := range all[i+1:] {
			if !a.sameGPU(b) && (cc(a) != kernels.LinesVerifiedCC || cc(b) != kernels.LinesVerifiedCC) {
				verified = false
			}
		}
	}
	return Sharing{Ranks: len(sharers(all, me)), LinesVerified: verified && nvlinkAll(all)}
}

func topology(all []rankDevice, b *Backend) []string {
	lines := []string{"GPU topology:"}
	for _, d := range all {
		shared := ""
		if s := sharers(all, d.Rank); len(s) > 1 {
			shared = ", shared by " + ranklist.String(s)
		}
		lines = append(lines, fmt.Sprintf("  rank %d: %s, %s, GPU %d %s (%s), %d SMs, %d NVLinks active, driver %s, CUDA %d.%d%s",
			d.Rank, d.Host, fmt.Sprintf("local rank %d", d.LocalRank), d.GPU.Ordinal, d.GPU.Name, d.GPU.PCIBusID,
			d.GPU.SMs, d.GPU.NVLinkActive, orUnknown(d.GPU.Driver), d.GPU.CUDADriver/1000, d.GPU.CUDADriver%1000/10, shared))
	}
	d, c := b.Protocols()
	l := b.Launch()
	launch := "launches"
	if b.Graphs() {
		launch = "CUDA graphs"
	}
	grid := fmt.Sprintf("%d blocks x %d threads", l.Grid, l.Threads)
	if n := b.sharing.Ranks; n > 1 {
		grid += fmt.Sprintf(" (the GPU's %d SMs shared by %d ranks)", b.dev.Info.SMs, n)
	}
	if m := b.cfg.MaxNumSMs; m > 0 && b.cfg.NumBlocks == 0 {
		grid += fmt.Sprintf(" (-S/--max-num-sms %d)", m)
	}
	lines = append(lines, fmt.Sprintf("  transport: %s; kernels: %s, %s; signalling: dispatch %s, combine %s", b.mem.transport.Name(), grid, launch, d, c))
	return lines
}

// kernelTimer opens the in-process CUPTI collector (after the CUDA context
// exists), or says why there is none.
func kernelTimer() (bench.KernelTimer, func(), string) {
	c, err := cupti.Open()
	if err != nil {
		return nil, func() {}, report.NoteCUPTIUnavailable(err.Error())
	}
	return c, func() { _ = c.Close() }, ""
}
