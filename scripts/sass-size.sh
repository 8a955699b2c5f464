#!/usr/bin/env bash
# The machine code of the LL kernels, measured without a GPU: assembles each PTX module for sm_90 with ptxas and
# counts the SASS instructions of its dispatch and combine entries (16 bytes each) with cuobjdump. A launch fetches
# its code again from the second level of the instruction caches (~110 KiB on an H200; the first level keeps
# 25–30 KiB, docs/PERF.md), so a kernel change's PERF entry gives the size it adds, and a change that adds much
# is known before it is timed. With -b, each module is compared with the same module in BASE (another build of
# the PTX, e.g. the committed one): its sizes, then the differences.
# Usage: scripts/sass-size.sh [-b BASE] [DIR] [MODULE...]
#   DIR: a folder of ll_*.ptx (default kernels/ptx); MODULE: variant names (lines_lines_bf16_rlr, ...), default all;
#   -b BASE: a second folder of the same modules, printed beside; -h this help.
# Environment: PTXAS (default ptxas), CUOBJDUMP (default cuobjdump); both must be of a CUDA at least as new as the
# one that wrote the PTX (ptxas refuses a newer PTX ISA). Prints a markdown table: module, dispatch and combine
# instructions, the pair in KiB. Exit 0 when every module was measured, 1 when a tool failed on one (FAIL in
# its row), 2 on bad usage.
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

modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
	for f in "$dir"/ll_*.ptx; do
		[ -e "$f" ] || usage "no ll_*.ptx in $dir"
		m=${f##*/ll_}
		modules+=("${m%.ptx}")
	done
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# sizes FILE: "DISPATCH COMBINE" instruction counts of the module, or nothing when a tool fails.
sizes() {
	"$ptxas" -arch=sm_90 -o "$tmp/m.cubin" "$1" 2>"$tmp/err" || return 1
	"$cuobjdump" -sass "$tmp/m.cubin" 2>>"$tmp/err" >"$tmp/m.sass" || return 1
	# An instruction line starts with its offset, /*0a30*/; the encoding's second half, on the next line, with /* 0x.
	awk '/Function :/ { f = $NF }
		/^[ \t]*\/\*[0-9a-f]+\*\// { if (f ~ /dispatch/) d++; else if (f ~ /combine/) c++ }
		END { if (d > 0 && c > 0) print d, c; else exit 1 }' "$tmp/m.sass"
}
kib() { awk -v n="$1" 'BEGIN { printf "%.1f", n * 16 / 1024 }'; }
cell() { echo "$1 / $2 ($(kib $(($1 + $2))) KiB)"; }

rc=0
if [ -n "$base" ]; then
	echo "| module | base: dispatch / combine (pair) | $dir: dispatch / combine (pair) | difference |"
	echo "|---|---|---|---|"
else
	echo "| module | dispatch / combine instructions (pair) |"
	echo "|---|---|"
fi
for m in "${modules[@]}"; do
	f=$dir/ll_$m.ptx
	if ! s=$(sizes "$f"); then
		echo "| $m | FAIL: $(head -c 200 "$tmp/err" 2>/dev/null | tr '\n|' '  ') |"
		rc=1
		continue
	fi
	read -r d c <<<"$s"
	if [ -z "$base" ]; then
		echo "| $m | $(cell "$d" "$c") |"
		continue
	fi
	if ! s=$(sizes "$base/ll_$m.ptx"); then
		echo "| $m | FAIL: $(head -c 200 "$tmp/err" 2>/dev/null | tr '\n|' '  ') | $(cell "$d" "$c") | |"
		rc=1
		continue
	fi
	read -r bd bc <<<"$s"
	printf '| %s | %s | %s | %+d / %+d (%+.1f KiB) |\n' "$m" "$(cell "$bd" "$bc")" "$(cell "$d" "$c")" \
		$((d - bd)) $((c - bc)) "$(awk -v n=$((d + c - bd - bc)) 'BEGIN { print n * 16 / 1024 }')"
done
exit $rc
