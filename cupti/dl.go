package cupti

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

const goarch = runtime.GOARCH

const dlErrLen = 1024

// dlLibrary is a library opened with dlopen.
type dlLibrary struct {
	handle unsafe.Pointer
}

func dlOpen(name string) (library, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [dlErrLen]C.char
	h := C.ep_dl_open(cname, &msg[0], dlErrLen)
	if h == nil {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return &dlLibrary{handle: h}, nil
}

func (l *dlLibrary) Symbol(name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [dlErrLen]C.char
	p := C.ep_dl_sym(l.handle, cname, &msg[0], dlErrLen)
	if p == nil {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return p, nil
}

func (l *dlLibrary) Close() error {
	if l.handle == nil {
		return nil
	}
	var msg [dlErrLen]C.char
	if C.ep_dl_close(l.handle, &msg[0], dlErrLen) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	l.handle = nil
	return nil
}
