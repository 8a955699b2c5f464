package nccl

// #include "api.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/epbench/epbench/internal/dl"
)

// EnvHome names the environment variable that points Load at an NCCL
// install or build: the library is taken from its lib/.
const EnvHome = "NCCL_HOME"

// soname is the name the dynamic loader is asked for when EnvHome is unset.
const soname = "libnccl.so.2"

// homeNames are the files tried, in order, in $NCCL_HOME/lib.
var homeNames = []string{"libnccl.so.2", "libnccl.so"}

// Lib is a loaded libnccl. Its methods, and those of the Comms it makes, are
// not safe for concurrent use: make them from the goroutine that holds the
// CUDA context, locked to its OS thread, as NCCL expects the CUDA device of
// the calling thread to be the communicator's.
type Lib struct {
	Path    string  // the library file, as the loader resolved it
	Version Version // what ncclGetVersion reports

	code   int         // the raw ncclGetVersion code
	handle *dl.Library // nil once closed
	api    C.ep_nccl_api
	comms  int // communicators made and not yet destroyed or aborted
}

// Load finds libnccl and loads it with LoadFrom. When NCCL_HOME is set, it
// tries $NCCL_HOME/lib/libnccl.so.2, then $NCCL_HOME/lib/libnccl.so, and
// nothing else; otherwise it asks the dynamic loader for libnccl.so.2
// (LD_LIBRARY_PATH, then the system library paths). Failing to find one
// wraps ErrNotFound.
func Load() (*Lib, error) {
	return load(os.Getenv(EnvHome), soname)
}

// load is Load with the environment and the loader's name given.
func load(home, loaderName string) (*Lib, error) {
	if home != "" {
		dir := filepath.Join(home, "lib")
		for _, name := range homeNames {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err == nil {
				return LoadFrom(p)
			}
		}
		return nil, fmt.Errorf("%w: %s=%s has neither lib/%s nor lib/%s (point %s at an NCCL install or build, or unset it to search LD_LIBRARY_PATH and the system library paths; %s)",
			ErrNotFound, EnvHome, home, homeNames[0], homeNames[1], EnvHome, buildHint)
	}
	l, err := LoadFrom(loaderName)
	var oe *openError
	if errors.As(err, &oe) {
		return nil, fmt.Errorf("%w: the dynamic loader could not open %s from LD_LIBRARY_PATH or the system library paths (%s); set %s to an NCCL install or build (its lib/ holds %s), or add that lib/ to LD_LIBRARY_PATH; %s",
			ErrNotFound, loaderName, oe.msg, EnvHome, soname, buildHint)
	}
	return l, err
}

// openError: dlopen refused the library; it wraps ErrNotFound.
type openError struct{ name, msg string }

func (e *openError) Error() string {
	if strings.Contains(e.msg, e.name) {
		return fmt.Sprintf("%v: %s", ErrNotFound, e.msg)
	}
	return fmt.Sprintf("%v: %s: %s", ErrNotFound, e.name, e.msg)
}
func (e *openError) Unwrap() error { return ErrNotFound }

// LoadFrom loads the library at path (or, for a name without a slash, the
// one the dynamic loader finds), checks that it is MinVersion or newer
// (else a *VersionError) and resolves every entry point epbench calls (else
// ErrMissingSymbol, naming them). A library refused is closed again; one
// accepted stays mapped for the life of the process, even after Close,
// because NCCL keeps process-wide state that can outlive its communicators.
func LoadFrom(path string) (*Lib, error) {
	h, err := dl.Open(path)
	if err != nil {
		return nil, &openError{name: path, msg: err.Error()}
	}
	l := &Lib{Path: path, handle: h}
	if err := l.bind(); err != nil {
		if cerr := h.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("nccl: closing %s: %w", l.Path, cerr))
		}
		return nil, err
	}
	if err := dl.Pin(path); err != nil {
		return nil, errors.Join(fmt.Errorf("nccl: keeping %s loaded: %w", l.Path, err), h.Close())
	}
	return l, nil
}

// bind reads the version first, so that an old library is named as such
// rather than by the entry points it lacks, then resolves the rest.
func (l *Lib) bind() error {
	sym := func(name string) unsafe.Pointer {
		p, _ := l.handle.Symbol(name) // nil: absent, reported by name below
		return p
	}
	gv := sym("ncclGetVersion")
	if gv == nil {
		return fmt.Errorf("%w: %s has no ncclGetVersion", ErrMissingSymbol, l.Path)
	}
	if p := dl.Path(gv); p != "" {
		l.Path = p
	}
	l.api.get_error_string = sym("ncclGetErrorString")
	var code C.int
	if rc := C.ep_nccl_get_version(gv, &code); rc != C.EP_NCCL_SUCCESS {
		return l.check("ncclGetVersion", rc, &lastError{})
	}
	l.code = int(code)
	l.Version = ParseVersion(l.code)
	if l.Version.Less(MinVersion) {
		return &VersionError{Path: l.Path, Found: l.Version, Need: MinVersion}
	}
	l.api.get_version = gv
	table := []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"ncclGetUniqueId", &l.api.get_unique_id},
		{"ncclCommInitRankConfig", &l.api.comm_init_rank_config},
		{"ncclCommGetAsyncError", &l.api.comm_get_async_error},
		{"ncclCommFinalize", &l.api.comm_finalize},
		{"ncclCommDestroy", &l.api.comm_destroy},
		{"ncclCommAbort", &l.api.comm_abort},
		{"ncclMemAlloc", &l.api.mem_alloc},
		{"ncclMemFree", &l.api.mem_free},
		{"ncclCommWindowRegister", &l.api.window_register},
		{"ncclCommWindowDeregister", &l.api.window_deregister},
		{"ncclGetPeerDevicePointer", &l.api.peer_device_pointer},
		{"ncclGetErrorString", &l.api.get_error_string},
		{"ncclGetLastError", &l.api.get_last_error},
		{"ncclCommQueryProperties", &l.api.comm_query_properties},
		{"ncclDevCommCreate", &l.api.dev_comm_create},
		{"ncclDevCommDestroy", &l.api.dev_comm_destroy},
	}
	var missing []string
	for _, s := range table {
		if *s.dst = sym(s.name); *s.dst == nil {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (NCCL %s) has no %s", ErrMissingSymbol, l.Path, l.Version, strings.Join(missing, ", "))
	}
	return nil
}

// Close releases the library handle. It refuses (ErrInUse) while
// communicators made from l are not destroyed; calls after Close return
// ErrClosed. Closing twice is not an error.
func (l *Lib) Close() error {
	if l.handle == nil {
		return nil
	}
	if l.comms > 0 {
		return fmt.Errorf("%w: %d communicator(s) of %s not destroyed", ErrInUse, l.comms, l.Path)
	}
	h := l.handle
	l.handle = nil
	if err := h.Close(); err != nil {
		return fmt.Errorf("nccl: closing %s: %w", l.Path, err)
	}
	return nil
}

// layoutVersion is the version NCCL's versioned structs are passed in: the
// 2.30.7 layout declared in api.h, or the library's own version when that
// is older (NCCL refuses a layout newer than itself).
func (l *Lib) layoutVersion() C.uint {
	if l.code < C.EP_NCCL_LAYOUT_VERSION {
		return C.uint(l.code)
	}
	return C.EP_NCCL_LAYOUT_VERSION
}

func (l *Lib) open() error {
	if l == nil || l.handle == nil {
		return ErrClosed
	}
	return nil
}

// lastErrorLen bounds the ncclGetLastError text kept.
const lastErrorLen = 1024

// lastError receives ncclGetLastError's text from a failing call's wrapper.
type lastError [lastErrorLen]C.char

func (e *lastError) buf() (*C.char, C.size_t) { return &e[0], lastErrorLen }

// check turns the result of the NCCL function call into an *Error.
func (l *Lib) check(call string, rc C.int, last *lastError) error {
	if rc == C.EP_NCCL_SUCCESS {
		return nil
	}
	msg := C.GoString(C.ep_nccl_error_string(&l.api, rc))
	if msg == "" {
		msg = fmt.Sprintf("NCCL result %d", int(rc))
	}
	if s := strings.TrimSpace(C.GoString(&last[0])); s != "" {
		msg += " (" + s + ")"
	}
	return &Error{Call: call, Code: int(rc), Msg: msg}
}
