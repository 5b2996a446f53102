"""The torch.distributed backend "tnt" (tntcomm._c10d), registered when
tntcomm.torch is imported:

    import torch.distributed as dist
    import tntcomm.torch            # registers "tnt"
    dist.init_process_group("tnt")  # env://, tcp://, file://, torchrun
    dist.init_process_group("cpu:tnt,cuda:nccl")  # tnt for CPU tensors

It is a c10d Backend for the device types "cpu" and "cuda" (torch >= 2.0
wraps it in its own ProcessGroup); CUDA tensors are staged by the library
through pinned host memory, after the work queued on their current stream
(as gloo does for CUDA tensors); several ranks may share one GPU.

The process group meets its peers through the Store torch gives it (rank 0
publishes where it listens and the group's key), so no TNT_* variable is
needed; the library's TNT_* settings (TNT_SOCKET_IFNAME, TNT_TRANSPORT,
...) still apply. docs/frontends.md says what each operation does.
"""
import datetime
import os

NAME = "tnt"

try:
    from tntcomm import _c10d
    MISSING = None
except ImportError as e:  # built without libtorch-dev, or a broken install
    _c10d = None
    MISSING = str(e)


def available():
    """True when this build has the backend (the C++ extension)."""
    return _c10d is not None


def _create(store, rank, size, timeout):
    if _c10d is None:
        raise RuntimeError("tntcomm: the torch.distributed backend 'tnt' is "
                           "not in this build (%s); build libtntcomm for an "
                           "interpreter with torch 2.x (meson -Dpython=, or "
                           "pip install --no-build-isolation .) and "
                           "python3-dev installed" % MISSING)
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    return _c10d.ProcessGroupTnt(store, rank, size, float(timeout))


# Launchers' variables for (rank, size, local rank, local size).
_LAUNCHERS = [
    ("tnt-run", "TNT_RANK", "TNT_SIZE", "TNT_LOCAL_RANK", "TNT_LOCAL_SIZE"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
]


def launcher_env(environ=None):
    """torch's env:// rendezvous (the default of init_process_group) reads
    RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which torchrun sets and
    tnt-run, mpirun and srun do not. Fill in those that are unset from the
    launcher's own variables, so that init_process_group("tnt") works
    under each of them. tnt-run also says where rank 0 is (TNT_ROOT_ADDR):
    the store takes the port after the library's, as the library does
    under torchrun. Under mpirun and srun, MASTER_ADDR and MASTER_PORT
    stay the user's to set (as with gloo). Returns the launcher's name or
    None."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return None
    for name, rank, size, lrank, lsize in _LAUNCHERS:
        if rank in env and size in env:
            env.setdefault("RANK", env[rank])
            env.setdefault("WORLD_SIZE", env[size])
            if lrank in env:
                env.setdefault("LOCAL_RANK", env[lrank])
            if lsize and lsize in env:
                env.setdefault("LOCAL_WORLD_SIZE", env[lsize])
            root = env.get("TNT_ROOT_ADDR", "") if name == "tnt-run" else ""
            host, _, port = root.rpartition(":")
            if host and port.isdigit():
                env.setdefault("MASTER_ADDR", host.strip("[]"))
                env.setdefault("MASTER_PORT", str(int(port) + 1))
            return name
    return None


def register():
    """Make "tnt" a torch.distributed backend (once per process)."""
    import torch.distributed as dist
    if not dist.is_available():
        return
    launcher_env()
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, devices=["cpu", "cuda"])
