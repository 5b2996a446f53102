#!/bin/bash
# Runs inside the guest: Open MPI with UCX as the peer of tnt-bench over
# verbs, for the benchmark table of docs/verbs.md: MPI_Allreduce of
# float32 (osu-style, ../shared/peers/src/mpi_allreduce_bench.c, compiled
# on the host against the same Debian libopenmpi), p = 2, rank 0 on rxe0
# and rank 1 on rxe1 as tnt-bench's TNT_IB_HCA_MAP=local_rank places
# them. A step of bench.cmds, in a guest built with
# TNT_RDMA_GUEST_EXTRA=openmpi-bin. mpirun is stopped after
# BENCH_MPI_TIMEOUT seconds (300): a hang fails the step.
# UCX is held to the verbs transports (rc_verbs, with ud_verbs for its
# wire-up; no shared memory, which it would pick for two ranks of one
# host) and to the IPv4-mapped RoCE v2 GID (index 1, as perftest's -x 1).
# UCX's check of the destination GID of UD packets on Ethernet is off
# (UCX_UD_VERBS_ETH_DGID_CHECK=n): with it on, UD wire-up timed out
# although rxe counted the packets as received, and MPI could not run. UCX_TLS and BENCH_UCX_DEV
# (one device for every rank, e.g. rxe0:1) override these.
#   usage: bench-mpi.sh BENCH_BINARY [its options]
set -u
bin=$1; shift
command -v mpirun > /dev/null || {
    echo "bench-mpi: no mpirun in the guest: build it with" \
         "TNT_RDMA_GUEST_EXTRA=openmpi-bin (docs/verbs.md)"; exit 1; }
[ -x "$bin" ] || { echo "bench-mpi: $bin missing (compile it on the host)"; exit 1; }
# Each rank's device, by its local rank.
wrap=$(mktemp /tmp/bench-mpi.XXXXXX)
cat > "$wrap" <<'W'
#!/bin/bash
export UCX_NET_DEVICES=${BENCH_UCX_DEV:-rxe${OMPI_COMM_WORLD_LOCAL_RANK}:1}
exec "$@"
W
chmod +x "$wrap"
ompi_info 2>/dev/null | grep -E "pml: ucx|Open MPI:" | head -n 2
ucx_info -v 2>/dev/null | head -n 1
timeout -k 5 "${BENCH_MPI_TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none \
    --mca pml ucx --mca btl ^vader,tcp,openib,uct --mca osc ^ucx \
    -x UCX_TLS=${UCX_TLS:-rc_verbs,ud_verbs,self} -x UCX_IB_GID_INDEX=${UCX_IB_GID_INDEX:-1} \
    ${BENCH_UCX_DEV:+-x BENCH_UCX_DEV} \
    -x UCX_UD_VERBS_ETH_DGID_CHECK=${UCX_UD_VERBS_ETH_DGID_CHECK:-n} \
    -x UCX_WARN_UNUSED_ENV_VARS=n \
    "$wrap" "$bin" "$@"
rc=$?
rm -f "$wrap"
exit $rc
