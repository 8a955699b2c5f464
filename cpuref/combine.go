package cpuref

import (
	"errors"
	"fmt"
	"math"

	"github.com/epbench/epbench/bf16"
	"github.com/epbench/epbench/config"
)

// Combine returns the expert outputs of routing j to their source ranks and
// reduces them into out (docs/DESIGN.md, "Combine"). The experts are the
// identity: an expert's output is its dispatched row, or for FP8 dispatch
// the dequantised row bf16(fp32(decode(q) * scale)), computed here as the
// rows are read. The rows travel in one Alltoallv, in the order both sides
// derive from the routing: per (source rank, expert rank), tokens ascending
// and, for direct_send, top-k slots ascending inside a token.
func (b *Backend) Combine(j int) error {
	if err := b.checkRouting(j); err != nil {
		return err
	}
	if b.dispatched != j {
		if b.dispatched < 0 {
			return errors.New("cpuref: combine before a successful dispatch")
		}
		return fmt.Errorf("cpuref: combine of routing %d after the dispatch of routing %d", j, b.dispatched)
	}
	b.wait(false)
	if b.active != nil {
		if err := b.handshake(); err != nil {
			return err
		}
	}
	b.sendExpertOutputs()

	// What comes back from each expert rank follows from this rank's own
	// routing: one partial per (token, expert rank) or one row per selection.
	idx := b.topk[j]
	clear(b.recvCounts)
	for t := 0; t < b.own; t++ {
		sel := idx[t*b.K : (t+1)*b.K]
		if b.mode == config.DirectSend && !b.rm {
			for _, e := range sel {
				if e >= 0 {
					b.recvCounts[int(e)/b.L]++
				}
			}
			continue
		}
		b.markExpertRanks(sel)
		for q, h := range b.hasRank {
			if h {
				b.recvCounts[q]++
			}
		}
	}
	row := 2 * b.H
	off := 0
	for q := range b.recvCounts {
		if !b.isActive(q) { // -T: nothing comes from a masked rank
			b.recvCounts[q] = 0
		}
		b.recvCounts[q] *= row
		b.recvDispls[q] = off
		off += b.recvCounts[q]
	}
	if err := b.exchange("cpuref combine exchange", tagCombine, b.combSend, b.sendCounts, b.sendDispls, b.combRecv, b.recvCounts, b.recvDispls); err != nil {
		return err
	}
	b.reduce(idx)
	return nil
}

// sendExpertOutputs packs, per source rank, what this rank's experts return
// to it, and sets sendCounts/sendDispls.
func (b *Backend) sendExpertOutputs() {
	K, T := b.K, b.T
	row := 2 * b.H
	offW := offExperts + 4*K
	first := b.rank * b.L
	off := 0
	for s := 0; s < b.R; s++ {
		b.sendDispls[s] = off
		for m := 0; m < b.msgCount[s]; m++ {
			msg := b.dispRecv[b.msgDispls[s]+m*b.msg:][:b.hdr]
			pos := b.rowPos[(s*T+m)*K:][:K]
			if b.mode == config.DirectSend {
				for k, r := range pos {
					if r < 0 {
						continue
					}
					l := int(int32(le.Uint32(msg[offExperts+4*k:]))) - first
					putRow(b.combSend[off:off+row], b.expertOutput(l, int(r)))
					off += row
				}
				continue
			}
			if b.rm {
				b.rankMajorRow(b.combSend[off:off+row], msg, pos)
				off += row
				continue
			}
			// rank_local_reduce: p = 0; p = p + w*y over the local slots in
			// top-k order; one bf16 partial per token.
			clear(b.acc)
			for k, r := range pos {
				if r < 0 {
					continue
				}
				l := int(int32(le.Uint32(msg[offExperts+4*k:]))) - first
				w := math.Float32frombits(le.Uint32(msg[offW+4*k:]))
				accumulate(b.acc, w, b.expertOutput(l, int(r)))
			}
			dst := b.combSend[off : off+row]
			for c, v := range b.acc {
				le.PutUint16(dst[2*c:], bf16.FromFloat32(v))
			}
			off += row
		}
		b.sendCounts[s] = off - b.sendDispls[s]
	}
}

// rankMajorRow writes the row a rank-major slot returns: the identity
// expert's output of the slot (pos names it in every local selection's
// entry), as it is in a timed pair, or in a validated pair (generation
// other than 0) scaled by the sum of the token's weights on this rank, fp32
// in top-k order, each channel bf16(y * sum) (docs/DESIGN.md).
func (b *Backend) rankMajorRow(dst, hdr []byte, pos []int32) {
	slot := -1
	var sum float32
	for k, r := range pos {
		if r < 0 {
			continue
		}
		slot = int(r)
		sum = sum + math.Float32frombits(le.Uint32(hdr[offExperts+4*b.K+4*k:]))
	}
	y := b.slotOutput(slot)
	if b.rankRows == 0 {
		putRow(dst, y)
		return
	}
	for c, h := range y {
		le.PutUint16(dst[2*c:], bf16.FromFloat32(float32(bf16.ToFloat32(h)*sum)))
	}
}

// slotOutput is the identity expert's output for rank-major slot i.
func (b *Backend) slotOutput(i int) []uint16 {
	if b.dtype == config.DtypeFP8E4M3 {
		nb := b.H / ScaleBlock
		DequantizeRow(b.recvFP8[i*b.H:(i+1)*b.H], b.recvScales[i*nb:(i+1)*nb], b.yrow)
		return b.yrow
	}
	return b.recvX[i*b.H : (i+1)*b.H]
}

// expertOutput is the identity expert's output for row r of local expert l.
func (b *Backend) expertOutput(l, r int) []uint16 {
	slot := l*b.R*b.T + r
	if b.dtype == config.DtypeFP8E4M3 {
		nb := b.H / ScaleBlock
		DequantizeRow(b.recvFP8[slot*b.H:(slot+1)*b.H], b.recvScales[slot*nb:(slot+1)*nb], b.yrow)
		return b.yrow
	}
	return b.recvX[slot*b.H : (slot+1)*b.H]
}

// reduce turns the received rows into out.
func (b *Backend) reduce(idx []int64) {
	row := 2 * b.H
	copy(b.cursor, b.recvDispls)
	for t := 0; t < b.own; t++ {
		sel := idx[t*b.K : (t+1)*b.K]
		clear(b.acc)
		if b.mode == config.DirectSend && !b.rm {
			// acc = 0; acc = acc + w*y over the valid slots in top-k order.
			for k, e := range sel {
				if e < 0 {
					continue
				}
				q := int(e) / b.L
				if !b.isActive(q) { // -T: left out
					continue
				}
				addWeightedBytes(b.acc, b.weights[t*b.K+k], b.combRecv[b.cursor[q]:b.cursor[q]+row])
				b.cursor[q] += row
			}
		} else {
			// acc = 0; acc = acc + partial_q over expert ranks ascending.
			b.markExpertRanks(sel)
			for q, h := range b.hasRank {
				if !h || !b.isActive(q) { // -T: a masked rank's partial is left out
					continue
				}
				addBytes(b.acc, b.combRecv[b.cursor[q]:b.cursor[q]+row])
				b.cursor[q] += row
			}
		}
		out := b.out[t*b.H : (t+1)*b.H]
		for c, v := range b.acc {
			out[c] = bf16.FromFloat32(v)
		}
	}
}

// markExpertRanks sets hasRank[q] for every rank q holding an expert of sel.
func (b *Backend) markExpertRanks(sel []int64) {
	clear(b.hasRank)
	for _, e := range sel {
		if e >= 0 {
			b.hasRank[int(e)/b.L] = true
		}
	}
}

// The fp32 arithmetic of combine. Every product is converted to float32
// before it is added: Go may fuse x*y + z into one rounding, and an explicit
// conversion forbids that, so each multiply and each add rounds on its own
// (CUDA __fmul_rn then __fadd_rn).

// accumulate is acc[c] = acc[c] + w*y[c] over a bf16 row.
func accumulate(acc []float32, w float32, y []uint16) {
	for c, h := range y {
		acc[c] = acc[c] + float32(w*bf16.ToFloat32(h))
	}
}

// addWeightedBytes is accumulate over a little-endian bf16 row.
func addWeightedBytes(acc []float32, w float32, y []byte) {
	for c := range acc {
		acc[c] = acc[c] + float32(w*bf16.ToFloat32(le.Uint16(y[2*c:])))
	}
}

// addBytes is acc[c] = acc[c] + y[c] over a little-endian bf16 row.
func addBytes(acc []float32, y []byte) {
	for c := range acc {
		acc[c] = acc[c] + bf16.ToFloat32(le.Uint16(y[2*c:]))
	}
}

// putRow writes a bf16 row little-endian.
func putRow(dst []byte, row []uint16) {
	for c, h := range row {
		le.PutUint16(dst[2*c:], h)
	}
}
