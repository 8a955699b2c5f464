package nccl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadNCCLHome(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup lays out NCCL_HOME and returns it with the path Load must
		// take the library from ("" when it must fail).
		setup   func(t *testing.T) (home, want string)
		wantErr func(home string) string
	}{
		{
			name: "lib/libnccl.so.2",
			setup: func(t *testing.T) (string, string) {
				return installFake(t, fakeFull, "libnccl.so.2")
			},
		},
		{
			name: "lib/libnccl.so only",
			setup: func(t *testing.T) (string, string) {
				return installFake(t, fakeFull, "libnccl.so")
			},
		},
		{
			// The old library as libnccl.so would fail to load: libnccl.so.2 must be taken first.
			name: "libnccl.so.2 before libnccl.so",
			setup: func(t *testing.T) (string, string) {
				home, want := installFake(t, fakeFull, "libnccl.so.2")
				_, old := installFake(t, fakeOld, "libnccl.so")
				if err := os.Rename(old, filepath.Join(home, "lib", "libnccl.so")); err != nil {
					t.Fatal(err)
				}
				return home, want
			},
		},
		{
			name: "no library in NCCL_HOME",
			setup: func(t *testing.T) (string, string) {
				resetFake(t)
				return t.TempDir(), ""
			},
			wantErr: func(home string) string {
				return "nccl: libnccl not found: NCCL_HOME=" + home + " has neither lib/libnccl.so.2 nor lib/libnccl.so " +
					"(point NCCL_HOME at an NCCL install or build, or unset it to search LD_LIBRARY_PATH and the system library paths; " +
					"scripts/nccl.sh builds one from an NCCL source tree)"
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, want := tc.setup(t)
			t.Setenv(EnvHome, home)
			l, err := Load()
			if tc.wantErr != nil {
				if err == nil {
					_ = l.Close()
					t.Fatalf("Load with %s=%s took %s; want an error", EnvHome, home, l.Path)
				}
				if !errors.Is(err, ErrNotFound) || err.Error() != tc.wantErr(home) {
					t.Fatalf("Load error:\n %v\nwant ErrNotFound and\n %s", err, tc.wantErr(home))
				}
				return
			}
			if err != nil {
				t.Fatalf("Load with %s=%s: %v", EnvHome, home, err)
			}
			defer l.Close()
			if l.Path != want || l.Version != (Version{2, 30, 7}) {
				t.Fatalf("Load took %s, version %v; want %s, 2.30.7", l.Path, l.Version, want)
			}
		})
	}
}

func TestLoadNoLibrary(t *testing.T) {
	t.Setenv(EnvHome, "")
	for _, tc := range []struct {
		name, loaderName string
	}{
		{"the system", soname},
		{"a name no loader has", "libnccl-epbench-absent.so.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := load("", tc.loaderName)
			if err == nil {
				path := l.Path
				_ = l.Close()
				if tc.loaderName == soname {
					t.Skipf("SKIP: this machine has %s (%s), so there is no missing library to report", soname, path)
				}
				t.Fatalf("load(%q) took %s", tc.loaderName, path)
			}
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("error %v; want ErrNotFound", err)
			}
			prefix := "nccl: libnccl not found: the dynamic loader could not open " + tc.loaderName +
				" from LD_LIBRARY_PATH or the system library paths ("
			suffix := "); set NCCL_HOME to an NCCL install or build (its lib/ holds libnccl.so.2), or add that lib/ to LD_LIBRARY_PATH; " +
				"scripts/nccl.sh builds one from an NCCL source tree"
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, suffix) || !strings.Contains(msg, tc.loaderName+":") {
				t.Fatalf("error:\n %s\nwant\n %s<dlerror naming %s>%s", msg, prefix, tc.loaderName, suffix)
			}
		})
	}
}

func TestLoadThroughLoader(t *testing.T) {
	_, path := installFake(t, fakeFull, "libnccl.so.2")
	l, err := load("", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Path != path {
		t.Fatalf("Path = %s; want %s", l.Path, path)
	}
}

func TestLoadFromRefused(t *testing.T) {
	for _, tc := range []struct {
		name, variant, version string
		wantVersion            *VersionError // Path filled in by the test
		wantIs                 error
		wantMsg                func(path string) string
	}{
		{
			name: "2.28", variant: fakeFull, version: "22803",
			wantVersion: &VersionError{Found: Version{2, 28, 3}, Need: Version{2, 30, 0}},
			wantMsg: func(path string) string {
				return "nccl: found NCCL 2.28.3 at " + path + "; 2.30.0 or newer is needed (scripts/nccl.sh builds one from an NCCL source tree)"
			},
		},
		{
			name: "2.29.7", variant: fakeFull, version: "22907",
			wantVersion: &VersionError{Found: Version{2, 29, 7}, Need: Version{2, 30, 0}},
		},
		{
			name: "old-style code", variant: fakeFull, version: "2708",
			wantVersion: &VersionError{Found: Version{2, 7, 8}, Need: Version{2, 30, 0}},
			wantMsg: func(path string) string {
				return "nccl: found NCCL 2.7.8 at " + path + "; 2.30.0 or newer is needed (scripts/nccl.sh builds one from an NCCL source tree)"
			},
		},
		{
			// An old library is named by its version, not by what it lacks.
			name: "old library", variant: fakeOld, version: "22803",
			wantVersion: &VersionError{Found: Version{2, 28, 3}, Need: Version{2, 30, 0}},
		},
		{
			name: "missing symbol", variant: fakeOld,
			wantIs: ErrMissingSymbol,
			wantMsg: func(path string) string {
				return "nccl: library lacks NCCL entry points epbench calls: " + path + " (NCCL 2.30.7) has no ncclGetPeerDevicePointer"
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path := installFake(t, tc.variant, "libnccl.so.2")
			t.Setenv("FAKE_NCCL_VERSION", tc.version)
			l, err := LoadFrom(path)
			if err == nil {
				_ = l.Close()
				t.Fatalf("LoadFrom accepted %s (NCCL %v)", path, l.Version)
			}
			if tc.wantVersion != nil {
				want := *tc.wantVersion
				want.Path = path
				var ve *VersionError
				if !errors.As(err, &ve) || *ve != want {
					t.Fatalf("error %v; want %#v", err, want)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("error %v is not %v", err, tc.wantIs)
			}
			if tc.wantMsg != nil && err.Error() != tc.wantMsg(path) {
				t.Fatalf("error:\n %s\nwant\n %s", err, tc.wantMsg(path))
			}
		})
	}
}

func TestLoadFromAccepts2300(t *testing.T) {
	if l := loadFakeVersion(t, "23000"); l.Version != MinVersion {
		t.Fatalf("Version = %v; want %v", l.Version, MinVersion)
	}
}

func TestLoadFromNotALibrary(t *testing.T) {
	resetFake(t)
	home := t.TempDir()
	path := filepath.Join(home, "lib", "libnccl.so.2")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not an ELF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvHome, home)
	l, err := Load()
	if err == nil {
		_ = l.Close()
		t.Fatalf("Load took %s", path)
	}
	if !errors.Is(err, ErrNotFound) || !strings.HasPrefix(err.Error(), "nccl: libnccl not found: "+path+":") {
		t.Fatalf("error %v; want ErrNotFound naming %s", err, path)
	}
}

func TestCloseRefusesOpenComms(t *testing.T) {
	_, path := installFake(t, fakeFull, "libnccl.so.2")
	l, err := LoadFrom(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.CommInitRank(1, id, 0, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrInUse) {
		t.Fatalf("Close with a communicator open: %v; want ErrInUse", err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"GetUniqueID":  func() error { _, err := l.GetUniqueID(); return err },
		"CommInitRank": func() error { _, err := l.CommInitRank(1, id, 0, testTimeout); return err },
		"MemAlloc":     func() error { _, err := l.MemAlloc(4096); return err },
		"MemFree":      func() error { return l.MemFree(0) },
		"PeerPointer":  func() error { _, err := l.PeerPointer(Window{}, 0, 0); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v; want ErrClosed", name, err)
		}
	}
}
