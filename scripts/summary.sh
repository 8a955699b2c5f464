# shellcheck shell=bash
# Sourced by scripts/alternate.sh and scripts/gpu-check.sh: numbers read from
# an epbench summary (the text the benchmark prints, ep_bench's format), and
# the benchmark's kernel-timer notes gathered from a gpu-check log.

# kernel_avg FILE PHASE: the kernel timer's average of PHASE (Dispatch or
# Combine) in FILE's "Kernel-only performance" block (us), or nothing.
kernel_avg() {
	sed -n '/^--- Kernel-only performance ---/,/^$/p' "$1" | sed -n "s/^$2: *avg=\([0-9.]*\) us.*/\1/p" | head -1
}

# host_avg FILE: the host's D+C average (us), or nothing.
host_avg() {
	sed -n 's/^Total (D+C): *avg=\([0-9.]*\).*/\1/p' "$1" | head -1
}

# timer_notes LOG [MAX]: how many kernel-timer doubts ("epbench: kernel
# timer: ...", printed by the benchmark) LOG holds, then the first MAX
# (default 5), each after the name of the run that printed it (the last
# "### NAME: command" line above it, as scripts/gpu-check.sh writes them).
timer_notes() {
	local max=${2:-5}
	echo "kernel timer notes: $(grep -c 'epbench: kernel timer:' "$1") (grep 'kernel timer:' $1)"
	awk -v max="$max" '
	/^### / { run = $0; sub(/^### /, "", run); sub(/: .*$/, "", run) }
	/epbench: kernel timer:/ {
		if (++n > max) next
		note = $0
		sub(/^.*epbench: kernel timer: ?/, "", note)
		print "  " (run == "" ? "(before any run)" : run) ": " note
	}' "$1"
}
