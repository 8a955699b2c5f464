#!/usr/bin/env bash
# Compiles kernels/ll.cu to PTX once per kernel variant (kernels.Variants:
# the protocol pairs, each dispatch dtype and combine mode; ll.cuh says what
# a variant fixes) into OUTDIR/ll_<dispatch>_<combine>_<bf16|fp8>_<rlr|ds>.ptx,
# and stamps each file's first line with
#   // epbench-src-sha256: <hex>
# the sha256 over the sorted kernel sources (for each: its file name, a
# newline, its bytes) followed by "nvcc-flags: <flags>\n" and
# "variant: <defines>\n". kernels/ptx_test.go recomputes it, so CI (without
# nvcc) notices sources changed without new PTX, and checks that the files
# are exactly the variants the launcher can ask for.
# Usage: scripts/ptx.sh NVCC [OUTDIR]   (OUTDIR defaults to kernels/ptx)
set -euo pipefail
nvcc=${1:?NVCC}
outdir=${2:-kernels/ptx}
cd "$(dirname "$0")/.."
command -v "$nvcc" >/dev/null || { echo "ptx: $nvcc not found: set NVCC or CUDA_HOME" >&2; exit 1; }
release=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [ "$release" != 13 ] && [ -z "${EPBENCH_ANY_NVCC:-}" ]; then
	echo "ptx: the committed PTX is built with CUDA 13; $nvcc is release ${release:-unknown} (EPBENCH_ANY_NVCC=1 overrides)" >&2
	exit 1
fi
flags=$(cat kernels/nvcc.flags)
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
# Proto* values (ll.cuh): fenced 0, inline 1, lines 2.
names=(fenced inline lines)
pids=()
for pair in "1 1" "0 0" "0 2" "2 2"; do
	read -r dp cp <<<"$pair"
	for fp8 in 0 1; do
		for ds in 0 1; do
			dt=bf16 mode=rlr
			[ "$fp8" = 1 ] && dt=fp8
			[ "$ds" = 1 ] && mode=ds
			name=ll_${names[$dp]}_${names[$cp]}_${dt}_${mode}
			defines="-DEPBENCH_DISPATCH_PROTO=$dp -DEPBENCH_COMBINE_PROTO=$cp -DEPBENCH_FP8=$fp8 -DEPBENCH_COMBINE_MODE=$ds"
			(
				# shellcheck disable=SC2086
				"$nvcc" $flags $defines -o "$tmp/$name.raw" kernels/ll.cu
				{ printf '// epbench-src-sha256: %s\n' "$(stamp "$defines")"; cat "$tmp/$name.raw"; } >"$tmp/$name.ptx"
			) &
			pids+=($!)
		done
	done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ "$status" != 0 ]; then
	echo "ptx: nvcc failed" >&2
	exit 1
fi
rm -f "$outdir"/ll_*.ptx
cp "$tmp"/ll_*.ptx "$outdir"/
