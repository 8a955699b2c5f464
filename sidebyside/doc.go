// Package sidebyside is "epbench compare --run": it runs the same low-latency
// problem (tokens, hidden size, top-k, experts, warm-up and timed
// iterations, layout, dispatch format, combine mode, block count) on
// several expert-parallel benchmarks, one after the other, and prints their
// summaries in one normalised table (report.WriteCompare). It is the seed
// driver (run_ep_bench.py) in full: epbench, NCCL-EP's ep_bench, and
// MSCCL++'s Python (mscclpp) and C++ (mscclpp-cpp) benchmarks.
//
// Each benchmark is a Program: it checks that it can run the problem,
// finds its executable (its flag, else its name in PATH) and names the
// command every rank runs. The launch around it is shared: mpirun with one
// slot per GPU on each node, a temporary hostfile for several nodes, HPC-X's
// environment when one is installed, and the variables every rank needs
// forwarded with -x. A standalone program (mscclpp, through torchrun)
// launches its ranks itself. Commands are argv lists run without a shell;
// the free-form values that reach mpirun or a hostfile (host, interface and
// device names) are checked against a strict pattern first.
//
// A program that exits non-zero, or prints no summary, is reported with its
// exit code and the last lines of its stderr; one that printed a summary
// before failing stays in the table, marked, as the seed driver keeps it,
// the others are left out. The command then fails with a runtime error
// after printing the table.
package sidebyside
