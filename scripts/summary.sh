# shellcheck shell=bash
# Sourced by scripts/alternate.sh and scripts/gpu-check.sh: numbers read from
# an epbench summary (the text the benchmark prints, ep_bench's format), the
# benchmark's kernel-timer notes gathered from a gpu-check log, and the
# kernels' durations in a profiler's report.

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

# pair_floors CSV: the median duration of each kernel (name, without its
# parameters and spaces, and grid) in an
# `ncu --csv --page raw --metrics gpu__time_duration.sum` report, in us. The
# row under the header names the column's unit, which ncu scales to fit.
pair_floors() {
	awk -F'","' '
		BEGIN { ns = 1 }
		/"Kernel Name"/ {
			for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); col[h] = i }
			next
		}
		col["Kernel Name"] && $1 == "\"" {
			u = $col["gpu__time_duration.sum"]; gsub(/"/, "", u)
			ns = u == "second" ? 1e9 : u == "msecond" ? 1e6 : u == "usecond" ? 1e3 : 1
			next
		}
		col["Kernel Name"] && $1 ~ /^"[0-9]+$/ {
			k = $col["Kernel Name"]; sub(/\(.*/, "", k); sub(/^void /, "", k); gsub(/ /, "", k)
			g = $col["Grid Size"]; match(g, /[0-9]+/); g = substr(g, RSTART, RLENGTH)
			v = $col["gpu__time_duration.sum"]; gsub(/[",]/, "", v)
			printf "%s %s %.1f\n", k, g, v * ns
		}' "$1" | sort -k1,1 -k2,2n -k3,3n | awk '
		function flush() { if (n) printf "pair floor: %-16s %4d blocks: %.2f us (median of %d)\n", key, grid, v[int((n + 1) / 2)] / 1000, n }
		$1 != key || $2 != grid { flush(); key = $1; grid = $2; n = 0 }
		{ v[++n] = $3 }
		END { flush() }'
}
