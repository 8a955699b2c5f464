package kernels

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestGinArgsLayout(t *testing.T) {
	dev := make([]byte, DevCommBytes)
	for i := range dev {
		dev[i] = byte(i)
	}
	b, err := GinArgs(0x7f0000001000, 1<<20, []int{0, 3, 64, 255}, dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != GinArgsBytes || GinArgsBytes != 288 {
		t.Fatalf("GinArgs is %d bytes, GinArgsBytes %d, want 288 (ll_gin.cuh)", len(b), GinArgsBytes)
	}
	u := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	if u(0) != 0x7f0000001000 || u(8) != 1<<20 {
		t.Errorf("window %#x, region %d", u(0), u(8))
	}
	if want := []uint64{1 | 1<<3, 1, 0, 1 << 63}; !slices.Equal([]uint64{u(16), u(24), u(32), u(40)}, want) {
		t.Errorf("GIN peer mask %#x, want %#x", []uint64{u(16), u(24), u(32), u(40)}, want)
	}
	if !slices.Equal(b[48:], dev) {
		t.Error("the device communicator is not at offset 48")
	}
	for _, bad := range []struct {
		region int64
		gin    []int
		dev    []byte
	}{{1, []int{256}, dev}, {1, []int{-1}, dev}, {1, nil, dev[:10]}, {0, nil, dev}} {
		if _, err := GinArgs(1, bad.region, bad.gin, bad.dev); err == nil {
			t.Errorf("GinArgs took region %d, peers %v, %d communicator bytes", bad.region, bad.gin, len(bad.dev))
		}
	}
}

func TestMirrorPeers(t *testing.T) {
	peers := []uint64{100, 200, 300, 400}
	got := MirrorPeers(1000, 50, peers, []int{1, 3})
	if want := []uint64{100, 1000 + 2*50, 300, 1000 + 4*50}; !slices.Equal(got, want) {
		t.Errorf("mirrors %v, want %v", got, want)
	}
	if peers[1] != 200 {
		t.Error("MirrorPeers changed its input")
	}
}

func TestGINPeers(t *testing.T) {
	if got := GINPeers(2, 4, true, nil); !slices.Equal(got, []int{0, 1, 3}) {
		t.Errorf("-n at rank 2 of 4: %v", got)
	}
	if got := GINPeers(0, 4, false, []int{2, 3}); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("without -n: %v", got)
	}
	if got := GINPeers(0, 1, true, nil); len(got) != 0 {
		t.Errorf("one rank: %v", got)
	}
}

// Every GIN module declares the variable the host fills, of the size the
// host writes; no other module has it.
func TestGINModulesDeclareTheirArgs(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\.global \.align 8 \.b8 ` + GinGlobal + `\[(\d+)\];`)
	for _, v := range Variants() {
		b, err := PTX("", v)
		if err != nil {
			t.Fatalf("%s: %v", v.Module(), err)
		}
		m := re.FindSubmatch(b)
		switch {
		case v.GIN && m == nil:
			t.Errorf("%s declares no %s", v.Module(), GinGlobal)
		case v.GIN && string(m[1]) != fmt.Sprint(GinArgsBytes):
			t.Errorf("%s: %s is %s bytes, the host writes %d", v.Module(), GinGlobal, m[1], GinArgsBytes)
		case !v.GIN && strings.Contains(string(b), GinGlobal):
			t.Errorf("%s, not a GIN module, mentions %s", v.Module(), GinGlobal)
		case v.GIN && strings.Contains(string(b), ".extern .func"):
			t.Errorf("%s calls an external function", v.Module())
		}
	}
}
