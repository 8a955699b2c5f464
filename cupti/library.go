package cupti

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/epbench/epbench/internal/dl"
)

// EnvLibrary names the environment variable holding the path of the CUPTI
// library to use. When set, it is the only library tried.
const EnvLibrary = "EPBENCH_CUPTI_LIB"

// library is an opened shared library: the seam between the loading logic
// and dlopen, so the former is tested with a fake.
type library interface {
	// Symbol returns the address of an exported symbol.
	Symbol(name string) (unsafe.Pointer, error)
	Close() error
}

// openFunc opens a shared library by path or by loader name.
type openFunc func(name string) (library, error)

// finder searches for the CUPTI library.
type finder struct {
	getenv func(string) string
	exists func(path string) bool
	open   openFunc
	goarch string
}

func systemFinder() finder {
	return finder{
		getenv: os.Getenv,
		exists: func(p string) bool { _, err := os.Stat(p); return err == nil },
		open:   dlOpen,
		goarch: runtime.GOARCH,
	}
}

// dlOpen opens a library with dlopen. A failure returns a nil library, not
// a nil *dl.Library inside the interface.
func dlOpen(name string) (library, error) {
	l, err := dl.Open(name)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// File names tried in each toolkit directory: the unversioned link a toolkit
// installs first (it names the toolkit's own CUPTI), then the sonames.
var dirNames = []string{"libcupti.so", "libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8"}

// Names handed to the loader last (LD_LIBRARY_PATH, ld.so.cache, distro
// paths); the unversioned link exists only in development installs.
var loaderNames = []string{"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8", "libcupti.so"}

// dirs are the toolkit directories searched, in order.
func (f finder) dirs() []string {
	roots := []string{}
	if h := f.getenv("CUDA_HOME"); h != "" {
		roots = append(roots, filepath.Clean(h))
	}
	if len(roots) == 0 || roots[0] != "/usr/local/cuda" {
		roots = append(roots, "/usr/local/cuda")
	}
	var target string
	switch f.goarch {
	case "amd64":
		target = "x86_64-linux"
	case "arm64":
		target = "sbsa-linux"
	}
	var dirs []string
	for _, r := range roots {
		dirs = append(dirs, filepath.Join(r, "extras", "CUPTI", "lib64"))
		if target != "" {
			dirs = append(dirs, filepath.Join(r, "targets", target, "lib"))
		}
		dirs = append(dirs, filepath.Join(r, "lib64"))
	}
	return dirs
}

// find opens the first CUPTI library found and returns it with the path or
// name it was opened by.
func (f finder) find() (library, string, error) {
	if p := f.getenv(EnvLibrary); p != "" {
		lib, err := f.open(p)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %s=%s: %v", ErrLibraryNotFound, EnvLibrary, p, err)
		}
		return lib, p, nil
	}
	var tried []string
	for _, dir := range f.dirs() {
		present := false
		for _, name := range dirNames {
			p := filepath.Join(dir, name)
			if !f.exists(p) {
				continue
			}
			present = true
			lib, err := f.open(p)
			if err == nil {
				return lib, p, nil
			}
			tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
		}
		if !present {
			tried = append(tried, filepath.Join(dir, "libcupti.so*")+" (absent)")
		}
	}
	for _, name := range loaderNames {
		lib, err := f.open(name)
		if err == nil {
			return lib, name, nil
		}
		tried = append(tried, fmt.Sprintf("%s via the loader (%v)", name, err))
	}
	return nil, "", fmt.Errorf("%w (set %s to its path); tried: %s", ErrLibraryNotFound, EnvLibrary, strings.Join(tried, "; "))
}

// entryPoints are the resolved CUPTI functions.
type entryPoints struct {
	registerCallbacks, enable, disable, flushAll, nextRecord, dropped, version unsafe.Pointer
	resultString, errorMessage, timestamp                                      unsafe.Pointer // optional
}

// resolve looks every entry point up in lib, which was opened as path.
func resolve(lib library, path string) (entryPoints, error) {
	var ep entryPoints
	table := []struct {
		name     string
		dst      *unsafe.Pointer
		optional bool
	}{
		{"cuptiActivityRegisterCallbacks", &ep.registerCallbacks, false},
		{"cuptiActivityEnable", &ep.enable, false},
		{"cuptiActivityDisable", &ep.disable, false},
		{"cuptiActivityFlushAll", &ep.flushAll, false},
		{"cuptiActivityGetNextRecord", &ep.nextRecord, false},
		{"cuptiActivityGetNumDroppedRecords", &ep.dropped, false},
		{"cuptiGetVersion", &ep.version, false},
		{"cuptiGetResultString", &ep.resultString, true},
		{"cuptiGetErrorMessage", &ep.errorMessage, true},
		{"cuptiGetTimestamp", &ep.timestamp, true},
	}
	var missing []string
	for _, s := range table {
		p, err := lib.Symbol(s.name)
		switch {
		case err == nil && p != nil:
			*s.dst = p
		case !s.optional:
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return entryPoints{}, fmt.Errorf("%w: %s has no %s", ErrMissingSymbol, path, strings.Join(missing, ", "))
	}
	return ep, nil
}

// load finds the library and resolves its entry points. A library that
// lacks them is closed again.
func (f finder) load() (entryPoints, string, error) {
	lib, path, err := f.find()
	if err != nil {
		return entryPoints{}, "", err
	}
	ep, err := resolve(lib, path)
	if err != nil {
		if cerr := lib.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return entryPoints{}, "", err
	}
	// A resolved library is never closed: CUPTI keeps threads and callbacks
	// that outlive any collector.
	return ep, path, nil
}
