package gpu

import (
	"encoding/binary"
	"errors"

	"github.com/epbench/epbench/kernels"
)

// Elastic EP's mask of active ranks (-T, bench.Masker): an int32 per rank
// in device memory, 1 active, 0 masked. While masking is on the kernels get
// its address: a wait that times out masks its peer instead of failing, and
// masked peers are skipped (docs/DESIGN.md).

var errNoMask = errors.New("gpu: no mask of active ranks (the set-up was not for -T)")

// SetMasking implements bench.Masker: on, every rank active and the
// operations that follow take the mask (launched, not replayed from a
// graph); off, they run as before.
func (b *Backend) SetMasking(on bool) error {
	if b.mem.active == 0 {
		return errNoMask
	}
	if !on {
		b.args.Active = 0
		return nil
	}
	if err := b.CleanMask(); err != nil {
		return err
	}
	b.args.Active = b.mem.active
	return nil
}

// Mask implements bench.Masker: the mask after the operations so far.
func (b *Backend) Mask() ([]bool, error) {
	if b.mem.active == 0 {
		return nil, errNoMask
	}
	if err := b.stream.Sync(); err != nil {
		return nil, err
	}
	raw := make([]byte, 4*b.shape.Ranks)
	if err := CopyFromDevice(raw, b.mem.active); err != nil {
		return nil, err
	}
	out := make([]bool, b.shape.Ranks)
	for r := range out {
		out[r] = binary.LittleEndian.Uint32(raw[4*r:]) != 0
	}
	return out, nil
}

// CleanMask implements bench.Masker: every rank active again.
func (b *Backend) CleanMask() error {
	if b.mem.active == 0 {
		return errNoMask
	}
	if err := MemsetD32Async(b.mem.active, 1, b.shape.Ranks, b.stream); err != nil {
		return err
	}
	return b.stream.Sync()
}

// CombineWaitsForAll implements bench.Masker: a fenced combine waits for
// every rank's release; inline and lines ones only for the ranks its tokens
// select.
func (b *Backend) CombineWaitsForAll() bool { return b.cur.Variant.Combine == kernels.ProtoFenced }
