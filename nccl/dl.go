package nccl

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"errors"
	"unsafe"
)

const dlMsgLen = 4096

func dlOpen(name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [dlMsgLen]C.char
	h := C.ep_nccl_dl_open(cname, &msg[0], dlMsgLen)
	if h == nil {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	return h, nil
}

// dlSym returns nil when handle has no symbol name.
func dlSym(handle unsafe.Pointer, name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [dlMsgLen]C.char
	return C.ep_nccl_dl_sym(handle, cname, &msg[0], dlMsgLen)
}

func dlPin(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg [dlMsgLen]C.char
	if C.ep_nccl_dl_pin(cname, &msg[0], dlMsgLen) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}

// dlPath is the file that holds sym, or "" when the loader cannot say.
func dlPath(sym unsafe.Pointer) string {
	var path [dlMsgLen]C.char
	if C.ep_nccl_dl_path(sym, &path[0], dlMsgLen) != 0 {
		return ""
	}
	return C.GoString(&path[0])
}

func dlClose(handle unsafe.Pointer) error {
	var msg [dlMsgLen]C.char
	if C.ep_nccl_dl_close(handle, &msg[0], dlMsgLen) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}
