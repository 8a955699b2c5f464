#!/bin/sh
# Stands in for the Python that runs MSCCL++'s ep_bench_ll.py through
# torchrun (python -m torch.distributed.run ... ep_bench_ll.py FLAGS): it
# says on stderr what it was started with and prints what the benchmark's
# rank 0 prints (a real run of it, kept beside this script).
echo "fake python: NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-unset} PATH=$PATH args: $*" >&2
PATH=/usr/bin:/bin
cat "$(dirname "$0")/seed_inproc.out"
exit 0
