package cpuref

import (
	"errors"
	"fmt"
	"time"
)

// Elastic EP's mask of active ranks (-T, bench.Masker). While masking is on
// every exchange is among the active ranks only, and a rank that does not
// answer within the timeout is masked instead of failing the operation,
// which goes on without its data: its tokens are not received, its
// partials not added. A combine first exchanges a four-byte handshake with
// every active rank, so a rank that does not take part is masked before any
// row (which may be too large to leave without a receiver) is sent to it.

// ActiveExchanger is an Exchanger that can leave ranks out and give up on
// the ones that do not answer (mpi.Comm).
type ActiveExchanger interface {
	AlltoallvActive(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int,
		tag int, deadline time.Time, active []bool) (missing []int, err error)
}

// tagReady is the combine's handshake while masking.
const tagReady = 104

// SetMasking implements bench.Masker.
func (b *Backend) SetMasking(on bool) error {
	if !on {
		b.active = nil
		return nil
	}
	if _, ok := b.comm.(ActiveExchanger); !ok {
		return errors.New("cpuref: this communicator cannot leave ranks out of an exchange")
	}
	b.active = make([]bool, b.R)
	return b.CleanMask()
}

// Mask implements bench.Masker.
func (b *Backend) Mask() ([]bool, error) {
	if b.active == nil {
		return nil, errors.New("cpuref: masking is off")
	}
	return append([]bool(nil), b.active...), nil
}

// CleanMask implements bench.Masker.
func (b *Backend) CleanMask() error {
	if b.active == nil {
		return errors.New("cpuref: masking is off")
	}
	for i := range b.active {
		b.active[i] = true
	}
	return nil
}

// CombineWaitsForAll implements bench.Masker: the handshake reaches every
// active rank.
func (b *Backend) CombineWaitsForAll() bool { return true }

// isActive reports whether rank q takes part (always, with masking off).
func (b *Backend) isActive(q int) bool { return b.active == nil || b.active[q] }

// exchangeActive is exchange while masking: among the active ranks, the
// ones that do not answer masked.
func (b *Backend) exchangeActive(phase string, tag int, send []byte, sc, sd []int, recv []byte, rc, rd []int) error {
	ax := b.comm.(ActiveExchanger) // SetMasking checked
	missing, err := ax.AlltoallvActive(send, sc, sd, recv, rc, rd, tag, time.Now().Add(b.timeout), b.active)
	for _, r := range missing {
		b.active[r] = false
	}
	if err != nil {
		return fmt.Errorf("%s: %w", phase, err)
	}
	return nil
}

// handshake is the combine's first exchange while masking.
func (b *Backend) handshake() error {
	clear(b.cntSend)
	return b.exchangeActive("cpuref combine handshake", tagReady, b.cntSend, b.four, b.fourDispls, b.cntRecv, b.four, b.fourDispls)
}
