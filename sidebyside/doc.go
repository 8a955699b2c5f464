// Package sidebyside is "epbench compare --run": it runs the same low-latency
// problem (tokens, hidden size, top-k, experts, warm-up and timed
// iterations, layout, dispatch format) on several expert-parallel
// benchmarks, one after the other, and prints their summaries in one
// normalised table (report.WriteCompare).
//
// Each benchmark is a Program: it checks that it can run the problem and
// names the executable every rank runs. The launch around it is shared:
// mpirun with one slot per GPU on each node, a temporary hostfile for
// several nodes, HPC-X's environment when one is installed, and the
// variables every rank needs forwarded with -x. Commands are argv lists run
// without a shell; the free-form values that reach mpirun or a hostfile
// (host and interface names) are checked against a strict pattern first.
//
// A program that exits non-zero, or prints no summary, is reported with its
// exit code and the last lines of its stderr, and left out of the table;
// the command then fails with a runtime error after printing the others.
package sidebyside
