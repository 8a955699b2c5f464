package gpu

// #include <stdlib.h>
// #include "driver.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Module is a loaded PTX module.
type Module uint64

// LoadModule JIT-compiles PTX text for the current context.
func LoadModule(ptx []byte) (Module, error) {
	img := C.CString(string(ptx))
	defer C.free(unsafe.Pointer(img))
	const logSize = 8192
	log := (*C.char)(C.malloc(logSize))
	defer C.free(unsafe.Pointer(log))
	var m C.uint64_t
	if err := check("cuModuleLoadDataEx", C.ep_module_load(img, &m, log, logSize)); err != nil {
		if msg := C.GoString(log); msg != "" {
			return 0, fmt.Errorf("%w: %s", err, msg)
		}
		return 0, err
	}
	return Module(m), nil
}

// Unload releases the module.
func (m Module) Unload() error { return check("cuModuleUnload", C.ep_module_unload(C.uint64_t(m))) }

// Function is a kernel entry point.
type Function uint64

// Function looks an entry point up by name.
func (m Module) Function(name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uint64_t
	if err := check("cuModuleGetFunction("+name+")", C.ep_module_function(C.uint64_t(m), cname, &f)); err != nil {
		return 0, err
	}
	return Function(f), nil
}

// Global is the device address and size of a module-scope __device__
// variable.
func (m Module) Global(name string) (uint64, int, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.uint64_t
	var n C.size_t
	if err := check("cuModuleGetGlobal("+name+")", C.ep_module_global(C.uint64_t(m), cname, &p, &n)); err != nil {
		return 0, 0, err
	}
	return uint64(p), int(n), nil
}

// ParamBlock is C memory holding one kernel's by-value argument block, so a
// launch allocates nothing and hands the driver no Go pointer.
type ParamBlock struct {
	p    unsafe.Pointer
	size int
}

// NewParamBlock allocates size bytes of C memory.
func NewParamBlock(size int) *ParamBlock {
	return &ParamBlock{p: C.calloc(1, C.size_t(size)), size: size}
}

// Bytes is the block as a Go slice over the C memory.
func (b *ParamBlock) Bytes() []byte { return unsafe.Slice((*byte)(b.p), b.size) }

// Free releases the block.
func (b *ParamBlock) Free() {
	if b != nil && b.p != nil {
		C.free(b.p)
		b.p = nil
	}
}

// Launch enqueues f on s with grid×block threads and the argument block.
func (f Function) Launch(grid, block, smem int, s Stream, args *ParamBlock) error {
	return check("cuLaunchKernel", C.ep_launch(C.uint64_t(f), C.uint(grid), C.uint(block), C.uint(smem), s.handle(), args.p))
}

// Occupancy is how many blocks of f, of block threads and smem bytes of
// dynamic shared memory, fit on one SM at once.
func (f Function) Occupancy(block, smem int) (int, error) {
	var n C.int
	err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.ep_occupancy(C.uint64_t(f), C.uint(block), C.uint(smem), &n))
	return int(n), err
}

// Graph is an executable CUDA graph of one kernel launch.
type Graph uint64

// Capture records the launch Launch would make as a CUDA graph on s (the
// argument block is copied into the graph), instantiates it and uploads it
// to s.
func (f Function) Capture(grid, block, smem int, s Stream, args *ParamBlock) (Graph, error) {
	var g C.uint64_t
	err := check("capturing a CUDA graph", C.ep_graph_capture(C.uint64_t(f), C.uint(grid), C.uint(block), C.uint(smem),
		s.handle(), args.p, &g))
	return Graph(g), err
}

// Launch enqueues the graph on s.
func (g Graph) Launch(s Stream) error {
	return check("cuGraphLaunch", C.ep_graph_launch(C.uint64_t(g), s.handle()))
}

// Destroy releases the graph.
func (g Graph) Destroy() error { return check("cuGraphExecDestroy", C.ep_graph_destroy(C.uint64_t(g))) }
