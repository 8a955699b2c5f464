#!/usr/bin/env bash
# Compiles kernels/*.cu to PTX and stamps each file's first line with
#   // epbench-src-sha256: <hex>
# the sha256 over the sorted kernel sources (for each: its file name, a
# newline, its bytes) followed by "nvcc-flags: <flags>\n". kernels/ptxhash_test.go
# recomputes it, so CI (without nvcc) notices sources changed without new PTX.
# Usage: scripts/ptx.sh NVCC [OUTDIR]   (OUTDIR defaults to kernels/)
set -euo pipefail
nvcc=${1:?NVCC}
outdir=${2:-kernels}
cd "$(dirname "$0")/.."
command -v "$nvcc" >/dev/null || { echo "ptx: $nvcc not found: set NVCC or CUDA_HOME" >&2; exit 1; }
release=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [ "$release" != 13 ] && [ -z "${EPBENCH_ANY_NVCC:-}" ]; then
	echo "ptx: the committed PTX is built with CUDA 13; $nvcc is release ${release:-unknown} (EPBENCH_ANY_NVCC=1 overrides)" >&2
	exit 1
fi
flags=$(cat kernels/nvcc.flags)
hash=$(
	{
		for f in $(cd kernels && ls *.cu *.cuh | LC_ALL=C sort); do
			printf '%s\n' "$f"
			cat "kernels/$f"
		done
		printf 'nvcc-flags: %s\n' "$flags"
	} | sha256sum | cut -d' ' -f1
)
mkdir -p "$outdir"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for cu in kernels/*.cu; do
	name=$(basename "$cu" .cu)
	# shellcheck disable=SC2086
	"$nvcc" $flags -o "$tmp" "$cu"
	{ printf '// epbench-src-sha256: %s\n' "$hash"; cat "$tmp"; } >"$outdir/$name.ptx"
done
