package cupti

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// fakeLib is a library exporting the symbols listed in syms.
type fakeLib struct {
	name   string
	syms   map[string]bool
	closed bool
}

var fakeAddr byte

func (l *fakeLib) Symbol(name string) (unsafe.Pointer, error) {
	if !l.syms[name] {
		return nil, fmt.Errorf("%s: undefined symbol: %s", l.name, name)
	}
	return unsafe.Pointer(&fakeAddr), nil
}

func (l *fakeLib) Close() error { l.closed = true; return nil }

// fakeSystem is a file system and loader: files that exist, names the
// loader can open, and the order of the open calls.
type fakeSystem struct {
	env      map[string]string
	files    map[string]bool
	loadable map[string]*fakeLib
	opened   []string
}

func (s *fakeSystem) finder(goarch string) finder {
	return finder{
		getenv: func(k string) string { return s.env[k] },
		exists: func(p string) bool { return s.files[p] },
		open: func(name string) (library, error) {
			s.opened = append(s.opened, name)
			if l := s.loadable[name]; l != nil {
				return l, nil
			}
			return nil, fmt.Errorf("%s: cannot open shared object file", name)
		},
		goarch: goarch,
	}
}

func allSymbols(name string) *fakeLib {
	return &fakeLib{name: name, syms: map[string]bool{
		"cuptiActivityRegisterCallbacks": true, "cuptiActivityEnable": true, "cuptiActivityDisable": true,
		"cuptiActivityFlushAll": true, "cuptiActivityGetNextRecord": true,
		"cuptiActivityGetNumDroppedRecords": true, "cuptiGetVersion": true,
	}}
}

func TestSearchDirs(t *testing.T) {
	s := &fakeSystem{env: map[string]string{"CUDA_HOME": "/opt/cuda-13.0/"}}
	want := []string{
		"/opt/cuda-13.0/extras/CUPTI/lib64", "/opt/cuda-13.0/targets/x86_64-linux/lib", "/opt/cuda-13.0/lib64",
		"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64",
	}
	if got := s.finder("amd64").dirs(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dirs = %v\nwant   %v", got, want)
	}
	s.env["CUDA_HOME"] = "/usr/local/cuda"
	want = []string{"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/local/cuda/lib64"}
	if got := s.finder("arm64").dirs(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dirs with CUDA_HOME=/usr/local/cuda on arm64 = %v\nwant %v", got, want)
	}
}

func TestFindOrder(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		files    []string
		loadable []string
		want     string   // path returned
		opened   []string // open calls, in order
	}{
		{
			name:     "cuda home first",
			env:      map[string]string{"CUDA_HOME": "/opt/cuda"},
			files:    []string{"/opt/cuda/lib64/libcupti.so.12", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"},
			loadable: []string{"/opt/cuda/lib64/libcupti.so.12", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"},
			want:     "/opt/cuda/lib64/libcupti.so.12",
			opened:   []string{"/opt/cuda/lib64/libcupti.so.12"},
		},
		{
			name:     "unversioned link before sonames in a directory",
			files:    []string{"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so"},
			loadable: []string{"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so"},
			want:     "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
			opened:   []string{"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so"},
		},
		{
			name:     "unloadable file skipped",
			files:    []string{"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so.11.8"},
			loadable: []string{"/usr/local/cuda/lib64/libcupti.so.11.8"},
			want:     "/usr/local/cuda/lib64/libcupti.so.11.8",
			opened:   []string{"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib64/libcupti.so.11.8"},
		},
		{
			name:     "loader names last, newest first",
			loadable: []string{"libcupti.so.12", "libcupti.so"},
			want:     "libcupti.so.12",
			opened:   []string{"libcupti.so.13", "libcupti.so.12"},
		},
		{
			name:     "override is the only library tried",
			env:      map[string]string{EnvLibrary: "/x/libcupti.so", "CUDA_HOME": "/opt/cuda"},
			files:    []string{"/x/libcupti.so", "/opt/cuda/lib64/libcupti.so"},
			loadable: []string{"/x/libcupti.so", "/opt/cuda/lib64/libcupti.so"},
			want:     "/x/libcupti.so",
			opened:   []string{"/x/libcupti.so"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeSystem{env: tc.env, files: map[string]bool{}, loadable: map[string]*fakeLib{}}
			for _, f := range tc.files {
				s.files[f] = true
			}
			for _, l := range tc.loadable {
				s.loadable[l] = allSymbols(l)
			}
			_, path, err := s.finder("amd64").find()
			if err != nil {
				t.Fatal(err)
			}
			if path != tc.want {
				t.Errorf("found %s; want %s", path, tc.want)
			}
			if fmt.Sprint(s.opened) != fmt.Sprint(tc.opened) {
				t.Errorf("opened %v; want %v", s.opened, tc.opened)
			}
		})
	}
}

func TestFindNothing(t *testing.T) {
	s := &fakeSystem{
		env:   map[string]string{"CUDA_HOME": "/opt/cuda"},
		files: map[string]bool{"/opt/cuda/lib64/libcupti.so": true},
	}
	_, _, err := s.finder("amd64").find()
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("error %v; want ErrLibraryNotFound", err)
	}
	want := "cupti: CUPTI library not found (set EPBENCH_CUPTI_LIB to its path); tried: " +
		"/opt/cuda/extras/CUPTI/lib64/libcupti.so* (absent); " +
		"/opt/cuda/targets/x86_64-linux/lib/libcupti.so* (absent); " +
		"/opt/cuda/lib64/libcupti.so (/opt/cuda/lib64/libcupti.so: cannot open shared object file); " +
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so* (absent); " +
		"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so* (absent); " +
		"/usr/local/cuda/lib64/libcupti.so* (absent); " +
		"libcupti.so.13 via the loader (libcupti.so.13: cannot open shared object file); " +
		"libcupti.so.12 via the loader (libcupti.so.12: cannot open shared object file); " +
		"libcupti.so.11.8 via the loader (libcupti.so.11.8: cannot open shared object file); " +
		"libcupti.so via the loader (libcupti.so: cannot open shared object file)"
	if err.Error() != want {
		t.Fatalf("error\n%s\nwant\n%s", err, want)
	}
}

func TestLoadMissingSymbols(t *testing.T) {
	lib := allSymbols("/x/libcupti.so")
	delete(lib.syms, "cuptiActivityEnable")
	delete(lib.syms, "cuptiGetVersion")
	s := &fakeSystem{env: map[string]string{EnvLibrary: "/x/libcupti.so"}, loadable: map[string]*fakeLib{"/x/libcupti.so": lib}}
	_, _, err := s.finder("amd64").load()
	if !errors.Is(err, ErrMissingSymbol) {
		t.Fatalf("error %v; want ErrMissingSymbol", err)
	}
	if want := "/x/libcupti.so has no cuptiActivityEnable, cuptiGetVersion"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	if !lib.closed {
		t.Fatal("library without the entry points left open")
	}
}

func TestLoadOptionalSymbols(t *testing.T) {
	lib := allSymbols("/x/libcupti.so") // no cuptiGetResultString, cuptiGetErrorMessage
	s := &fakeSystem{env: map[string]string{EnvLibrary: "/x/libcupti.so"}, loadable: map[string]*fakeLib{"/x/libcupti.so": lib}}
	ep, path, err := s.finder("amd64").load()
	if err != nil {
		t.Fatal(err)
	}
	if path != "/x/libcupti.so" || ep.enable == nil || ep.version == nil || ep.resultString != nil || ep.errorMessage != nil {
		t.Fatalf("load = %+v, %s", ep, path)
	}
	if lib.closed {
		t.Fatal("loaded library closed")
	}
}

// The tests below go through the real dlopen.

func TestOpenOverrideMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libcupti.so.13")
	t.Setenv(EnvLibrary, p)
	c, err := Open()
	if err == nil {
		_ = c.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("error %v; want ErrLibraryNotFound", err)
	}
	want := "cupti: CUPTI library not found: EPBENCH_CUPTI_LIB=" + p + ": " + p + ": cannot open shared object file"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error\n%s\ndoes not start with\n%s", err, want)
	}
}

func TestOpenOverrideNotCUPTI(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs glibc's libm.so.6")
	}
	libm := ""
	for _, p := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6", "/lib64/libm.so.6"} {
		if _, err := os.Stat(p); err == nil {
			libm = p
			break
		}
	}
	if libm == "" {
		t.Skip("SKIP: no libm.so.6 found to stand in for a library that is not CUPTI")
	}
	t.Setenv(EnvLibrary, libm)
	c, err := Open()
	if err == nil {
		_ = c.Close()
		t.Fatal("Open succeeded on libm")
	}
	if !errors.Is(err, ErrMissingSymbol) {
		t.Fatalf("error %v; want ErrMissingSymbol", err)
	}
	want := "cupti: library lacks CUPTI entry points: " + libm + " has no cuptiActivityRegisterCallbacks, cuptiActivityEnable, " +
		"cuptiActivityDisable, cuptiActivityFlushAll, cuptiActivityGetNextRecord, cuptiActivityGetNumDroppedRecords, cuptiGetVersion"
	if err.Error() != want {
		t.Fatalf("error\n%s\nwant\n%s", err, want)
	}
}

func TestOpenWithoutCUPTI(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	t.Setenv("CUDA_HOME", t.TempDir())
	c, err := Open()
	if err == nil {
		path := c.Path()
		_ = c.Close()
		t.Skipf("SKIP: a CUPTI library is installed (%s); this test needs a machine without one", path)
	}
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("error %v; want ErrLibraryNotFound", err)
	}
	for _, s := range []string{"extras/CUPTI/lib64/libcupti.so* (absent)", "libcupti.so.13 via the loader", "set EPBENCH_CUPTI_LIB"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
