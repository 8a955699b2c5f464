package nccl

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// devCommRequirements has the stand-in log the device communicator
// requirements it gets to a fresh file and returns what it logged so far,
// one line per ncclDevCommCreate.
func devCommRequirements(t *testing.T) func() []string {
	t.Helper()
	return fakeLog(t, "FAKE_NCCL_DEVCOMM_LOG", func(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") })
}

// wantRequirements is every field of the requirements CreateDevComm(contexts)
// passes, as the stand-in logs them: NCCL's initializer, with GIN from every
// rank to every rank, the contexts asked for and no indexed signals or
// counters.
func wantRequirements(contexts string) string {
	return strings.Join([]string{
		"size=96", "magic=0xcafebeef", "version=23007", "resourceRequirementsList=0", "teamRequirementsList=0",
		"lsaMultimem=0", "barrierCount=0", "lsaBarrierCount=0", "railGinBarrierCount=0", "lsaLLA2ABlockCount=0",
		"lsaLLA2ASlotCount=0", "ginForceEnable=0", "ginContextCount=" + contexts, "ginSignalCount=0", "ginCounterCount=0",
		"ginConnectionType=1", "ginExclusiveContexts=0", "ginQueueDepth=0", "ginTrafficClass=-2147483648",
		"worldGinBarrierCount=0", "ginStrongSignalsRequired=1", "ginVaSignalsRequired=1",
	}, " ")
}

func TestGINHeadersVersion(t *testing.T) {
	if GINHeadersVersion != (Version{2, 30, 7}) || DevCommBytes != 240 {
		t.Fatalf("GINHeadersVersion %v, DevCommBytes %d; want 2.30.7's, 240", GINHeadersVersion, DevCommBytes)
	}
}

// The requirements reach the library as specified, the device communicator
// comes back as the library wrote it (also while the creation is in
// progress, and when the library writes more than 2.30.7's struct), and
// goes back to it whole on Destroy.
func TestDevCommLifecycle(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{name: "at once"},
		{name: "in progress", env: map[string]string{"FAKE_NCCL_DEVCOMM_POLLS": "2"}},
		{name: "longer struct", env: map[string]string{"FAKE_NCCL_DEVCOMM_SIZE": "4096"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := loadFake(t)
			calls := callLog(t)
			reqs := devCommRequirements(t)
			t.Setenv("FAKE_NCCL_GIN", "2")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			comm := initComm(t, l, 4, 2)
			d, err := comm.CreateDevComm(3)
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			if got := reqs(); len(got) != 1 || got[0] != wantRequirements("3") {
				t.Errorf("requirements\n%q\nwant\n%q", got, wantRequirements("3"))
			}
			b := d.Bytes()
			u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
			// magic, version, rank, ranks and GIN contexts at their offsets in 2.30.7's ncclDevComm
			if len(b) != 240 || u32(0) != 0xcafebeef || u32(4) != 23007 || u32(8) != 2 || u32(12) != 4 || u32(200) != 3 {
				t.Errorf("Bytes() of %d bytes, magic %#x, version %d, rank %d of %d, %d contexts; want the stand-in's 240 bytes, rank 2 of 4, 3 contexts",
					len(b), u32(0), u32(4), u32(8), u32(12), u32(200))
			}
			b[0] = 0
			if d.Bytes()[0] == 0 {
				t.Error("Bytes() shares the device communicator")
			}
			if err := d.Destroy(); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			if err := d.Destroy(); err != nil {
				t.Fatalf("second Destroy: %v", err)
			}
			want := []string{"ncclCommInitRankConfig", "ncclDevCommCreate", "ncclDevCommDestroy"}
			if got := calls(); !slices.Equal(got, want) {
				t.Errorf("calls %v; want %v", got, want)
			}
		})
	}
}

// Only a library of 2.30.7's minor release, at its patch or later, writes
// the device communicator the GIN kernels read; the others are refused
// before NCCL is asked.
func TestDevCommVersions(t *testing.T) {
	for _, c := range []struct {
		version string
		ok      bool
	}{
		{"23007", true}, {"23009", true}, {"23006", false}, {"23100", false}, {"30007", false},
	} {
		t.Run(c.version, func(t *testing.T) {
			l := loadFakeVersion(t, c.version)
			t.Setenv("FAKE_NCCL_GIN", "2")
			calls := callLog(t)
			comm := initComm(t, l, 2, 0)
			d, err := comm.CreateDevComm(1)
			if c.ok {
				if err != nil {
					t.Fatalf("CreateDevComm: %v", err)
				}
				if err := d.Destroy(); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := "found NCCL " + l.Version.String() + " at " + l.Path + "; the GIN kernels are compiled against NCCL 2.30.7's " +
				"device headers, so the device communicator's layout must match: NCCL 2.30.7 or a later 2.30 release is needed"
			if !errors.Is(err, ErrGINUnsupported) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v; want ErrGINUnsupported, %q", err, want)
			}
			if got := calls(); slices.Contains(got, "ncclDevCommCreate") {
				t.Errorf("calls %v; want no ncclDevCommCreate", got)
			}
		})
	}
}

func TestDevCommGoSideChecks(t *testing.T) {
	l := loadFake(t)
	comm := initComm(t, l, 2, 0)
	if _, err := comm.CreateDevComm(0); err == nil {
		t.Error("CreateDevComm with 0 contexts succeeded")
	}
	var d *DevComm
	if err := d.Destroy(); err != nil {
		t.Errorf("Destroy of a nil DevComm: %v", err)
	}
}

// A device communicator outlived by its communicator's abort has nothing
// left to release.
func TestDevCommAfterAbort(t *testing.T) {
	l := loadFake(t)
	calls := callLog(t)
	comm := initComm(t, l, 2, 0)
	d, err := comm.CreateDevComm(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := comm.abort(); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(); err != nil {
		t.Fatalf("Destroy after the abort: %v", err)
	}
	want := []string{"ncclCommInitRankConfig", "ncclDevCommCreate", "ncclCommAbort"}
	if got := calls(); !slices.Equal(got, want) {
		t.Errorf("calls %v; want %v", got, want)
	}
}
