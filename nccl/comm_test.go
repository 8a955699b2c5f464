package nccl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const windowBytes = 1 << 20

// testTimeout bounds the NCCL steps of tests in which none stalls.
const testTimeout = time.Minute

// fakePeerBase is where the stand-in puts reachable peers' buffers.
const fakePeerBase = 1 << 40

func TestCommWindowLifecycle(t *testing.T) {
	l := loadFake(t)
	t.Setenv("FAKE_NCCL_GIN", "3")
	t.Setenv("FAKE_NCCL_RAILED_GIN", "2")
	t.Setenv("FAKE_NCCL_LSA_TEAMS", "2")
	t.Setenv("FAKE_NCCL_MULTIMEM", "1")
	t.Setenv("FAKE_NCCL_HOST_RMA", "1")

	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatalf("GetUniqueID: %v", err)
	}
	if !strings.HasPrefix(string(id[:]), "fakenccl-id\x00") {
		t.Fatalf("GetUniqueID = %q...; want the stand-in's id", id[:16])
	}
	const nranks, rank = 4, 2
	c, err := l.CommInitRank(nranks, id, rank, testTimeout)
	if err != nil {
		t.Fatalf("CommInitRank: %v", err)
	}
	props, err := c.Properties()
	if err != nil {
		t.Fatalf("Properties: %v", err)
	}
	want := Properties{Rank: rank, NRanks: nranks, CUDADev: rank, NVMLDev: rank + 100, DeviceAPI: true, Multimem: true,
		GIN: GINGDAKI, RailedGIN: GINProxy, LSATeams: 2, HostRMA: true}
	if props != want {
		t.Fatalf("Properties = %+v; want %+v", props, want)
	}

	buf, err := l.MemAlloc(windowBytes)
	if err != nil {
		t.Fatalf("MemAlloc: %v", err)
	}
	if buf == 0 || buf%4096 != 0 {
		t.Fatalf("MemAlloc = %#x; want a 4096-byte aligned address", buf)
	}
	w, err := c.RegisterWindow(buf, windowBytes)
	if err != nil {
		t.Fatalf("RegisterWindow: %v", err)
	}
	for _, tc := range []struct {
		lsa          string
		offset, peer int
		want         uint64
	}{
		{"", 256, rank, buf + 256},
		{"", 256, 0, 0},
		{"", 0, nranks - 1, 0},
		{"all", 256, rank, buf + 256},
		{"all", 256, 0, fakePeerBase + 256},
		{"all", windowBytes - 1, 3, 4*fakePeerBase + windowBytes - 1},
	} {
		t.Setenv("FAKE_NCCL_LSA_PEERS", tc.lsa)
		got, err := l.PeerPointer(w, int64(tc.offset), tc.peer)
		if err != nil || got != tc.want {
			t.Errorf("PeerPointer(offset %d, peer %d) with LSA peers %q = %#x, %v; want %#x", tc.offset, tc.peer, tc.lsa, got, err, tc.want)
		}
	}
	if err := c.DeregisterWindow(w); err != nil {
		t.Fatalf("DeregisterWindow: %v", err)
	}
	if err := l.MemFree(buf); err != nil {
		t.Fatalf("MemFree: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if _, err := c.Properties(); !errors.Is(err, ErrDestroyed) {
		t.Fatalf("Properties after Destroy: %v; want ErrDestroyed", err)
	}
	if _, err := c.RegisterWindow(buf, windowBytes); !errors.Is(err, ErrDestroyed) {
		t.Fatalf("RegisterWindow after Destroy: %v; want ErrDestroyed", err)
	}
}

// The properties struct is passed in the 2.30.7 layout, or the library's
// own when older: the stand-in, like NCCL, refuses a layout newer than
// itself.
func TestPropertiesLayoutVersion(t *testing.T) {
	for _, version := range []string{"23000", "23003", "23007", "23107", "30000"} {
		t.Run(version, func(t *testing.T) {
			c := initComm(t, loadFakeVersion(t, version), 2, 1)
			props, err := c.Properties()
			if err != nil || props.Rank != 1 || props.NRanks != 2 {
				t.Fatalf("Properties = %+v, %v; want rank 1 of 2", props, err)
			}
		})
	}
}

// initComm makes a communicator destroyed at the end of the test.
func initComm(t *testing.T, l *Lib, nranks, rank int) *Comm {
	t.Helper()
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.CommInitRank(nranks, id, rank, testTimeout)
	if err != nil {
		t.Fatalf("CommInitRank: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return c
}

// window registers a buffer of windowBytes, deregistered and freed at the
// end of the test (before the communicator is destroyed).
func window(t *testing.T, l *Lib, c *Comm) (uint64, Window) {
	t.Helper()
	buf, err := l.MemAlloc(windowBytes)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.RegisterWindow(buf, windowBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.DeregisterWindow(w); err != nil {
			t.Errorf("DeregisterWindow: %v", err)
		}
		if err := l.MemFree(buf); err != nil {
			t.Errorf("MemFree: %v", err)
		}
	})
	return buf, w
}

func TestCallErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		call func(t *testing.T, l *Lib) error
		// want's Msg may hold %#x, filled with the address call returns through addr.
		want Error
	}{
		{
			name: "init fails with a last error",
			env:  map[string]string{"FAKE_NCCL_INIT_RESULT": "2", "FAKE_NCCL_INIT_ERROR": "bootstrap: connection to rank 0 refused"},
			call: initRank(0),
			want: Error{"ncclCommInitRankConfig", 2, "fake: system error (bootstrap: connection to rank 0 refused)"},
		},
		{
			name: "init fails without a last error",
			env:  map[string]string{"FAKE_NCCL_INIT_RESULT": "6"},
			call: initRank(0),
			want: Error{"ncclCommInitRankConfig", 6, "fake: remote error"},
		},
		{
			name: "init fails while in progress",
			env: map[string]string{"FAKE_NCCL_INIT_POLLS": "2", "FAKE_NCCL_INIT_ASYNC": "6",
				"FAKE_NCCL_INIT_ERROR": "bootstrap: rank 1 closed the connection"},
			call: initRank(0),
			want: Error{"ncclCommInitRankConfig", 6, "fake: remote error (bootstrap: rank 1 closed the connection)"},
		},
		{
			name: "registration fails while in progress",
			env: map[string]string{"FAKE_NCCL_REGISTER_POLLS": "1", "FAKE_NCCL_REGISTER_ASYNC": "2",
				"FAKE_NCCL_REGISTER_ERROR": "proxy: connection to rank 1 lost"},
			call: func(t *testing.T, l *Lib) error {
				c := initComm(t, l, 2, 0)
				buf, err := l.MemAlloc(windowBytes)
				if err != nil {
					t.Fatal(err)
				}
				defer l.MemFree(buf)
				_, err = c.RegisterWindow(buf, windowBytes)
				return err
			},
			want: Error{"ncclCommWindowRegister", 2, "fake: system error (proxy: connection to rank 1 lost)"},
		},
		{
			name: "device communicator fails while in progress",
			env: map[string]string{"FAKE_NCCL_DEVCOMM_POLLS": "1", "FAKE_NCCL_DEVCOMM_ASYNC": "3",
				"FAKE_NCCL_DEVCOMM_ERROR": "GIN is disabled."},
			call: func(t *testing.T, l *Lib) error {
				_, err := initComm(t, l, 2, 0).CreateDevComm(4)
				return err
			},
			want: Error{"ncclDevCommCreate", 3, "fake: internal error (GIN is disabled.)"},
		},
		{
			name: "rank out of range",
			call: initRank(5),
			want: Error{"ncclCommInitRankConfig", 4, "fake: invalid argument (fake: rank 5 of 2 ranks)"},
		},
		{
			name: "unique id not made by the library",
			call: func(t *testing.T, l *Lib) error {
				_, err := l.CommInitRank(2, UniqueID{}, 0, testTimeout)
				return err
			},
			want: Error{"ncclCommInitRankConfig", 4, "fake: invalid argument (fake: unique id not from ncclGetUniqueId)"},
		},
		{
			name: "window base not aligned",
			call: func(t *testing.T, l *Lib) error {
				c := initComm(t, l, 2, 0)
				buf, _ := window(t, l, c)
				_, err := c.RegisterWindow(buf+64, 4096)
				return fixAddr(err, buf+64)
			},
			want: Error{"ncclCommWindowRegister", 4, "fake: invalid argument (fake: window base %#x is not 4096-byte aligned)"},
		},
		{
			name: "peer out of range",
			call: func(t *testing.T, l *Lib) error {
				c := initComm(t, l, 4, 0)
				_, w := window(t, l, c)
				_, err := l.PeerPointer(w, 0, 9)
				return err
			},
			want: Error{"ncclGetPeerDevicePointer", 4, "fake: invalid argument (fake: peer 9 of 4 ranks)"},
		},
		{
			name: "offset past the window",
			call: func(t *testing.T, l *Lib) error {
				c := initComm(t, l, 4, 0)
				_, w := window(t, l, c)
				_, err := l.PeerPointer(w, windowBytes, 1)
				return err
			},
			want: Error{"ncclGetPeerDevicePointer", 4, fmt.Sprintf("fake: invalid argument (fake: offset %d past the %d-byte window)", windowBytes, windowBytes)},
		},
		{
			name: "deregistering another communicator's window",
			call: func(t *testing.T, l *Lib) error {
				a, b := initComm(t, l, 2, 0), initComm(t, l, 2, 1)
				_, w := window(t, l, a)
				return b.DeregisterWindow(w)
			},
			want: Error{"ncclCommWindowDeregister", 4, "fake: invalid argument (fake: window of another communicator)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := loadFake(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := tc.call(t, l)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v; want an *Error", err)
			}
			if *e != tc.want {
				t.Fatalf("error %#v; want %#v", *e, tc.want)
			}
			if got, want := err.Error(), tc.want.Call+": "+tc.want.Msg; got != want {
				t.Fatalf("message %q; want %q", got, want)
			}
		})
	}
}

// initRank is a call of TestCallErrors: rank's CommInitRank of 2 ranks.
func initRank(rank int) func(*testing.T, *Lib) error {
	return func(t *testing.T, l *Lib) error {
		id, _ := l.GetUniqueID()
		_, err := l.CommInitRank(2, id, rank, testTimeout)
		return err
	}
}

// fixAddr puts %#x back for addr in an *Error's Msg, so a table can state a
// message that holds an address known only at run time.
func fixAddr(err error, addr uint64) error {
	var e *Error
	if errors.As(err, &e) {
		e.Msg = strings.Replace(e.Msg, fmt.Sprintf("%#x", addr), "%#x", 1)
	}
	return err
}

func TestGoSideChecks(t *testing.T) {
	l := loadFake(t)
	c := initComm(t, l, 2, 0)
	if _, err := l.MemAlloc(0); err == nil {
		t.Error("MemAlloc(0) succeeded")
	}
	if _, err := c.RegisterWindow(0, 0); err == nil {
		t.Error("RegisterWindow of 0 bytes succeeded")
	}
	if _, err := l.PeerPointer(Window{}, 0, 0); !errors.Is(err, ErrNoWindow) {
		t.Errorf("PeerPointer of a zero Window: %v; want ErrNoWindow", err)
	}
	if err := c.DeregisterWindow(Window{}); !errors.Is(err, ErrNoWindow) {
		t.Errorf("DeregisterWindow of a zero Window: %v; want ErrNoWindow", err)
	}
	_, w := window(t, l, c)
	if _, err := l.PeerPointer(w, -1, 0); err == nil {
		t.Error("PeerPointer at offset -1 succeeded")
	}
}

// Without symmetric memory NCCL registers no window and says success: the
// caller gets ErrNoSymmetricMemory, not a zero window to fail on later.
func TestNoSymmetricMemory(t *testing.T) {
	l := loadFake(t)
	c := initComm(t, l, 2, 0)
	buf, err := l.MemAlloc(windowBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.MemFree(buf); err != nil {
			t.Error(err)
		}
	}()
	t.Setenv("FAKE_NCCL_NO_SYMMETRIC", "1")
	w, err := c.RegisterWindow(buf, windowBytes)
	if !errors.Is(err, ErrNoSymmetricMemory) || w != (Window{}) {
		t.Fatalf("RegisterWindow without symmetric memory: %v, %v; want ErrNoSymmetricMemory and no window", w, err)
	}
}

// Steps that complete only after some polls are waited for, with or without
// a bound: the stand-in refuses a communicator used before its step
// completed, and writes the window only when the registration completes.
func TestStepsInProgress(t *testing.T) {
	for _, timeout := range []time.Duration{testTimeout, 0} {
		t.Run(fmt.Sprint(timeout), func(t *testing.T) {
			l := loadFake(t)
			calls := callLog(t)
			t.Setenv("FAKE_NCCL_INIT_POLLS", "3")
			t.Setenv("FAKE_NCCL_REGISTER_POLLS", "2")
			t.Setenv("FAKE_NCCL_FINALIZE_POLLS", "2")
			id, err := l.GetUniqueID()
			if err != nil {
				t.Fatal(err)
			}
			c, err := l.CommInitRank(2, id, 1, timeout)
			if err != nil {
				t.Fatalf("CommInitRank: %v", err)
			}
			buf, err := l.MemAlloc(windowBytes)
			if err != nil {
				t.Fatal(err)
			}
			w, err := c.RegisterWindow(buf, windowBytes)
			if err != nil {
				t.Fatalf("RegisterWindow: %v", err)
			}
			if p, err := l.PeerPointer(w, 0, 1); err != nil || p != buf {
				t.Fatalf("PeerPointer of the own rank = %#x, %v; want %#x", p, err, buf)
			}
			if err := c.DeregisterWindow(w); err != nil {
				t.Fatalf("DeregisterWindow: %v", err)
			}
			if err := l.MemFree(buf); err != nil {
				t.Fatal(err)
			}
			if err := c.Destroy(); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			want := []string{"ncclCommInitRankConfig", "ncclMemAlloc", "ncclCommWindowRegister", "ncclCommWindowDeregister",
				"ncclMemFree", "ncclCommFinalize", "ncclCommDestroy"}
			if got := calls(); !slices.Equal(got, want) {
				t.Fatalf("calls %v; want %v", got, want)
			}
		})
	}
}

// A step that another rank never joins is given up after the timeout and
// the communicator aborted, so that no rank waits in NCCL forever.
func TestStalledStepsTimeOut(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		step, call string // the stand-in's name of the step that stalls, and the NCCL call that started it
		// run makes the step stall; it runs on a goroutine of its own.
		run  func(t *testing.T, l *Lib, id UniqueID) error
		want []string // the calls logged
	}{
		{
			step: "INIT", call: "ncclCommInitRankConfig",
			run: func(t *testing.T, l *Lib, id UniqueID) error {
				_, err := l.CommInitRank(2, id, 0, timeout)
				return err
			},
			want: []string{"ncclCommInitRankConfig", "ncclCommAbort"},
		},
		{
			step: "REGISTER", call: "ncclCommWindowRegister",
			run: func(t *testing.T, l *Lib, id UniqueID) error {
				c, err := l.CommInitRank(2, id, 0, timeout)
				if err != nil {
					return err
				}
				buf, err := l.MemAlloc(windowBytes)
				if err != nil {
					return err
				}
				_, err = c.RegisterWindow(buf, windowBytes)
				if derr := c.Destroy(); derr != nil {
					t.Errorf("Destroy after the abort: %v", derr)
				}
				if ferr := l.MemFree(buf); ferr != nil {
					t.Error(ferr)
				}
				return err
			},
			want: []string{"ncclCommInitRankConfig", "ncclMemAlloc", "ncclCommWindowRegister", "ncclCommAbort", "ncclMemFree"},
		},
		{
			step: "DEVCOMM", call: "ncclDevCommCreate",
			run: func(t *testing.T, l *Lib, id UniqueID) error {
				c, err := l.CommInitRank(2, id, 0, timeout)
				if err != nil {
					return err
				}
				_, err = c.CreateDevComm(4)
				if derr := c.Destroy(); derr != nil {
					t.Errorf("Destroy after the abort: %v", derr)
				}
				return err
			},
			want: []string{"ncclCommInitRankConfig", "ncclDevCommCreate", "ncclCommAbort"},
		},
		{
			step: "FINALIZE", call: "ncclCommFinalize",
			run: func(t *testing.T, l *Lib, id UniqueID) error {
				c, err := l.CommInitRank(2, id, 0, timeout)
				if err != nil {
					return err
				}
				return c.Destroy()
			},
			want: []string{"ncclCommInitRankConfig", "ncclCommFinalize", "ncclCommAbort"},
		},
	} {
		t.Run(tc.step, func(t *testing.T) {
			l := loadFake(t)
			calls := callLog(t)
			t.Setenv("FAKE_NCCL_"+tc.step+"_POLLS", "forever")
			id, err := l.GetUniqueID()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = bounded(t, func() error { return tc.run(t, l, id) })
			if took := time.Since(start); took < timeout {
				t.Errorf("gave up after %v, before the %v timeout", took, timeout)
			}
			var te *TimeoutError
			if !errors.As(err, &te) || *te != (TimeoutError{Call: tc.call, After: timeout}) {
				t.Fatalf("error %v; want a *TimeoutError of %s after %v", err, tc.call, timeout)
			}
			want := tc.call + " did not complete within 100 ms (another rank probably failed or stalled in it); communicator aborted"
			if err.Error() != want || !te.PeerTimeout() {
				t.Errorf("error %q (PeerTimeout %v); want %q, a PeerTimeout", err, te.PeerTimeout(), want)
			}
			if got := calls(); !slices.Equal(got, tc.want) {
				t.Errorf("calls %v; want %v", got, tc.want)
			}
		})
	}
}

// bounded runs f on a goroutine and fails the test if it has not returned
// within a few seconds: a wait in NCCL that nothing bounds.
func bounded(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after 5 s: the NCCL step is not bounded")
		return nil
	}
}
