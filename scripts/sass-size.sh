#!/usr/bin/env bash
# The machine code of the LL kernels, measured without a GPU: assembles each PTX module for sm_90 with ptxas and
# counts the SASS instructions (16 bytes each) of its entries with cuobjdump: the dispatch, the spread dispatch
# where the module has one (a launch runs one of the two), and the combine. A launch fetches its code again from
# the second level of the instruction caches (~110 KiB on an H200; the first level keeps 25–30 KiB, docs/PERF.md),
# so a kernel change's PERF entry gives the size it adds, and a change that adds much is known before it is timed.
# With -b, each module is compared with the same module in BASE (another build of the PTX, e.g. the committed one):
# the counts' difference, and whether the two machine codes are the same instruction for instruction (a kernel
# change that must leave other modules alone shows it there, whatever their PTX's register numbering).
# Usage: scripts/sass-size.sh [-b BASE] [DIR] [MODULE...]
#   DIR: a folder of ll_*.ptx (default kernels/ptx); MODULE: variant names (lines_lines_bf16_rlr, ...), default all;
#   -b BASE: a second folder of the same modules, printed beside; -h this help.
# Environment: PTXAS (default ptxas), CUOBJDUMP (default cuobjdump); both of a CUDA at least as new as the one that
# wrote the PTX (ptxas refuses a newer PTX ISA); compare only builds assembled by the same ptxas. Prints a markdown
# table: module, dispatch / spread dispatch / combine instructions (- for an entry it lacks), and the larger
# dispatch with the combine in KiB (what a dispatch and a combine launch run); with -b, BASE's and DIR's cells and
# the difference, ending in "same code" or "code differs". Exit 0 when every module was
# measured, 1 when a tool failed on one (FAIL in its row), 2 on bad usage.
set -uo pipefail

# shellcheck source=usage.sh
source "$(dirname "$0")/usage.sh"

base=
while getopts ":b:h" opt; do
	case $opt in
	b) base=$OPTARG ;;
	*) common_opt "$opt" ;;
	esac
done
shift $((OPTIND - 1))
dir=${1:-kernels/ptx}
[ $# -gt 0 ] && shift
[ -d "$dir" ] || usage "no folder $dir"
[ -z "$base" ] || [ -d "$base" ] || usage "no folder $base"
ptxas=${PTXAS:-ptxas}
cuobjdump=${CUOBJDUMP:-cuobjdump}
for tool in "$ptxas" "$cuobjdump"; do
	command -v "$tool" >/dev/null || usage "no $tool (set PTXAS and CUOBJDUMP)"
done

modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
	for f in "$dir"/ll_*.ptx; do
		[ -e "$f" ] || usage "no ll_*.ptx in $dir"
		m=${f##*/ll_}
		modules+=("${m%.ptx}")
	done
fi
for m in "${modules[@]}"; do
	[ -f "$dir/ll_$m.ptx" ] || usage "no module $m in $dir"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A line of an instruction's encoding half in cuobjdump's listing: /* 0x... */ at its end.
encoding='/\* 0x[0-9a-f]+ \*/[ \t]*$'
# sizes FILE: "DISPATCH SPREAD COMBINE" instruction counts of the module's entries (0: no spread dispatch), or
# nothing, the reason in $tmp/err, when a tool fails or an entry is missing.
sizes() {
	"$ptxas" -arch=sm_90 -o "$tmp/m.cubin" "$1" 2>"$tmp/err" || return 1
	"$cuobjdump" -sass "$tmp/m.cubin" 2>>"$tmp/err" >"$tmp/m.sass" || return 1
	# Every instruction has two 8-byte encoding halves, each /* 0x... */ at the end of its line (the first on the
	# line of the offset and the text, which some instructions print without).
	awk -v enc="$encoding" '/Function :/ { f = $NF }
		$0 ~ enc { n[f]++ }
		END {
			d = n["epbench_ll_dispatch"] / 2; s = n["epbench_ll_dispatch_spread"] / 2; c = n["epbench_ll_combine"] / 2
			if ((d > 0 || s > 0) && c > 0) print d, s, c
			else { print "no dispatch entry or no epbench_ll_combine in the listing" > "/dev/stderr"; exit 1 }
		}' "$tmp/m.sass" 2>>"$tmp/err"
}
# code FILE: the listing's functions and instructions (offset, text and encoding), without the lines around them.
code() { grep -E "Function :|$encoding" "$1"; }
kib() { awk -v n="$1" 'BEGIN { printf "%.1f", n * 16 / 1024 }'; }
# pair D S C: the larger dispatch with the combine.
pair() { if [ "$2" -gt "$1" ]; then echo $(($2 + $3)); else echo $(($1 + $3)); fi; }
# cell D S C: the counts (- for an entry the module lacks), the pair in KiB.
cell() {
	local d=$1 s=$2
	[ "$1" -eq 0 ] && d=-
	[ "$2" -eq 0 ] && s=-
	echo "$d / $s / $3 ($(kib "$(pair "$@")") KiB)"
}
why() { echo "FAIL: $(head -c 200 "$tmp/err" 2>/dev/null | tr '\n|' '  ')"; }

rc=0
if [ -n "$base" ]; then
	echo "| module | BASE $base | $dir | difference |"
	echo "|---|---|---|---|"
else
	echo "| module | dispatch / spread dispatch / combine instructions (larger dispatch with combine) |"
	echo "|---|---|"
fi
for m in "${modules[@]}"; do
	if ! s=$(sizes "$dir/ll_$m.ptx"); then
		if [ -n "$base" ]; then echo "| $m | | $(why) | |"; else echo "| $m | $(why) |"; fi
		rc=1
		continue
	fi
	read -r d sp c <<<"$s"
	if [ -z "$base" ]; then
		echo "| $m | $(cell "$d" "$sp" "$c") |"
		continue
	fi
	code "$tmp/m.sass" >"$tmp/dir.code"
	if ! s=$(sizes "$base/ll_$m.ptx"); then
		echo "| $m | $(why) | $(cell "$d" "$sp" "$c") | |"
		rc=1
		continue
	fi
	read -r bd bs bc <<<"$s"
	same="code differs"
	code "$tmp/m.sass" | cmp -s - "$tmp/dir.code" && same="same code"
	grow=$(($(pair "$d" "$sp" "$c") - $(pair "$bd" "$bs" "$bc")))
	printf '| %s | %s | %s | %+d / %+d / %+d (%+.1f KiB), %s |\n' "$m" "$(cell "$bd" "$bs" "$bc")" "$(cell "$d" "$sp" "$c")" \
		$((d - bd)) $((sp - bs)) $((c - bc)) "$(awk -v n="$grow" 'BEGIN { print n * 16 / 1024 }')" "$same"
done
exit $rc
