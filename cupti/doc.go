// Package cupti is the in-process CUPTI activity collector behind the
// kernel-only timings: it measures, on the device, how long the dispatch and
// combine kernels of the timed loop ran, like the KernelTimer of NCCL-EP's
// ep_bench.
//
// # Loading
//
// CUPTI is optional. Nothing is linked against it: Open finds the library at
// run time and resolves its entry points with dlsym, so a binary without
// CUPTI runs and reports why kernel timing is off. The search order is
//
//  1. $EPBENCH_CUPTI_LIB, a path; when set it is the only library tried;
//  2. $CUDA_HOME, then /usr/local/cuda, each in extras/CUPTI/lib64,
//     targets/x86_64-linux/lib (sbsa-linux on arm64) and lib64, trying
//     libcupti.so, then libcupti.so.13, .12 and .11.8 in each;
//  3. libcupti.so.13, .12, .11.8 and libcupti.so through the dynamic loader
//     (LD_LIBRARY_PATH, ld.so.cache).
//
// Failure to find one wraps ErrLibraryNotFound and lists what was tried; a
// library without CUPTI's entry points gives ErrMissingSymbol. A library
// once in use stays loaded for the life of the process.
//
// # Lifecycle
//
//	c, err := cupti.Open()  // once per process, after the CUDA context exists
//	defer c.Close()
//	c.Arm()                 // enables kernel records until Close
//	... warm-up, device sync ...
//	c.Start()               // clears the aggregates; earlier kernels left out
//	... barrier, timed loop ...
//	... device sync ...
//	d, cmb, err := c.Stop(dispatches, combines)
//
// Records are of CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which keeps kernels
// concurrent (the KERNEL kind would serialize them, and the EP kernels spin
// on their peers; KindEnv selects it for studying the timer). Arm enables
// them before the warm-up, so that a window can start without enabling or
// flushing anything: the first kernel launched after a forced flush is held
// up by milliseconds (2.5-5 ms on H200 with CUDA 13.0), and in the first
// timed pair the other ranks' kernels spun that long inside their windows.
// An armed window leaves out the records of kernels that started before it
// (by cuptiGetTimestamp), which its end's flush delivers along with its own.
// Without Arm, Start enables and Stop disables. Stop forces a flush of every
// buffer, and returns the mean time per kernel instance of the
// kernels whose names contain
// "dispatch" and of those containing "combine" (kernels.DispatchKernel and
// kernels.CombineKernel). A name containing both counts in both classes,
// as in ep_bench, and then trips the count check. Stop refuses to return
// numbers when a class's record count differs from the launches made in the
// window, when CUPTI dropped records, or when records are incomplete because
// the device was not synchronized first. Aggregates lists every kernel name
// seen in the window, for diagnostics.
//
// Only one Collector may be open in a process: CUPTI's activity state is
// global, and up to CUDA 13.2 a process has one CUPTI subscriber, so the
// collector cannot run under nsys, ncu or compute-sanitizer (CUPTI calls
// then fail with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
//
// # Records
//
// CUPTI delivers records to C callbacks, possibly on its own threads. They
// are parsed in C into a fixed table of per-name counts and summed
// durations; Go never runs on that path. Only the kind, start, end and name
// fields of a kernel record are read, at offsets shared by
// CUpti_ActivityKernel3 through CUpti_ActivityKernel10 (CUDA 11.8 to 13), so a
// binary works with whichever of those CUPTI versions it meets; Open refuses
// versions older than CUDA 9.0. Those offsets are checked against the CUPTI
// headers at build time whenever a complete header set is on the include
// path.
package cupti
