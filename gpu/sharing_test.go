package gpu

import (
	"slices"
	"testing"
)

// Which ranks share a GPU, and where lines are verified: ranks on one GPU
// (by UUID), or distinct GPUs of compute capability 9.0 over NVLink. The
// NVLink query goes to NVML, which knows no such bus ids here: distinct
// GPUs count as unlinked.
func TestSharingOf(t *testing.T) {
	gpu := func(rank int, uuid string, major int) rankDevice {
		return rankDevice{Rank: rank, Host: "h", GPU: Info{UUID: uuid, PCIBusID: "bus-" + uuid, CCMajor: major}}
	}
	one := []rankDevice{gpu(0, "a", 9), gpu(1, "a", 9), gpu(2, "a", 9)}
	if s := sharingOf(one, 1); s.Ranks != 3 || !s.LinesVerified {
		t.Errorf("three ranks on one GPU: %+v", s)
	}
	if got := sharers(one, 2); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("sharers %v", got)
	}
	two := []rankDevice{gpu(0, "a", 9), gpu(1, "a", 9), gpu(2, "b", 9)}
	if s := sharingOf(two, 2); s.Ranks != 1 || s.LinesVerified {
		t.Errorf("rank 2 alone on an unlinked GPU: %+v", s)
	}
	if s := sharingOf(two, 0); s.Ranks != 2 {
		t.Errorf("rank 0 shares with rank 1: %+v", s)
	}
	// Without UUIDs, the host and bus id tell.
	noID := []rankDevice{{Rank: 0, Host: "h", GPU: Info{PCIBusID: "x"}}, {Rank: 1, Host: "h", GPU: Info{PCIBusID: "x"}}}
	if !noID[0].sameGPU(noID[1]) {
		t.Error("same host and bus id: not seen as one GPU")
	}
}
