package cpuref

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/epbench/epbench/config"
)

// A dispatch message carries one token to one destination rank:
//
//	int32 token | int32 reserved | int32 expert[K] | float32 weight[K] | pad to 16 bytes
//	payload: BF16 row (2H bytes), or FP8 row (H bytes) then H/128 float32 scales
//
// All fields are little-endian.
const (
	offToken   = 0
	offExperts = 8
)

func headerBytes(topk int) int { return (offExperts + 8*topk + 15) / 16 * 16 }

var le = binary.LittleEndian

// Dispatch sends every token of routing j once to each rank that holds one
// of its selected experts, and lays out what arrives here expert-major:
// inside each local expert, source ranks ascending, tokens ascending. It
// exchanges the per-peer message counts first, then the messages, with two
// bounded Alltoallv exchanges.
func (b *Backend) Dispatch(j int) error {
	if err := b.checkRouting(j); err != nil {
		return err
	}
	b.dispatched = -1
	b.calls++
	b.wait(true)
	idx := b.topk[j]

	// Count the messages per destination rank, then pack them.
	clear(b.sendCounts)
	for t := 0; t < b.own; t++ {
		b.markDests(idx[t*b.K : (t+1)*b.K])
		for q, d := range b.destMark {
			if d {
				b.sendCounts[q]++
			}
		}
	}
	off := 0
	for q := range b.sendCounts {
		le.PutUint32(b.cntSend[4*q:], uint32(b.sendCounts[q]))
		b.sendDispls[q] = off
		b.sendCounts[q] *= b.msg
		off += b.sendCounts[q]
	}
	copy(b.cursor, b.sendDispls)
	for t := 0; t < b.own; t++ {
		sel := idx[t*b.K : (t+1)*b.K]
		b.markDests(sel)
		packed := -1 // offset of this token's first message
		for q, d := range b.destMark {
			if !d {
				continue
			}
			m := b.dispSend[b.cursor[q] : b.cursor[q]+b.msg]
			if packed < 0 {
				b.packMessage(m, t, sel)
				packed = b.cursor[q]
			} else {
				// Every destination gets the same bytes.
				copy(m, b.dispSend[packed:packed+b.msg])
			}
			b.cursor[q] += b.msg
		}
	}

	if err := b.exchange("cpuref dispatch counts exchange", tagCounts, b.cntSend, b.four, b.fourDispls, b.cntRecv, b.four, b.fourDispls); err != nil {
		return err
	}
	off = 0
	for s := range b.recvCounts {
		n := int(le.Uint32(b.cntRecv[4*s:]))
		if !b.isActive(s) { // -T: nothing comes from a masked rank
			n = 0
		}
		if n > b.T {
			return fmt.Errorf("cpuref: dispatch: rank %d announces %d messages, more than its %d tokens", s, n, b.T)
		}
		b.msgCount[s], b.msgDispls[s] = n, off
		b.recvCounts[s], b.recvDispls[s] = n*b.msg, off
		off += n * b.msg
	}
	if err := b.exchange("cpuref dispatch exchange", tagDispatch, b.dispSend, b.sendCounts, b.sendDispls, b.dispRecv, b.recvCounts, b.recvDispls); err != nil {
		return err
	}
	for s := range b.msgCount {
		if !b.isActive(s) { // -T: masked during the exchange
			b.msgCount[s] = 0
		}
	}
	layOut := b.layOut
	if b.rm {
		layOut = b.layOutRankMajor
	}
	if err := layOut(); err != nil {
		return err
	}
	b.dispatched = j
	return nil
}

// markDests sets destMark[q] for every rank q that holds an expert of sel.
func (b *Backend) markDests(sel []int64) {
	clear(b.destMark)
	for _, e := range sel {
		if e >= 0 {
			b.destMark[int(e)/b.L] = true
		}
	}
}

// packMessage writes the header and payload of token t into m.
func (b *Backend) packMessage(m []byte, t int, sel []int64) {
	clear(m[:b.hdr])
	le.PutUint32(m[offToken:], uint32(t))
	offW := offExperts + 4*b.K
	for k, e := range sel {
		le.PutUint32(m[offExperts+4*k:], uint32(int32(e)))
		le.PutUint32(m[offW+4*k:], math.Float32bits(b.weights[t*b.K+k]))
	}
	row := b.x[t*b.H : (t+1)*b.H]
	p := m[b.hdr:]
	if b.dtype == config.DtypeFP8E4M3 {
		// Quantised once per token; further destinations copy the message.
		QuantizeRow(row, b.qrow, b.qscales)
		copy(p, b.qrow)
		for i, s := range b.qscales {
			le.PutUint32(p[b.H+4*i:], math.Float32bits(s))
		}
		return
	}
	for c, h := range row {
		le.PutUint16(p[2*c:], h)
	}
}

// layOut builds recv_x (or the FP8 rows and scales), recv_count, src_info,
// layout_range and rowPos from the received messages.
func (b *Backend) layOut() error {
	R, T, K, L := b.R, b.T, b.K, b.L
	RT := R * T
	first := b.rank * L
	clear(b.recvCount)
	for s := 0; s < R; s++ {
		for l := 0; l < L; l++ {
			b.layoutRange[l*R+s] = int64(b.recvCount[l]) << 32
		}
		for m := 0; m < b.msgCount[s]; m++ {
			msg := b.dispRecv[b.msgDispls[s]+m*b.msg:][:b.msg]
			t := int(int32(le.Uint32(msg[offToken:])))
			if t < 0 || t >= T {
				return fmt.Errorf("cpuref: dispatch: message %d from rank %d names token %d, outside [0, %d)", m, s, t, T)
			}
			pos := b.rowPos[(s*T+m)*K:][:K]
			local := 0
			for k := range pos {
				pos[k] = -1
				e := int(int32(le.Uint32(msg[offExperts+4*k:])))
				if e < -1 || e >= b.E {
					return fmt.Errorf("cpuref: dispatch: token %d from rank %d selects expert %d, outside [-1, %d)", t, s, e, b.E)
				}
				if e < first || e >= first+L {
					continue
				}
				l := e - first
				// Experts of a token are distinct, so a message has at most
				// L local slots; the combine buffers rely on it.
				if local++; local > L {
					return fmt.Errorf("cpuref: dispatch: token %d from rank %d selects a local expert twice", t, s)
				}
				row := int(b.recvCount[l])
				if row >= RT {
					return fmt.Errorf("cpuref: dispatch: local expert %d receives more than %d rows", l, RT)
				}
				b.recvCount[l]++
				pos[k] = int32(row)
				slot := l*RT + row
				b.srcInfo[slot] = int32(t)
				b.putRow(slot, msg)
			}
		}
		for l := 0; l < L; l++ {
			begin := b.layoutRange[l*R+s] >> 32
			b.layoutRange[l*R+s] |= int64(b.recvCount[l]) - begin
		}
	}
	return nil
}

// layOutRankMajor lays the received messages out rank-major: the m-th
// token that source s sends here (tokens ascending) in slot (s, m), once,
// with its token index in src_info, its top-k experts as this rank's local
// ones (-1 elsewhere) and its top-k weights; recv_count[s] counts the
// tokens of s, and the slots past it are left as they are. rowPos marks
// each message's local selections with its slot, for combine.
func (b *Backend) layOutRankMajor() error {
	R, T, K, L := b.R, b.T, b.K, b.L
	first := b.rank * L
	offW := offExperts + 4*K
	for s := 0; s < R; s++ {
		b.recvCount[s] = int32(b.msgCount[s])
		for m := 0; m < b.msgCount[s]; m++ {
			msg := b.dispRecv[b.msgDispls[s]+m*b.msg:][:b.msg]
			t := int(int32(le.Uint32(msg[offToken:])))
			if t < 0 || t >= T {
				return fmt.Errorf("cpuref: dispatch: message %d from rank %d names token %d, outside [0, %d)", m, s, t, T)
			}
			slot := s*T + m
			b.srcInfo[slot] = int32(t)
			pos := b.rowPos[(s*T+m)*K:][:K]
			for k := range pos {
				e := int(int32(le.Uint32(msg[offExperts+4*k:])))
				if e < -1 || e >= b.E {
					return fmt.Errorf("cpuref: dispatch: token %d from rank %d selects expert %d, outside [-1, %d)", t, s, e, b.E)
				}
				pos[k], b.recvTopkIdx[slot*K+k] = -1, -1
				if e >= first && e < first+L {
					pos[k], b.recvTopkIdx[slot*K+k] = int32(slot), int32(e-first)
				}
				b.recvTopkW[slot*K+k] = math.Float32frombits(le.Uint32(msg[offW+4*k:]))
			}
			b.putRow(slot, msg)
		}
	}
	return nil
}

// putRow copies the payload of dispatch message msg into receive row (or
// slot) `row`: the BF16 row, or the FP8 row and its scales.
func (b *Backend) putRow(row int, msg []byte) {
	H, nb := b.H, b.H/ScaleBlock
	p := msg[b.hdr:]
	if b.dtype == config.DtypeFP8E4M3 {
		copy(b.recvFP8[row*H:(row+1)*H], p[:H])
		sc := b.recvScales[row*nb : (row+1)*nb]
		for i := range sc {
			sc[i] = math.Float32frombits(le.Uint32(p[H+4*i:]))
		}
		return
	}
	dst := b.recvX[row*H : (row+1)*H]
	for c := range dst {
		dst[c] = le.Uint16(p[2*c:])
	}
}
