// Package dl opens shared libraries at run time (dlopen), for the optional
// native libraries epbench calls through function pointers: CUPTI and NCCL.
package dl

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"errors"
	"unsafe"
)

const msgLen = 4096

// Library is a shared library opened with dlopen(RTLD_NOW|RTLD_LOCAL).
type Library struct {
	handle unsafe.Pointer
}

// Open opens the library at path, or for a name without a slash the one
// the dynamic loader finds. The error is the loader's message.
func Open(name string) (*Library, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [msgLen]C.char
	h := C.ep_dl_open(cname, &msg[0], msgLen)
	if h == nil {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return &Library{handle: h}, nil
}

// Symbol returns the address of an exported symbol, or the loader's
// message when there is none.
func (l *Library) Symbol(name string) (unsafe.Pointer, error) {
	if l.handle == nil {
		return nil, errors.New("dl: library closed")
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [msgLen]C.char
	p := C.ep_dl_sym(l.handle, cname, &msg[0], msgLen)
	if p == nil {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return p, nil
}

// Close closes the library; closing twice is not an error.
func (l *Library) Close() error {
	if l.handle == nil {
		return nil
	}
	var msg [msgLen]C.char
	h := l.handle
	l.handle = nil
	if C.ep_dl_close(h, &msg[0], msgLen) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}

// Pin keeps the library opened as name mapped for the life of the process
// (RTLD_NODELETE), whatever Close does later.
func Pin(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [msgLen]C.char
	if C.ep_dl_pin(cname, &msg[0], msgLen) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}

// Path is the file that holds the symbol at sym, or "" when the loader
// cannot say.
func Path(sym unsafe.Pointer) string {
	var path [msgLen]C.char
	if C.ep_dl_path(sym, &path[0], msgLen) != 0 {
		return ""
	}
	return C.GoString(&path[0])
}
