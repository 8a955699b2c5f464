#!/usr/bin/env bash
# Summarizes Nsight Compute's per-instruction warp-stall sampling of a kernel, as docs/PERF.md reads it (kernels
# v42): for each kernel in each file, its samples and warps and its stall reasons' shares of the samples; then the
# same for its path to its first barrier (every instruction up to the first executed BAR.SYNC): the instructions a
# warp executes there, their share of the kernel's samples, their reasons, and the constant-bank reads that waited
# on the immediate constant cache (offset: samples), in the order the code reaches them. Where the kernel executed
# local-memory instructions (LDL, STL: spilled registers, arrays the compiler keeps in memory), it also prints how
# many, and the stack slots ([R1+offset]) it loaded that no executed store of the launch wrote, with how many warps
# loaded each (and, where a narrower store wrote part of the load, how many of its bytes were not): a load of such
# a slot most likely misses L1, and a wait on it stands in the middle of the code (kernels v45 in docs/PERF.md).
# A CSV is the source page of a report taken with per-instruction sampling, e.g.
#   mpirun -np 1 ncu --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 \
#       -k regex:'epbench_ll_dispatch$' --launch-skip 20 --launch-count 1 -o disp bin/epbench --no-kernel-timing -w 3 -i 30
#   ncu --import disp.ncu-rep --page source --csv --print-source sass > disp.csv
# Needs no GPU. The shares count, not times: the profiler runs the kernel at its own clocks.
# Usage: scripts/stalls.sh [-n TOP] CSV...
#   -n the stall reasons to print per line, largest first (default 8), -h this help.
# Exit 0, 1 when a file is not such a CSV (the others are still read), 2 on bad usage.
set -uo pipefail

# shellcheck source=usage.sh
source "$(dirname "$0")/usage.sh"

top=8
while getopts ":n:h" opt; do
	case $opt in
	n) top=$OPTARG ;;
	*) common_opt "$opt" ;;
	esac
done
shift $((OPTIND - 1))
[[ $top =~ ^[1-9][0-9]*$ ]] || usage "-n takes a positive count, got '$top'"
[ $# -ge 1 ] || usage "no CSV named"

status=0
for f in "$@"; do
	if [ ! -f "$f" ] || [ ! -r "$f" ]; then
		echo "stalls: $f: not a readable file" >&2
		status=1
		continue
	fi
	# ncu quotes every field, and SASS text holds commas but never '","', so
	# the fields split on that; the first and last keep a quote (and the
	# kernel name row a trailing comma), trimmed below.
	awk -F '","' -v top="$top" '
	function clean(s) { gsub(/^"|",?$|"$/, "", s); return s }
	function num(s) { s = clean(s); return s == "" ? 0 : s + 0 }
	function pct(a, b) { return b > 0 ? sprintf("%.1f", 100 * a / b) : "0.0" }
	# shares R of total T over the reasons, the largest `top` first
	function shares(R, T,    n, i, j, k, t, names, out) {
		n = 0
		for (k in R) if (R[k] > 0) names[++n] = k
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (R[names[j]] > R[names[i]] || (R[names[j]] == R[names[i]] && names[j] < names[i])) {
					t = names[i]; names[i] = names[j]; names[j] = t
				}
		out = ""
		for (i = 1; i <= n && i <= top; i++) out = out (i > 1 ? ", " : "") names[i] " " pct(R[names[i]], T) " %"
		return out == "" ? "no samples" : out
	}
	function report() {
		if (kernel == "") return
		if (!rows) { printf "stalls: %s: kernel %s: no instructions under its header\n", FILENAME, kernel > "/dev/stderr"; bad = 1; return }
		printf "%s: %s: %d samples, %d warps\n", FILENAME, kernel, all, warps
		printf "  all: %s\n", shares(R, all)
		if (nld + nst > 0) printf "  local memory: %d loads and %d stores (warp instructions); %s\n", nld, nst, unwritten()
		if (bar < 0) { print "  no barrier executed"; return }
		printf "  to the first barrier (instruction %d): %.0f instructions a warp, %s %% of the samples: %s\n", \
			bar, (warps > 0 ? pex / warps : 0), pct(pall, all), shares(P, pall)
		printf "  constant-cache waits there: %s\n", (imc == "" ? "none" : imc)
	}
	function reset() {
		delete col; delete R; delete P; rows = 0; all = 0; pall = 0; pex = 0; warps = 0; bar = -1; imc = ""; inbody = 0
		delete wrote; delete ldoff; delete ldw; delete ldex; nld = 0; nst = 0; nl = 0
	}
	function hexval(h,    i, v) { v = 0; h = tolower(h); for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
	# The slots of the local loads that no executed store wrote (every byte
	# checked), in the order the code reaches them, with the warps that
	# loaded each; where the first such load of a slot had some of its
	# bytes written (a narrower store, then a wider load), how many were not.
	function unwritten(    i, b, off, miss, out, seen) {
		out = ""
		for (i = 1; i <= nl; i++) {
			off = ldoff[i]; miss = 0
			for (b = 0; b < ldw[i]; b++) if (!((off + b) in wrote)) miss++
			if (!miss) continue
			if (off in seen) { cnt[off] += ldex[i]; continue }
			seen[off] = 1; cnt[off] = ldex[i]; order[++no] = off
			part[off] = (miss < ldw[i] ? sprintf(" (%d of %d bytes)", miss, ldw[i]) : "")
		}
		for (i = 1; i <= no; i++) out = out (i > 1 ? ", " : "") sprintf("[R1+0x%x] %d%s", order[i], cnt[order[i]], part[order[i]])
		delete cnt; delete order; delete part; no = 0
		return out == "" ? "every slot loaded was written" : "loaded but never written: " out
	}
	BEGIN { kernel = ""; reset() }
	{ sub(/\r$/, "") }
	clean($1) == "Kernel Name" { report(); kernel = clean($2); seen = 1; reset(); next }
	kernel != "" && !inbody && clean($1) == "Address" {
		for (i = 1; i <= NF; i++) col[clean($i)] = i
		if (!("Source" in col) || !("Warp Stall Sampling (All Samples)" in col) || !("Instructions Executed" in col)) {
			printf "stalls: %s: kernel %s: the source page lacks the sampling columns (--section SourceCounters)\n", FILENAME, kernel > "/dev/stderr"
			bad = 1; kernel = ""; next
		}
		nr = 0
		for (c in col) if (c ~ /^stall_/ && c !~ /Not Issued/) reason[++nr] = c
		if (!nr) {
			printf "stalls: %s: kernel %s: the source page has no stall_* columns (--section SourceCounters)\n", FILENAME, kernel > "/dev/stderr"
			bad = 1; kernel = ""; next
		}
		inbody = 1; next
	}
	inbody && clean($1) == "Address" {
		printf "stalls: %s: kernel %s: a second header under one kernel name; not summarized\n", FILENAME, kernel > "/dev/stderr"
		bad = 1; kernel = ""; inbody = 0; next
	}
	inbody {
		src = clean($(col["Source"])); s = num($(col["Warp Stall Sampling (All Samples)"])); ex = num($(col["Instructions Executed"]))
		if (!rows) warps = ex
		if (ex > 0 && match(src, /(LDL|STL)(\.[A-Z0-9]+)*/)) {
			op = substr(src, RSTART, RLENGTH)
			w = 4
			if (op ~ /\.128/) w = 16; else if (op ~ /\.64/) w = 8; else if (op ~ /\.[US]16/) w = 2; else if (op ~ /\.[US]8/) w = 1
			off = -1
			if (match(src, /\[R1(\+0x[0-9a-fA-F]+)?\]/)) {
				a = substr(src, RSTART + 3, RLENGTH - 4)
				off = (a == "" ? 0 : hexval(substr(a, 4)))
			}
			if (op ~ /^STL/) {
				nst += ex
				if (off >= 0) for (b = 0; b < w; b++) wrote[off + b] = 1
			} else {
				nld += ex
				if (off >= 0) { ldoff[++nl] = off; ldw[nl] = w; ldex[nl] = ex }
			}
		}
		prologue = bar < 0
		all += s
		for (i = 1; i <= nr; i++) {
			v = num($(col[reason[i]])); name = substr(reason[i], 7)
			R[name] += v
			if (prologue) P[name] += v
		}
		if (prologue) {
			pall += s; pex += ex
			v = ("stall_imc" in col) ? num($(col["stall_imc"])) : 0
			if (v > 0 && match(src, /c\[0x[0-9a-f]+\]\[0x[0-9a-f]+\]/))
				imc = imc (imc == "" ? "" : ", ") substr(src, RSTART, RLENGTH) " " v
			if (src ~ /BAR\.SYNC/ && ex > 0) bar = rows
		}
		rows++
		next
	}
	END {
		report()
		if (!seen) { printf "stalls: %s: no kernel in it (ncu --page source --csv)\n", FILENAME > "/dev/stderr"; bad = 1 }
		exit bad
	}
	' "$f" || status=1
done
exit $status
