package gpu

import (
	"fmt"
	"io"
	"strings"

	"github.com/epbench/epbench/bench"
)

// rankDevice is what each rank reports about itself in `epbench devices`.
type rankDevice struct {
	Rank      int    `json:"rank"`
	LocalRank int    `json:"local_rank"`
	Host      string `json:"host"`
	GPU       Info   `json:"gpu"`
	Error     string `json:"error,omitempty"`
}

// slot is the fixed size of one rank's record in the all-gather.
const slot = 2048

// Devices prints each rank's GPU and its peers' reachability (rank 0
// writes; collective). It fails where a rank has no GPU or cannot reach a
// peer by P2P.
func (Hooks) Devices(w *bench.World, out io.Writer) error {
	me := rankDevice{Rank: w.Rank, LocalRank: w.LocalRank, Host: w.Host}
	dev, err := Open(w.LocalRank)
	if err != nil {
		me.Error = err.Error()
	} else {
		defer dev.Close()
		me.GPU = dev.Info
	}
	all, err := bench.GatherJSON(w.Comm, me, slot)
	if err != nil {
		return fmt.Errorf("devices: exchanging GPU records: %v", err)
	}
	// Each rank checks the peers on its own node; the answers are gathered too.
	p2p := make([]int, w.Size) // 1 yes, 0 no, -1 other node or unknown
	for r, peer := range all {
		p2p[r] = -1
		if dev == nil || peer.Error != "" || peer.Host != w.Host {
			continue
		}
		ok, err := dev.CanAccessPeer(peer.GPU.Ordinal)
		if err == nil && ok {
			p2p[r] = 1
		} else if err == nil {
			p2p[r] = 0
		}
	}
	matrix, err := bench.GatherJSON(w.Comm, p2p, slot)
	if err != nil {
		return fmt.Errorf("devices: exchanging P2P results: %v", err)
	}
	if w.Rank != 0 {
		return nil
	}
	fmt.Fprintf(out, "=== epbench devices (%d ranks) ===\n", w.Size)
	failed := false
	for r, d := range all {
		if d.Error != "" {
			fmt.Fprintf(out, "rank %d (%s, local rank %d): no GPU: %s\n", r, d.Host, d.LocalRank, d.Error)
			failed = true
			continue
		}
		g := d.GPU
		fmt.Fprintf(out, "rank %d (%s, local rank %d): GPU %d %s, PCI %s, %d MiB, %d SMs, sm_%d%d, driver %s, CUDA %d.%d, %d NVLinks active\n",
			r, d.Host, d.LocalRank, g.Ordinal, g.Name, g.PCIBusID, g.TotalMiB, g.SMs, g.CCMajor, g.CCMinor,
			orUnknown(g.Driver), g.CUDADriver/1000, g.CUDADriver%1000/10, g.NVLinkActive)
		var peers []string
		for p, q := range all {
			if p == r {
				continue
			}
			switch {
			case q.Host != d.Host:
				peers = append(peers, fmt.Sprintf("rank %d other node", p))
			case matrix[r][p] == 1:
				via := "PCIe or other"
				if d.Host == all[0].Host && NVLinkP2P(g.PCIBusID, q.GPU.PCIBusID) {
					via = "NVLink"
				}
				peers = append(peers, fmt.Sprintf("rank %d P2P yes (%s)", p, via))
			default:
				peers = append(peers, fmt.Sprintf("rank %d P2P NO", p))
				failed = true
			}
		}
		if len(peers) > 0 {
			fmt.Fprintf(out, "  peers: %s\n", strings.Join(peers, ", "))
		}
	}
	if failed {
		return fmt.Errorf("devices: some ranks have no GPU or cannot reach a peer by P2P")
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
