#!/bin/sh
# Stands in for an ep_bench that exits 0 without a summary block.
echo "=== NCCL EP Performance Benchmark ==="
echo "fake ep_bench: nothing measured" >&2
exit 0
