# shellcheck shell=bash
# Sourced by scripts/alternate.sh and scripts/gpu-check.sh: numbers read from
# an epbench summary (the text the benchmark prints, ep_bench's format).

# kernel_avg FILE PHASE: the kernel timer's average of PHASE (Dispatch or
# Combine) in FILE's "Kernel-only performance" block (us), or nothing.
kernel_avg() {
	sed -n '/^--- Kernel-only performance ---/,/^$/p' "$1" | sed -n "s/^$2: *avg=\([0-9.]*\) us.*/\1/p" | head -1
}

# host_avg FILE: the host's D+C average (us), or nothing.
host_avg() {
	sed -n 's/^Total (D+C): *avg=\([0-9.]*\).*/\1/p' "$1" | head -1
}
