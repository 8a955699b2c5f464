#!/bin/sh
# Stands in for an ep_bench that fails during set-up: a header on stdout,
# a screenful of log on stderr ending with the error, exit code 3.
echo "=== NCCL EP Performance Benchmark ==="
i=1
while [ "$i" -le 20 ]; do
	echo "fake ep_bench: set-up step $i" >&2
	i=$((i + 1))
done
echo "fake ep_bench: NCCL error: unhandled cuda error" >&2
exit 3
