package kernels

import (
	"encoding/binary"
	"fmt"
)

// The GIN build's host-side block (GinArgs in ll_gin.cuh), which the host
// writes into each GIN module's variable GinGlobal once it is loaded.
const (
	// GinGlobal is the GIN modules' variable.
	GinGlobal = "epbench_gin"
	// DevCommBytes is the size of NCCL's device communicator in the layout
	// of NCCLVersion (ncclDevComm of NCCL 2.30.7).
	DevCommBytes = 240
	// ginMaskWords is the words of GinArgs.peers: a bit per rank.
	ginMaskWords = MaxRanks / 64
	// GinArgsBytes is sizeof(GinArgs): the window's handle, the region
	// size, the mask of GIN peers, the device communicator.
	GinArgsBytes = 8 + 8 + 8*ginMaskWords + DevCommBytes
)

// GinArgs lays GinArgs out: win is the window's device handle, region the
// bytes of one region of it (the symmetric buffer; peer q's mirror is
// region q + 1), gin the peers reached through GIN, dev the device
// communicator.
func GinArgs(win uint64, region int64, gin []int, dev []byte) ([]byte, error) {
	if len(dev) != DevCommBytes {
		return nil, fmt.Errorf("kernels: a device communicator of %d bytes, want %d", len(dev), DevCommBytes)
	}
	if region <= 0 {
		return nil, fmt.Errorf("kernels: GIN regions of %d bytes", region)
	}
	b := make([]byte, GinArgsBytes)
	binary.LittleEndian.PutUint64(b[0:], win)
	binary.LittleEndian.PutUint64(b[8:], uint64(region))
	for _, q := range gin {
		if q < 0 || q >= MaxRanks {
			return nil, fmt.Errorf("kernels: GIN peer %d outside 0..%d", q, MaxRanks-1)
		}
		i := 16 + 8*(q/64)
		binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(b[i:])|1<<(q%64))
	}
	copy(b[16+8*ginMaskWords:], dev)
	return b, nil
}

// MirrorPeers is the peer table of the GIN build: a GIN peer's entry is its
// mirror in this rank's allocation (local + (q + 1) × region, where the
// kernels write what goes to it); the others keep their load/store address.
func MirrorPeers(local uint64, region int64, peers []uint64, gin []int) []uint64 {
	out := append([]uint64(nil), peers...)
	for _, q := range gin {
		out[q] = local + uint64(q+1)*uint64(region)
	}
	return out
}

// GINPeers is who rank reaches through GIN: with all (-n) every other rank
// of ranks, otherwise the ranks NCCL reaches only that way (unreachable).
func GINPeers(rank, ranks int, all bool, unreachable []int) []int {
	if !all {
		return unreachable
	}
	var out []int
	for q := range ranks {
		if q != rank {
			out = append(out, q)
		}
	}
	return out
}
