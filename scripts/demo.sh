#!/usr/bin/env bash
# The main job: 4 ranks on this machine doing real allreduces through
# libtntcomm (Tarantella's 32 KiB fusion size, then a sweep), every element
# checked; the sweep again on shared allocations (tnt_mem_alloc). NRANKS
# overrides the rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
n=${NRANKS:-4}
echo "== tnt-run -n $n tnt-bench allreduce --size 32k"
build/tools/tnt-run -n "$n" build/bench/tnt-bench allreduce --size 32k -n 200 -w 20
echo "== tnt-run -n $n tnt-bench allreduce -b 8 -e 64M -f 8"
build/tools/tnt-run -n "$n" build/bench/tnt-bench allreduce -b 8 -e 64M -f 8 -n 10 -w 2
echo "== the same sweep on buffers from tnt_mem_alloc (--mem shared: reduced in place in each other's memory)"
build/tools/tnt-run -n "$n" build/bench/tnt-bench allreduce -b 8 -e 64M -f 8 -n 10 -w 2 --mem shared
