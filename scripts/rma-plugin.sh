#!/usr/bin/env bash
# Builds the one-node RMA plugin (nccl/testdata/rmaipc/rmaipc.c) that lets
# NCCL's proxy GIN, and so epbench's -n path, run on a node without an RDMA
# NIC: puts and signals become CUDA copies into the peers' memory, mapped
# through CUDA IPC. It is a test tool; the top of rmaipc.c says what it
# deliberately does differently from a real network.
#
# Usage: scripts/rma-plugin.sh OUT.so
#
# Environment:
#   CC         C compiler (default cc)
#   CUDA_HOME  CUDA toolkit (default /usr/local/cuda): include/cuda.h and the
#              link stub lib64/stubs/libcuda.so. When it has no cuda.h, the
#              copy that `make deps` extracts into .deps/cuda is used.
#
# Prints the line that loads the plugin; NCCL also needs NCCL_GIN_TYPE=2, and
# NCCL_MULTI_RANK_GPU_ENABLE=1 when ranks share a GPU.
set -euo pipefail

if [[ $# -ne 1 || -z $1 ]]; then
	echo "usage: $0 OUT.so" >&2
	exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f $cuda/include/cuda.h && -f $root/.deps/cuda/include/cuda.h ]]; then
	cuda=$root/.deps/cuda
fi
if [[ ! -f $cuda/include/cuda.h ]]; then
	echo "$0: no cuda.h in $cuda/include (set CUDA_HOME, or run make deps)" >&2
	exit 1
fi
mkdir -p "$(dirname "$1")"
out=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
${CC:-cc} -O2 -Wall -Wextra -Werror -fPIC -shared -I"$cuda/include" "$root/nccl/testdata/rmaipc/rmaipc.c" \
	-o "$out" -L"$cuda/lib64/stubs" -lcuda -lpthread
echo "export NCCL_RMA_PLUGIN=$out"
