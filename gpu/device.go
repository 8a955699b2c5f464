package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"gorgonia.org/cu"
)

// ErrNoDevice means the driver sees no GPU.
var ErrNoDevice = errors.New("no CUDA device")

// Info describes one rank's GPU.
type Info struct {
	Ordinal      int    `json:"ordinal"`
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	PCIBusID     string `json:"pci_bus_id"`
	TotalMiB     int64  `json:"total_mib"`
	SMs          int    `json:"sms"`
	CCMajor      int    `json:"cc_major"`
	CCMinor      int    `json:"cc_minor"`
	Driver       string `json:"driver"`        // NVML's driver version, "" when NVML is absent
	CUDADriver   int    `json:"cuda_driver"`   // cuDriverGetVersion, e.g. 13000
	NVLinkActive int    `json:"nvlink_active"` // active NVLinks of this GPU (NVML)
}

// Device is this rank's GPU with its primary context current on the calling
// OS thread.
type Device struct {
	Dev  cu.Device
	Ctx  cu.CUContext
	Info Info
}

// Open makes the GPU picked for node-local rank localRank current: ordinal
// localRank modulo the number of visible GPUs (more ranks than GPUs share).
func Open(localRank int) (*Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("counting CUDA devices: %w", err)
	}
	if n == 0 {
		return nil, ErrNoDevice
	}
	ord := localRank % n
	dev, err := cu.GetDevice(ord)
	if err != nil {
		return nil, fmt.Errorf("CUDA device %d: %w", ord, err)
	}
	// The host waits for each operation between the timed marks' pairs; spinning
	// (what CU_CTX_SCHED_AUTO picks when cores are not oversubscribed) keeps the
	// wake-up latency out of the host-observed total. It fails harmlessly when
	// the primary context is already active with other flags.
	_ = dev.SetPrimaryCtxFlags(cu.SchedSpin)
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("CUDA device %d: retaining its primary context: %w", ord, err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("CUDA device %d: making its context current: %w", ord, err)
	}
	d := &Device{Dev: dev, Ctx: ctx}
	if err := d.describe(ord); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the primary context.
func (d *Device) Close() {
	if d == nil {
		return
	}
	_ = d.Dev.ReleasePrimaryCtx()
}

func (d *Device) describe(ord int) error {
	in := &d.Info
	in.Ordinal = ord
	var err error
	if in.Name, err = d.Dev.Name(); err != nil {
		return fmt.Errorf("CUDA device %d name: %w", ord, err)
	}
	total, err := d.Dev.TotalMem()
	if err != nil {
		return fmt.Errorf("CUDA device %d memory: %w", ord, err)
	}
	in.TotalMiB = total >> 20
	attrs := []struct {
		a   cu.DeviceAttribute
		dst *int
	}{
		{cu.MultiprocessorCount, &in.SMs},
		{cu.ComputeCapabilityMajor, &in.CCMajor},
		{cu.ComputeCapabilityMinor, &in.CCMinor},
	}
	for _, at := range attrs {
		if *at.dst, err = d.Dev.Attribute(at.a); err != nil {
			return fmt.Errorf("CUDA device %d attribute: %w", ord, err)
		}
	}
	var dom, bus, slot int
	for _, at := range []struct {
		a   cu.DeviceAttribute
		dst *int
	}{{cu.PciDomainID, &dom}, {cu.PciBusID, &bus}, {cu.PciDeviceID, &slot}} {
		if *at.dst, err = d.Dev.Attribute(at.a); err != nil {
			return fmt.Errorf("CUDA device %d PCI attribute: %w", ord, err)
		}
	}
	in.PCIBusID = fmt.Sprintf("%08X:%02X:%02X.0", dom, bus, slot)
	if id, err := d.Dev.UUID(); err == nil {
		in.UUID = id.String()
	}
	in.CUDADriver = cu.Version()
	in.Driver, in.NVLinkActive = nvmlDescribe(in.PCIBusID)
	return nil
}

// nvmlDescribe reads the driver version and the count of active NVLinks of
// the GPU at busID; it returns zero values where NVML is not usable.
func nvmlDescribe(busID string) (driver string, links int) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return "", 0
	}
	defer nvml.Shutdown()
	driver, _ = nvml.SystemGetDriverVersion()
	h, ret := nvml.DeviceGetHandleByPciBusId(busID)
	if ret != nvml.SUCCESS {
		return driver, 0
	}
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := h.GetNvLinkState(l)
		if ret == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
			links++
		}
	}
	return driver, links
}

// NVLinkP2P reports whether NVML says the GPUs at busA and busB reach each
// other over NVLink (directly or through NVSwitch); false where NVML is not
// usable.
func NVLinkP2P(busA, busB string) bool {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return false
	}
	defer nvml.Shutdown()
	a, ret := nvml.DeviceGetHandleByPciBusId(busA)
	if ret != nvml.SUCCESS {
		return false
	}
	b, ret := nvml.DeviceGetHandleByPciBusId(busB)
	if ret != nvml.SUCCESS {
		return false
	}
	st, ret := a.GetP2PStatus(b, nvml.P2P_CAPS_INDEX_NVLINK)
	return ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK
}

// CanAccessPeer reports whether this GPU can map the memory of the GPU with
// the given ordinal (true for itself).
func (d *Device) CanAccessPeer(ordinal int) (bool, error) {
	if ordinal == d.Info.Ordinal {
		return true, nil
	}
	peer, err := cu.GetDevice(ordinal)
	if err != nil {
		return false, err
	}
	ok, err := d.Dev.CanAccessPeer(peer)
	return ok != 0, err
}
