package nccl

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// gatherer stands in for MPI: this process is rank `rank` of `size`, and
// other(call, r, mine) is what rank r contributes to exchange number call
// (by default the same record as this rank's: every rank succeeded alike).
// Rank 0's record of the first exchange carries the unique id: root, where
// this process is another rank (the stand-in accepts only ids it made).
type gatherer struct {
	rank, size int
	other      func(call, r int, mine []byte) []byte
	root       []byte
	calls      int
}

func (g *gatherer) Rank() int { return g.rank }
func (g *gatherer) Size() int { return g.size }
func (g *gatherer) AllgatherBytes(mine []byte) ([]byte, error) {
	g.calls++
	var all []byte
	for r := 0; r < g.size; r++ {
		rec := mine
		if r == 0 && g.rank != 0 && g.calls == 1 {
			rec = g.root
		}
		if r != g.rank && g.other != nil {
			rec = g.other(g.calls, r, rec)
		}
		all = append(all, rec...)
	}
	return all, nil
}

// failing makes rank bad's record of exchange number call say it failed
// (the last byte of a record is 1 for success).
func failing(call, bad int) func(int, int, []byte) []byte {
	return func(c, r int, mine []byte) []byte {
		rec := append([]byte(nil), mine...)
		if c == call && r == bad {
			rec[len(rec)-1] = 0
		}
		return rec
	}
}

// fakeHome points NCCL_HOME at a fresh copy of the stand-in library and
// returns rank 0's record of the unique-id exchange, a unique id made by
// another copy.
func fakeHome(t *testing.T) []byte {
	t.Helper()
	l := loadFake(t)
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := installFake(t, fakeFull, "libnccl.so.2")
	t.Setenv(EnvHome, home)
	return append(id[:], 1)
}

func TestTransportOneRank(t *testing.T) {
	fakeHome(t)
	g := &gatherer{rank: 0, size: 1}
	tr, err := NewTransport(g, false, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if want := "NCCL 2.30.7 symmetric window"; !strings.Contains(tr.Name(), want) {
		t.Errorf("Name() = %q, want it to contain %q", tr.Name(), want)
	}
	local, peers, err := tr.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if local == 0 || len(peers) != 1 || peers[0] != local {
		t.Errorf("Alloc: local %#x, peers %#x; want the own base as the only peer", local, peers)
	}
	if _, _, err := tr.Alloc(1 << 20); err == nil {
		t.Error("a second Alloc succeeded")
	}
	// The stand-in refuses to destroy a communicator with a window left, so
	// a clean Close shows the teardown order.
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestTransportPeersFromNCCL(t *testing.T) {
	root := fakeHome(t)
	t.Setenv("FAKE_NCCL_LSA_PEERS", "all")
	tr, err := NewTransport(&gatherer{rank: 1, size: 4, root: root}, false, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	local, peers, err := tr.Alloc(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	for r, p := range peers {
		want := fakePeerBase * uint64(r+1)
		if r == 1 {
			want = local
		}
		if p != want {
			t.Errorf("peer %d at %#x, want %#x", r, p, want)
		}
	}
}

func TestTransportRefusals(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		g       *gatherer
		onAlloc bool // the error comes from Alloc, not NewTransport
		want    string
		is      error
	}{
		{name: "peers reached only through GIN", g: &gatherer{rank: 0, size: 3}, onAlloc: true,
			want: "NCCL reaches ranks 1, 2 only through GIN (not by load/store: outside this rank's NVLink domain; GIN here: none), and this set-up reaches peers by load/store only"},
		{name: "peers reached only through GIN, GIN found", env: map[string]string{"FAKE_NCCL_GIN": "3"},
			g: &gatherer{rank: 0, size: 2}, onAlloc: true, want: "NCCL reaches rank 1 only through GIN (not by load/store: outside this rank's NVLink domain; GIN here: GDAKI)"},
		{name: "no symmetric memory", env: map[string]string{"FAKE_NCCL_NO_SYMMETRIC": "1"}, g: &gatherer{rank: 0, size: 2},
			onAlloc: true, is: ErrNoSymmetricMemory},
		{name: "another rank without NCCL", g: &gatherer{rank: 0, size: 3, other: failing(1, 2)},
			want: "NCCL transport: rank 2 could not load NCCL or make its unique id"},
		{name: "another rank's allocation failed", g: &gatherer{rank: 1, size: 2, other: failing(2, 0)}, onAlloc: true,
			want: "NCCL transport: rank 0 could not allocate its symmetric memory"},
		{name: "another rank without every peer", env: map[string]string{"FAKE_NCCL_LSA_PEERS": "all"},
			g: &gatherer{rank: 0, size: 2, other: failing(3, 1)}, onAlloc: true,
			want: "NCCL transport: rank 1 could not address every peer"},
		{name: "communicator refused", env: map[string]string{"FAKE_NCCL_INIT_RESULT": "5", "FAKE_NCCL_INIT_ERROR": "multiple ranks on one GPU"},
			g: &gatherer{rank: 0, size: 2}, want: "NCCL communicator of 2 ranks: ncclCommInitRankConfig:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.g.root = fakeHome(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			tr, err := NewTransport(c.g, false, testTimeout)
			if c.onAlloc {
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = tr.Alloc(1 << 16)
				if cerr := tr.Close(); cerr != nil {
					t.Errorf("Close after the failed Alloc: %v", cerr)
				}
			}
			switch {
			case err == nil:
				t.Fatal("no error")
			case c.is != nil && !errors.Is(err, c.is):
				t.Errorf("error %v, want %v", err, c.is)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// Without a library every rank still takes part in the exchange, so that
// the others learn of it instead of waiting in NCCL.
func TestTransportNoLibrary(t *testing.T) {
	root := fakeHome(t)
	t.Setenv(EnvHome, t.TempDir())
	g := &gatherer{rank: 1, size: 2, root: root}
	_, err := NewTransport(g, false, testTimeout)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	if g.calls != 1 {
		t.Errorf("%d exchanges, want 1", g.calls)
	}
}

func TestTransportSharedGPU(t *testing.T) {
	fakeHome(t)
	t.Setenv(MultiRankGPUEnv, "")
	tr, err := NewTransport(&gatherer{rank: 0, size: 1}, true, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if v := os.Getenv(MultiRankGPUEnv); v != "1" {
		t.Errorf("%s=%q after a transport on a shared GPU, want 1", MultiRankGPUEnv, v)
	}
}

// A rank that fails or stalls inside one of NCCL's collective steps leaves
// the others with a timeout, not waiting in NCCL forever; the transport
// aborts the communicator and frees its memory.
func TestTransportStalledSteps(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, c := range []struct {
		name, step string
		onAlloc    bool // the step belongs to Alloc, not NewTransport
		onGIN      bool // ... or to EnableGIN after it
		want       string
		calls      []string
	}{
		{name: "communicator", step: "INIT",
			want:  "NCCL communicator of 2 ranks: ncclCommInitRankConfig did not complete within 100 ms",
			calls: []string{"ncclCommInitRankConfig", "ncclCommAbort"}},
		{name: "window", step: "REGISTER", onAlloc: true,
			want:  "registering the symmetric window: ncclCommWindowRegister did not complete within 100 ms",
			calls: []string{"ncclCommInitRankConfig", "ncclMemAlloc", "ncclCommWindowRegister", "ncclCommAbort", "ncclMemFree"}},
		// The abort took the window with it: Close only frees the memory.
		{name: "device communicator", step: "DEVCOMM", onAlloc: true, onGIN: true,
			want: "NCCL device communicator with GIN: ncclDevCommCreate did not complete within 100 ms",
			calls: []string{"ncclCommInitRankConfig", "ncclMemAlloc", "ncclCommWindowRegister", "ncclDevCommCreate",
				"ncclCommAbort", "ncclMemFree"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fakeHome(t)
			calls := callLog(t)
			t.Setenv("FAKE_NCCL_"+c.step+"_POLLS", "forever")
			t.Setenv("FAKE_NCCL_GIN", "2")
			err := bounded(t, func() error {
				tr, err := NewTransport(&gatherer{rank: 1, size: 2, root: root}, false, timeout)
				if err != nil || !c.onAlloc {
					return err
				}
				_, _, err = tr.AllocWith(1<<16, AllocOptions{AllowGIN: c.onGIN})
				if err == nil && c.onGIN {
					_, err = tr.EnableGIN(4)
				}
				if cerr := tr.Close(); cerr != nil {
					t.Errorf("Close after the failure: %v", cerr)
				}
				return err
			})
			var te *TimeoutError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want a *TimeoutError, %q", err, c.want)
			}
			if got := calls(); !slices.Equal(got, c.calls) {
				t.Errorf("calls %v; want %v", got, c.calls)
			}
		})
	}
}

// With GIN allowed, Alloc leaves the peers outside the LSA team at 0 and
// names them; EnableGIN makes the device communicator, which Close destroys
// before the window it reaches is deregistered.
func TestTransportGIN(t *testing.T) {
	root := fakeHome(t)
	calls := callLog(t)
	reqs := devCommRequirements(t)
	t.Setenv("FAKE_NCCL_GIN", "2")
	tr, err := NewTransport(&gatherer{rank: 1, size: 3, root: root}, false, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Window() != (Window{}) || tr.GINPeers() != nil {
		t.Errorf("before Alloc: window %v, GIN peers %v; want none", tr.Window(), tr.GINPeers())
	}
	local, peers, err := tr.AllocWith(1<<16, AllocOptions{AllowGIN: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{0, local, 0}; !slices.Equal(peers, want) {
		t.Errorf("peers %#x; want %#x", peers, want)
	}
	if got := tr.GINPeers(); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("GINPeers() = %v; want [0 2]", got)
	}
	if tr.Window().Handle() == 0 {
		t.Error("Window().Handle() = 0 after Alloc")
	}
	dev, err := tr.EnableGIN(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := reqs(); len(got) != 1 || got[0] != wantRequirements("2") {
		t.Errorf("requirements %q; want %q", got, wantRequirements("2"))
	}
	if b := dev.Bytes(); len(b) != DevCommBytes || b[8] != 1 {
		t.Errorf("device communicator %x; want the stand-in's for rank 1", b)
	}
	if want := "NCCL 2.30.7 symmetric window (LSA load/store, proxy GIN)"; tr.Name() != want {
		t.Errorf("Name() = %q; want %q", tr.Name(), want)
	}
	if _, err := tr.EnableGIN(2); err == nil {
		t.Error("a second EnableGIN succeeded")
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"ncclCommInitRankConfig", "ncclMemAlloc", "ncclCommWindowRegister", "ncclDevCommCreate",
		"ncclDevCommDestroy", "ncclCommWindowDeregister", "ncclMemFree", "ncclCommFinalize", "ncclCommDestroy"}
	if got := calls(); !slices.Equal(got, want) {
		t.Errorf("calls %v; want %v", got, want)
	}
}

// EnableGIN refuses, on every rank, a GIN or a library the kernels cannot
// use, and reports another rank's failure.
func TestTransportGINRefusals(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		g       *gatherer
		noAlloc bool // EnableGIN before Alloc
		want    string
		is      error
		calls   []string // the calls of EnableGIN and Close; by default those of a refusal before NCCL is asked
	}{
		{name: "no GIN", env: map[string]string{"FAKE_NCCL_GIN": "0"}, is: ErrGINUnsupported,
			want: "NCCL found no GIN backend (GIN type none): a network with GPU-initiated RDMA, or an RMA plugin through NCCL_RMA_PLUGIN, is needed (docs/MULTINODE.md)"},
		{name: "GDAKI", env: map[string]string{"FAKE_NCCL_GIN": "3"}, is: ErrGINUnsupported,
			want: "NCCL's GIN here is GDAKI, and epbench's GIN kernels are built for NCCL's proxy GIN only (NCCL_GIN_TYPE=2 asks NCCL for it)"},
		{name: "NCCL 2.31.0", env: map[string]string{"FAKE_NCCL_VERSION": "23100"}, is: ErrGINUnsupported,
			want: "found NCCL 2.31.0 at "},
		{name: "NCCL 2.30.6", env: map[string]string{"FAKE_NCCL_VERSION": "23006"}, is: ErrGINUnsupported,
			want: "NCCL 2.30.7 or a later 2.30 release is needed"},
		{name: "before Alloc", noAlloc: true, want: "NCCL transport: GIN enabled before Alloc"},
		{name: "another rank refused", g: &gatherer{rank: 0, size: 3, other: failing(4, 2)},
			want: "NCCL transport: rank 2 could not use NCCL's GIN"},
		{name: "another rank's creation failed", g: &gatherer{rank: 0, size: 3, other: failing(5, 1)},
			calls: []string{"ncclDevCommCreate", "ncclDevCommDestroy", "ncclCommWindowDeregister", "ncclMemFree", "ncclCommFinalize", "ncclCommDestroy"},
			want:  "NCCL transport: rank 1 could not create its NCCL device communicator"},
		{name: "creation failed", env: map[string]string{"FAKE_NCCL_DEVCOMM_ASYNC": "3", "FAKE_NCCL_DEVCOMM_ERROR": "GIN is disabled."},
			want:  "NCCL device communicator with GIN: ncclDevCommCreate: fake: internal error (GIN is disabled.)",
			calls: []string{"ncclDevCommCreate", "ncclCommAbort", "ncclMemFree"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := c.g
			if g == nil {
				g = &gatherer{rank: 0, size: 2}
			}
			g.root = fakeHome(t)
			calls := callLog(t)
			t.Setenv("FAKE_NCCL_GIN", "2")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			tr, err := NewTransport(g, false, testTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if !c.noAlloc {
				if _, _, err := tr.AllocWith(1<<16, AllocOptions{AllowGIN: true}); err != nil {
					t.Fatal(err)
				}
			}
			_, err = tr.EnableGIN(4)
			if cerr := tr.Close(); cerr != nil {
				t.Errorf("Close after the refusal: %v", cerr)
			}
			switch {
			case err == nil:
				t.Fatal("no error")
			case c.is != nil && !errors.Is(err, c.is):
				t.Errorf("error %v, want %v", err, c.is)
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			want := []string{"ncclCommInitRankConfig"}
			if !c.noAlloc {
				want = append(want, "ncclMemAlloc", "ncclCommWindowRegister")
			}
			switch {
			case c.calls != nil:
				want = append(want, c.calls...)
			case c.noAlloc:
				want = append(want, "ncclCommFinalize", "ncclCommDestroy")
			default:
				want = append(want, "ncclCommWindowDeregister", "ncclMemFree", "ncclCommFinalize", "ncclCommDestroy")
			}
			if got := calls(); !slices.Equal(got, want) {
				t.Errorf("calls %v; want %v", got, want)
			}
		})
	}
}

func TestTransportOutsideLSA(t *testing.T) {
	root := fakeHome(t)
	for _, c := range []struct {
		teams string
		want  bool
	}{{"1", false}, {"2", true}, {"4", true}} {
		t.Setenv("FAKE_NCCL_LSA_TEAMS", c.teams)
		tr, err := NewTransport(&gatherer{rank: 0, size: 2, root: root}, false, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.OutsideLSA()
		if err != nil || got != c.want {
			t.Errorf("%s LSA teams: OutsideLSA() = %v, %v; want %v", c.teams, got, err, c.want)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
