package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/ll"
	"github.com/epbench/epbench/routing"
)

// poisonWord is two bf16 NaNs (0x7FC1): what validation finds where an
// operation did not write.
const poisonWord = 0x7FC17FC1

// poisonShared fills the symmetric receive areas before validated pairs:
// bf16 and float32 NaNs, and as an int32 negative, so that no flag, epoch
// or count can equal it.
const poisonShared = 0xFFC1FFC1

// memory is a rank's device memory, allocated from its launch plan: the
// symmetric buffer through the transport, every local buffer, and the
// kernels' error word in mapped host memory.
type memory struct {
	transport Transport
	allocs    []cu.DevicePtr
	sizes     map[uint64]int64
	errw      *MappedWord // the kernels' error word, read by the host without a copy

	sym                                                            uint64
	peers, x, xgen, recvX, recvCount, srcInfo, layoutRange, rowPos uint64
	out, recvScales                                                uint64
	recvTopkIdx, recvTopkW                                         uint64   // rank-major, else 0
	tokensOf                                                       uint64   // int32 [R] (-l, -N), else 0
	active                                                         uint64   // int32 [R], the mask of active ranks (-T), else 0
	idx, w                                                         []uint64 // per routing
	clock                                                          uint64   // --cuda-graph: the kernels' device clock, else 0
	traceD, traceC                                                 uint64   // EPBENCH_TRACE: phase stamps, else 0
	gin                                                            []byte   // the GIN modules' GinArgs (gin.go), else nil
}

// allocate makes every buffer of plan p, zeroes the symmetric one and
// writes the peers' bases (with GIN, gin.go; rank is this rank). On error,
// free releases what was made.
func (m *memory) allocate(p *kernels.Plan, s Stream, rank int) error {
	m.sizes = map[uint64]int64{}
	var err error
	if m.errw, err = NewMappedWord(); err != nil {
		return err
	}
	var local uint64
	var peers []uint64
	if p.GIN {
		local, peers, err = m.allocGIN(p, rank)
	} else {
		local, peers, err = m.transport.Alloc(p.Sym.Total)
	}
	if err != nil {
		return err
	}
	m.sym = local
	if err := MemsetD32Async(local, 0, int(p.SymBytes()/4), s); err != nil {
		return err
	}
	l := p.Local
	for _, b := range []struct {
		dst  *uint64
		size int64
	}{
		{&m.peers, l.Peers}, {&m.x, l.X}, {&m.xgen, l.XGen}, {&m.recvX, l.RecvX}, {&m.recvCount, l.RecvCount}, {&m.srcInfo, l.SrcInfo},
		{&m.layoutRange, l.LayoutRange}, {&m.rowPos, l.RowPos}, {&m.out, l.Out}, {&m.recvScales, l.RecvScales},
		{&m.recvTopkIdx, l.RecvTopkIdx}, {&m.recvTopkW, l.RecvTopkW}, {&m.tokensOf, l.TokensOf}, {&m.active, l.Active},
		{&m.clock, l.Clock}, {&m.traceD, l.Trace}, {&m.traceC, l.Trace},
	} {
		if b.size == 0 {
			continue
		}
		if *b.dst, err = m.alloc(b.size); err != nil {
			return err
		}
	}
	for range l.Routings {
		i, err := m.alloc(l.TopkIdx)
		if err != nil {
			return err
		}
		w, err := m.alloc(l.TopkW)
		if err != nil {
			return err
		}
		m.idx, m.w = append(m.idx, i), append(m.w, w)
	}
	if m.clock != 0 {
		if err := MemsetD32Async(m.clock, 0, int(l.Clock/4), s); err != nil {
			return err
		}
	}
	pb := make([]byte, 8*len(peers))
	for r, p := range peers {
		binary.LittleEndian.PutUint64(pb[8*r:], p)
	}
	return CopyToDevice(m.peers, pb, s)
}

func (m *memory) alloc(n int64) (uint64, error) {
	p, err := cu.MemAlloc(max(n, 4))
	if err != nil {
		return 0, fmt.Errorf("cuMemAlloc(%d): %w", n, err)
	}
	m.allocs = append(m.allocs, p)
	m.sizes[uint64(p)] = max(n, 4)
	return uint64(p), nil
}

// free releases everything allocate made.
func (m *memory) free() error {
	var errs []error
	for _, p := range m.allocs {
		errs = append(errs, cu.MemFree(p))
	}
	m.allocs = nil
	if m.errw != nil {
		errs = append(errs, m.errw.Free())
		m.errw = nil
	}
	if m.transport != nil {
		errs = append(errs, m.transport.Close())
		m.transport = nil
	}
	return errors.Join(errs...)
}

// upload writes the inputs of shape s: token rows and weights as ep_bench
// makes them, one routing per j drawn for the tokens this rank dispatches,
// and the tokens every rank dispatches where they differ (-l, -N).
func (b *Backend) upload(s ll.Shape) error {
	m := &b.mem
	t := s.Tokens
	if m.tokensOf != 0 {
		counts := make([]int32, s.Ranks)
		for r := range counts {
			counts[r] = int32(s.TokensOf(r))
		}
		if err := CopyToDevice(m.tokensOf, i32bytes(counts), b.stream); err != nil {
			return err
		}
	}
	rows, err := routing.TokenRows(s.Rank, t, s.Hidden)
	if err != nil {
		return err
	}
	if err := CopyToDevice(m.x, u16bytes(rows), b.stream); err != nil {
		return err
	}
	weights, err := routing.Weights(s.Rank, t, s.TopK)
	if err != nil {
		return err
	}
	for j := range m.idx {
		idx, err := s.Routing(b.cfg.Seed, s.Rank, j)
		if err != nil {
			return err
		}
		if len(idx) == 0 { // a rank without tokens
			continue
		}
		if err := CopyToDevice(m.idx[j], i64bytes(idx), b.stream); err != nil {
			return err
		}
		if err := CopyToDevice(m.w[j], f32bytes(weights), b.stream); err != nil {
			return err
		}
	}
	return nil
}

func u16bytes(s []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// bytesU16 is b as uint16s (len(b) even; host buffers are aligned).
func bytesU16(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}
func i32bytes(s []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
func i64bytes(s []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}
func f32bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
