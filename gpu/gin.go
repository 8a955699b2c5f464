package gpu

import (
	"errors"
	"fmt"

	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/nccl"
)

// GINTransport is a transport that reaches peers through NCCL GIN as well
// as by load/store (nccl.Transport): the GIN build of the kernels
// (kernels.Variant.GIN) puts through its device communicator.
type GINTransport interface {
	Transport
	AllocWith(size int64, o nccl.AllocOptions) (local uint64, peers []uint64, err error)
	GINPeers() []int
	Window() nccl.Window
	EnableGIN(contexts int) (*nccl.DevComm, error)
	OutsideLSA() (bool, error)
}

var _ GINTransport = (*nccl.Transport)(nil)

// The device communicator NCCL writes is what the GIN modules read.
var _ = [1]int{}[kernels.DevCommBytes-nccl.DevCommBytes] // a compile error unless equal

// allocGIN allocates the symmetric buffer with a mirror per rank through
// the transport, makes the device communicator and returns this rank's
// base and the kernels' peer table; m.gin is the GIN modules' GinArgs. The
// GIN peers: every other rank with -n, else those NCCL gives no address.
func (m *memory) allocGIN(p *kernels.Plan, rank int) (uint64, []uint64, error) {
	t, ok := m.transport.(GINTransport)
	if !ok {
		return 0, nil, errors.New("peers reached through GIN need the NCCL transport (--transport nccl)")
	}
	// The modules' NCCL headers and the device communicator the host asks
	// for are one version (kernels/ncclversion_test.go).
	local, peers, err := t.AllocWith(p.SymBytes(), nccl.AllocOptions{AllowGIN: true})
	if err != nil {
		return 0, nil, err
	}
	gin := kernels.GINPeers(rank, len(peers), p.Cfg.DisableNVLink, t.GINPeers())
	dev, err := t.EnableGIN(1)
	if err != nil {
		return 0, nil, err
	}
	if m.gin, err = kernels.GinArgs(t.Window().Handle(), p.Sym.Total, gin, dev.Bytes()); err != nil {
		return 0, nil, err
	}
	return local, kernels.MirrorPeers(local, p.Sym.Total, peers, gin), nil
}

// fillGIN writes GinArgs into a GIN module's variable.
func (m *memory) fillGIN(mod Module, s Stream) error {
	p, n, err := mod.Global(kernels.GinGlobal)
	if err != nil {
		return err
	}
	if n != len(m.gin) {
		return fmt.Errorf("the GIN module's %s is %d bytes, the host's GinArgs %d: kernels and host disagree", kernels.GinGlobal, n, len(m.gin))
	}
	return CopyToDevice(p, m.gin, s) // synchronous
}
