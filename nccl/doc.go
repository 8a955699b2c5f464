// Package nccl loads NVIDIA's libnccl at run time and wraps the few host
// calls epbench makes: communicator setup, ncclMemAlloc'd buffers registered
// as symmetric windows, the peer addresses of those windows that
// load/store kernels write through, and the device communicators that GIN
// kernels put through.
//
// # Loading
//
// Nothing links libnccl (or libcuda): Load opens it with dlopen and resolves
// its entry points with dlsym, so binaries and tests build and run on
// machines without NCCL. Load looks in $NCCL_HOME/lib (libnccl.so.2, then
// libnccl.so) when NCCL_HOME is set, and only there; otherwise it asks the
// dynamic loader for libnccl.so.2 (LD_LIBRARY_PATH, then the system library
// paths). LoadFrom takes a path. A library older than MinVersion gives a
// *VersionError; one lacking an entry point, ErrMissingSymbol; none found,
// ErrNotFound, with a message that says where Load looked and that
// scripts/nccl.sh builds one from an NCCL source tree.
//
// # Threads
//
// NCCL binds a communicator to the CUDA device current on the calling
// thread, and ncclMemAlloc allocates on it: call this package from the
// goroutine that owns the CUDA context, locked to its OS thread, and from
// no other. NCCL also keeps its last error text per thread; the C wrappers
// read it in the same call as the failing function, so an *Error carries it
// wherever Go runs next.
//
// # Lifecycle
//
//	lib, err := nccl.Load()
//	defer lib.Close()                         // after every Comm.Destroy
//	id := ...                                 // rank 0: lib.GetUniqueID(), sent over MPI
//	comm, err := lib.CommInitRank(nranks, id, rank, timeout)
//	defer comm.Destroy()
//	buf, err := lib.MemAlloc(size)
//	win, err := comm.RegisterWindow(buf, size)
//	peerBuf, err := lib.PeerPointer(win, 0, peer) // 0: peer not reachable by load/store
//	...
//	comm.DeregisterWindow(win); lib.MemFree(buf)
//
// A library once accepted stays mapped for the life of the process; Close
// only releases the handle.
//
// # GIN
//
// Peers outside the NVLink domain have no peer pointer; kernels reach them
// through GIN (GPU-initiated networking) with a device communicator:
//
//	dev, err := comm.CreateDevComm(contexts) // collective; after RegisterWindow
//	kernel parameters: dev.Bytes(), win.Handle()
//	dev.Destroy()                            // before DeregisterWindow
//
// The kernels are compiled against the device headers of NCCL
// GINHeadersVersion, so CreateDevComm asks for the device communicator in
// that version's layout and accepts only libraries of its minor release, at
// its patch or later. Transport.EnableGIN also wants NCCL's proxy GIN, the
// only kind the kernels are built for.
//
// # Timeouts
//
// NCCL waits without bound for the other ranks in its collective steps:
// creating the communicator, registering a window, creating a device
// communicator, finalizing. So the
// communicator is created non-blocking (ncclCommInitRankConfig with
// blocking = 0): NCCL runs those steps on a thread of its own, and this
// package polls ncclCommGetAsyncError for each until the timeout given to
// CommInitRank has passed. A step that fails, or does not complete in time
// (a *TimeoutError: most likely another rank failed or stalled in it),
// aborts the communicator with ncclCommAbort, which does not wait for
// other ranks.
package nccl
