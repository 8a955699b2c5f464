// Package mpi is a thin binding to the MPI C API (Open MPI) with what the
// benchmark needs to coordinate its ranks: start-up and shutdown, the world
// and node-local communicators, barriers, broadcast, allgather, alltoallv,
// the reductions behind its cross-rank statistics (sum, min, max, and
// MINLOC/MAXLOC to name the rank that holds an extreme), MPI_Wtime, and
// non-blocking point-to-point messages and barriers that can be waited on
// with a deadline, so a stuck run reports which peers never arrived, and an
// Alltoallv with a deadline (Exchange) whose requests are reused, so a
// steady loop of exchanges does not allocate.
//
// # Threads
//
// Init asks for MPI_THREAD_FUNNELED: every MPI call must come from the
// thread that called Init. Go schedules goroutines on any thread, so the
// caller locks its goroutine first and makes all calls from it:
//
//	runtime.LockOSThread()
//	if err := mpi.Init(); err != nil { ... }
//	defer mpi.Finalize()
//
// The package keeps no locks; it is not safe for concurrent use.
//
// # Errors
//
// No MPI call happens before Init: calls made earlier return
// ErrNotInitialized, and calls after Finalize return ErrFinalized. World and
// every communicator created here use MPI_ERRORS_RETURN, so a failing MPI
// call returns an error wrapping *Error (code, class and MPI's message)
// instead of aborting the job. Arguments Go can check (buffer lengths,
// counts, displacements) are checked before MPI is called.
//
// # Buffers
//
// Blocking calls use Go memory only for the duration of the call.
// Non-blocking ones pin their buffer until Test or Wait reports completion;
// see Request.
//
// # Tests
//
// "go test ./mpi" runs the test binary again under "mpirun -np 2" and
// "mpirun -np 4 --oversubscribe", where the tests run on every rank. Set
// EPBENCH_NO_MPIRUN=1 to run only the tests that need no MPI job when
// mpirun is not installed.
package mpi
