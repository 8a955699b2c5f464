#!/usr/bin/env bash
# `make run`: the benchmark with ep_bench's defaults over every local GPU, or,
# on a machine without one, the CPU reference backend over 4 ranks.
# Usage: scripts/run.sh MPIRUN NP [epbench flags...]
set -euo pipefail
mpirun=$1
np=$2
shift 2

[ -x bin/epbench ] || { echo "run: bin/epbench is missing: run make build (or drop NOBUILD=1)" >&2; exit 1; }

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

args=()
if [ "$gpus" -gt 0 ]; then
	[ -n "$np" ] || np=$gpus
else
	[ -n "$np" ] || np=4
	args+=(--backend cpu)
fi

opts=(-np "$np")
[ "$(id -u)" = 0 ] && opts+=(--allow-run-as-root)
[ "$np" -gt "$(nproc)" ] && opts+=(--oversubscribe)
set -x
exec "$mpirun" "${opts[@]}" bin/epbench "${args[@]}" "$@"
