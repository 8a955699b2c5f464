#!/usr/bin/env bash
# Compiles kernels/ll.cu to PTX once per kernel variant listed in
# kernels/variants.txt (the one list, which kernels.Variants parses too; ll.cuh
# says what a variant fixes) into OUTDIR/ll_<name>.ptx, name being
# <dispatch>_<combine>_<bf16|fp8>_<rlr|ds|rm>, and stamps each file's first line
# with
#   // epbench-src-sha256: <hex>
# the sha256 over the sorted kernel sources (for each: its file name, a
# newline, its bytes) followed by "nvcc-flags: <flags>\n" and
# "variant: <defines>\n". kernels/ptx_test.go recomputes it, so CI (without
# nvcc) notices sources changed without new PTX, and checks that the files
# are exactly the variants the launcher can ask for. The second line,
#   // epbench-interface-sha256: <hex>
# stamps the interface between the host and the kernels: the sha256 over the
# text of ll.cuh, then of ll_gin.cuh, that the host mirrors: the argument
# blocks' declarations (LLArgs, GinArgs: from the "struct NAME {" line to
# the "};" line), every line that starts with "constexpr " (the modes,
# protocols, phases, limits), and every line that starts with
# "__host__ __device__ " to the line that closes that function's braces, or
# ends a declaration without a body in ";" (the message, slot and line
# sizes); each line without its // comment, blanks, tabs and carriage
# returns, and a newline after each file (interface_text below). A binary
# refuses PTX under --ptx-dir whose interface stamp is not its own: kernels
# built for another argument block, or other sizes, would read every field
# at the wrong offset or write past the buffers the host sized, and still
# run, their results and times meaningless.
# Usage: scripts/ptx.sh NVCC [OUTDIR [VARIANT...]]
#                               (OUTDIR defaults to kernels/ptx; VARIANTs,
#                                names from the list, build only those)
#        scripts/ptx.sh --defines       (prints each variant's file and nvcc
#                                        definitions, tab-separated; no nvcc)
#        scripts/ptx.sh --interface-stamp [DIR]  (prints the interface stamp of
#                                        DIR's ll.cuh and ll_gin.cuh, by default
#                                        kernels'; no nvcc)
#        scripts/ptx.sh --interface-text [DIR]   (prints the text it hashes)
# EPBENCH_BREAK=noparity|nofence|flagfirst builds the kernels with one
# ordering step broken on purpose (ll.cuh), for the tests that show that
# validation catches it: never into kernels/ptx, never embedded.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

# variant_defines NAME sets defines to the nvcc definitions of variant NAME,
# spelled as kernels.Variant.Defines prints them (the stamp hashes them):
# the dispatch and combine Proto* values (ll.cuh: fenced 0, inline 1,
# lines 2), EPBENCH_FP8 1 for fp8, EPBENCH_COMBINE_MODE (kMode*) 1 for ds,
# 2 for rm (the rank-major layout).
variant_defines() {
	local d c dt mode extra v name=$1 gin=
	local -a p
	case $name in nccl_*)
		gin=1
		name=${name#nccl_}
		;;
	esac
	IFS=_ read -r d c dt mode extra <<<"$name"
	if [ -n "$extra" ] || [ "${d}_${c}_${dt}_${mode}" != "$name" ]; then
		echo "ptx: variant $1: not <dispatch>_<combine>_<bf16|fp8>_<rlr|ds|rm>" >&2
		return 1
	fi
	for v in "$d" "$c"; do
		case $v in
		fenced) p+=(0) ;;
		inline) p+=(1) ;;
		lines) p+=(2) ;;
		*)
			echo "ptx: variant $1: protocol \"$v\" is none of fenced, inline, lines" >&2
			return 1
			;;
		esac
	done
	case $dt in
	bf16) dt=0 ;;
	fp8) dt=1 ;;
	*)
		echo "ptx: variant $1: dtype \"$dt\" is neither bf16 nor fp8" >&2
		return 1
		;;
	esac
	case $mode in
	rlr) mode=0 ;;
	ds) mode=1 ;;
	rm) mode=2 ;;
	*)
		echo "ptx: variant $1: combine mode \"$mode\" is none of rlr, ds, rm" >&2
		return 1
		;;
	esac
	defines="-DEPBENCH_DISPATCH_PROTO=${p[0]} -DEPBENCH_COMBINE_PROTO=${p[1]} -DEPBENCH_FP8=$dt -DEPBENCH_COMBINE_MODE=$mode"
	if [ -n "$gin" ]; then
		if [ "${p[0]}${p[1]}" != 00 ] || [ "$mode" = 1 ]; then
			echo "ptx: variant $1: a GIN build (nccl_) is of the fenced protocols with rlr or rm" >&2
			return 1
		fi
		[ -n "$nccl_version" ] || { echo "ptx: variant $1: no NCCL version in kernels/nccl.version" >&2; return 1; }
		defines="$defines -DEPBENCH_GIN=1 -DEPBENCH_NCCL_VERSION=$nccl_version"
	fi
}

# The GIN variants (nccl_) are built against NCCL's device headers of the
# version kernels/nccl.version names (the stamp hashes it), taken from
# NCCL_INCLUDE, else $NCCL_HOME/include; headers of another version are
# refused. --defines and the other variants need no headers.
nccl_version=
[ -f kernels/nccl.version ] && nccl_version=$(tr -d '[:space:]' <kernels/nccl.version)
if [ -z "${NCCL_INCLUDE:-}" ] && [ -n "${NCCL_HOME:-}" ] && [ -f "$NCCL_HOME/include/nccl_device.h" ]; then
	NCCL_INCLUDE=$NCCL_HOME/include
fi
# check_nccl_headers: NCCL_INCLUDE holds the headers of that version.
check_nccl_headers() {
	[ -n "${NCCL_INCLUDE:-}" ] || { echo "ptx: the GIN variants need NCCL_INCLUDE, NCCL's include directory (nccl.h, nccl_device.h)" >&2; exit 1; }
	local h found
	for h in nccl.h nccl_device.h; do
		[ -f "$NCCL_INCLUDE/$h" ] || { echo "ptx: NCCL_INCLUDE=$NCCL_INCLUDE has no $h" >&2; exit 1; }
	done
	found=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' "$NCCL_INCLUDE/nccl.h")
	if [ "$found" != "$nccl_version" ]; then
		echo "ptx: $NCCL_INCLUDE holds NCCL ${found:-of no NCCL_VERSION_CODE}; the GIN modules are built against $nccl_version (kernels/nccl.version)" >&2
		exit 1
	fi
}

# interface_text [DIR] prints the text the interface stamp of the second
# line (above) hashes, of the headers in DIR (default kernels).
interface_text() {
	local spec file name text all= dir=${1:-kernels}
	for spec in ll.cuh:LLArgs ll_gin.cuh:GinArgs; do
		file=${spec%%:*} name=${spec#*:}
		[ -f "$dir/$file" ] || { echo "ptx: no $dir/$file" >&2; return 1; }
		text=$(LC_ALL=C awk -v name="$name" '
			function norm(l) { sub(/\/\/.*/, "", l); gsub(/[ \t\r]/, "", l); return l }
			$0 ~ "^struct " name " \\{" { in_struct = 1 }
			in_struct {
				printf "%s", norm($0)
				if ($0 ~ /^};/) { in_struct = 0; found = 1 }
				next
			}
			/^constexpr / { printf "%s", norm($0); next }
			/^__host__ __device__ / { in_fn = 1; opened = 0; depth = 0 }
			in_fn {
				l = norm($0); printf "%s", l
				t = l; n = gsub(/\{/, "", t); depth += n; if (n > 0) opened = 1
				t = l; depth -= gsub(/\}/, "", t)
				if ((opened && depth <= 0) || (!opened && l ~ /;$/)) in_fn = 0
			}
			END { exit !found }' "$dir/$file") || {
			echo "ptx: $dir/$file has no \"struct $name {\" ... \"};\" declaration" >&2
			return 1
		}
		all+=$text$'\n'
	done
	printf '%s' "$all"
}
interface_stamp() {
	local text
	text=$(interface_text "$@") || return 1
	printf '%s\n' "$text" | sha256sum | cut -d' ' -f1
}
case ${1:-} in --interface-stamp | --interface-text)
	d=${2:-}
	[ -z "$d" ] || [[ $d == /* ]] || d=$caller/$d # relative to where the script was called from
	if [ "$1" = --interface-text ]; then interface_text "$d"; else interface_stamp "$d"; fi
	exit
	;;
esac

# The variants: one name a line, blank lines and what follows a # ignored.
names=()
defs=()
n=0
while IFS= read -r line || [ -n "$line" ]; do
	n=$((n + 1))
	line=${line%%#*}
	read -ra words <<<"$line"
	case ${#words[@]} in
	0) continue ;;
	1) ;;
	*)
		echo "ptx: kernels/variants.txt:$n: one name a line" >&2
		exit 1
		;;
	esac
	variant_defines "${words[0]}" || exit 1
	names+=("ll_${words[0]}")
	defs+=("$defines")
done <kernels/variants.txt
if [ "${#names[@]}" = 0 ]; then
	echo "ptx: kernels/variants.txt lists no variant" >&2
	exit 1
fi
if [ "${1:-}" = --defines ]; then
	for i in "${!names[@]}"; do
		printf '%s.ptx\t%s\n' "${names[$i]}" "${defs[$i]}"
	done
	exit 0
fi

nvcc=${1:?NVCC}
outdir=${2:-kernels/ptx}
shift $(($# < 2 ? $# : 2))
if [ $# -gt 0 ]; then
	keep_names=() keep_defs=()
	for want in "$@"; do
		found=
		for i in "${!names[@]}"; do
			if [ "${names[$i]}" = "ll_$want" ]; then
				keep_names+=("${names[$i]}")
				keep_defs+=("${defs[$i]}")
				found=1
			fi
		done
		[ -n "$found" ] || { echo "ptx: $want is not in kernels/variants.txt" >&2; exit 1; }
	done
	names=("${keep_names[@]}") defs=("${keep_defs[@]}")
fi
broken=
case ${EPBENCH_BREAK:-} in
"") ;;
noparity) broken=1 ;;
nofence) broken=2 ;;
flagfirst) broken=3 ;;
*) echo "ptx: EPBENCH_BREAK=$EPBENCH_BREAK: want noparity, nofence or flagfirst" >&2; exit 1 ;;
esac
if [ -n "$broken" ] && [ "$(cd "$outdir" 2>/dev/null && pwd)" = "$(pwd)/kernels/ptx" ]; then
	echo "ptx: a broken build (EPBENCH_BREAK) never goes into kernels/ptx" >&2
	exit 1
fi
for name in "${names[@]}"; do
	case $name in ll_nccl_*)
		check_nccl_headers
		break
		;;
	esac
done
command -v "$nvcc" >/dev/null || { echo "ptx: $nvcc not found: set NVCC or CUDA_HOME" >&2; exit 1; }
release=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [ "$release" != 13 ] && [ -z "${EPBENCH_ANY_NVCC:-}" ]; then
	echo "ptx: the committed PTX is built with CUDA 13; $nvcc is release ${release:-unknown} (EPBENCH_ANY_NVCC=1 overrides)" >&2
	exit 1
fi
flags=$(cat kernels/nvcc.flags)
iface=$(interface_stamp)
sources=$(cd kernels && ls *.cu *.cuh | LC_ALL=C sort)
stamp() {
	{
		for f in $sources; do
			printf '%s\n' "$f"
			cat "kernels/$f"
		done
		printf 'nvcc-flags: %s\n' "$flags"
		printf 'variant: %s\n' "$1"
	} | sha256sum | cut -d' ' -f1
}
mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pids=()
for i in "${!names[@]}"; do
	name=${names[$i]} defines=${defs[$i]}
	(
		inc=()
		case $name in ll_nccl_*) inc=(-I "$NCCL_INCLUDE") ;; esac
		# shellcheck disable=SC2086
		"$nvcc" $flags $defines ${broken:+-DEPBENCH_BREAK=$broken} "${inc[@]}" -o "$tmp/$name.raw" kernels/ll.cu
		{
			printf '// epbench-src-sha256: %s\n' "$(stamp "$defines")"
			printf '// epbench-interface-sha256: %s\n' "$iface"
			cat "$tmp/$name.raw"
		} >"$tmp/$name.ptx"
	) &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ "$status" != 0 ]; then
	echo "ptx: nvcc failed" >&2
	exit 1
fi
[ $# -gt 0 ] || rm -f "$outdir"/ll_*.ptx # a subset replaces only its own files
cp "$tmp"/ll_*.ptx "$outdir"/
