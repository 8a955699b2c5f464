package nccl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Variants of testdata/fakenccl.c.
const (
	fakeFull = "full" // every entry point
	fakeOld  = "old"  // no ncclGetPeerDevicePointer, like libraries before 2.30
)

var fakeFlags = map[string][]string{fakeFull: nil, fakeOld: {"-DFAKE_NCCL_NO_PEER_POINTER"}}

// fakeEnv lists every variable the stand-in reads.
var fakeEnv = []string{
	"FAKE_NCCL_VERSION", "FAKE_NCCL_INIT_RESULT", "FAKE_NCCL_INIT_ERROR", "FAKE_NCCL_LSA_PEERS", "FAKE_NCCL_NO_SYMMETRIC",
	"FAKE_NCCL_GIN", "FAKE_NCCL_RAILED_GIN", "FAKE_NCCL_LSA_TEAMS", "FAKE_NCCL_MULTIMEM", "FAKE_NCCL_HOST_RMA",
	"FAKE_NCCL_INIT_POLLS", "FAKE_NCCL_INIT_ASYNC", "FAKE_NCCL_REGISTER_POLLS", "FAKE_NCCL_REGISTER_ASYNC",
	"FAKE_NCCL_REGISTER_ERROR", "FAKE_NCCL_FINALIZE_POLLS", "FAKE_NCCL_FINALIZE_ASYNC", "FAKE_NCCL_FINALIZE_ERROR",
	"FAKE_NCCL_DEVCOMM_POLLS", "FAKE_NCCL_DEVCOMM_ASYNC", "FAKE_NCCL_DEVCOMM_ERROR", "FAKE_NCCL_DEVCOMM_LOG",
	"FAKE_NCCL_DEVCOMM_SIZE", "FAKE_NCCL_LOG",
}

// The variants are compiled once per test binary; each test loads its own
// copy, so no two tests share a loaded library.
var fakeBuild struct {
	once sync.Once
	dir  string
	skip string // why there is nothing to build with
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeBuild.dir != "" {
		_ = os.RemoveAll(fakeBuild.dir)
	}
	os.Exit(code)
}

func buildFakes() {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		fakeBuild.skip = "SKIP: no C compiler (" + cc + ") to build the stand-in libnccl: " + err.Error()
		return
	}
	dir, err := os.MkdirTemp("", "epbench-fakenccl-")
	if err != nil {
		fakeBuild.err = err
		return
	}
	fakeBuild.dir = dir
	for variant, flags := range fakeFlags {
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, variant+".so")}, flags...)
		args = append(args, filepath.Join("testdata", "fakenccl.c"))
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			fakeBuild.err, fakeBuild.out = err, out
			return
		}
	}
}

// resetFake builds the stand-in if need be and clears its environment and
// NCCL_HOME for the test.
func resetFake(t *testing.T) {
	t.Helper()
	fakeBuild.once.Do(buildFakes)
	if fakeBuild.skip != "" {
		t.Skip(fakeBuild.skip)
	}
	if fakeBuild.err != nil {
		t.Fatalf("building the stand-in libnccl: %v\n%s", fakeBuild.err, fakeBuild.out)
	}
	for _, k := range fakeEnv {
		t.Setenv(k, "")
	}
	t.Setenv(EnvHome, "")
}

// installFake copies a variant of the stand-in to home/lib/name in a fresh
// directory, returning home and the library's path; see resetFake.
func installFake(t *testing.T, variant, name string) (home, path string) {
	t.Helper()
	resetFake(t)
	home = t.TempDir()
	path = filepath.Join(home, "lib", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	so, err := os.ReadFile(filepath.Join(fakeBuild.dir, variant+".so"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, so, 0o755); err != nil {
		t.Fatal(err)
	}
	return home, path
}

// loadFake loads a fresh copy of the full stand-in, closed at the end of the
// test.
func loadFake(t *testing.T) *Lib {
	t.Helper()
	return loadFakeVersion(t, "")
}

// loadFakeVersion is loadFake of a stand-in whose ncclGetVersion reports
// code ("": its own, 2.30.7).
func loadFakeVersion(t *testing.T, code string) *Lib {
	t.Helper()
	_, path := installFake(t, fakeFull, "libnccl.so.2")
	t.Setenv("FAKE_NCCL_VERSION", code)
	l, err := LoadFrom(path)
	if err != nil {
		t.Fatalf("LoadFrom(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// callLog has the stand-in log its calls to a fresh file and returns what it
// logged so far: the NCCL functions that created or released a
// communicator, window or buffer, in order.
func callLog(t *testing.T) func() []string {
	t.Helper()
	return fakeLog(t, "FAKE_NCCL_LOG", strings.Fields)
}

// fakeLog points the stand-in's log env at a fresh file and returns a
// reader of what it logged so far, split by split (nil before anything).
func fakeLog(t *testing.T, env string, split func(string) []string) func() []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	t.Setenv(env, path)
	return func() []string {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return split(string(b))
	}
}
