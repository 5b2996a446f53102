"""The torch.distributed backend "tnt" (tntcomm._c10d), registered when
tntcomm.torch is imported:

    import torch.distributed as dist
    import tntcomm.torch            # registers "tnt"
    dist.init_process_group("tnt")  # env://, tcp://, file://, torchrun

The process group meets its peers through the Store torch gives it (rank 0
publishes where it listens and the group's key), so no TNT_* variable is
needed; the library's TNT_* settings (TNT_SOCKET_IFNAME, TNT_TRANSPORT,
...) still apply. docs/frontends.md says what each operation does.
"""
import datetime

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
                           "not in this build (%s); build libtntcomm with "
                           "libtorch-dev, pybind11-dev and python3-dev "
                           "installed" % MISSING)
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    return _c10d.ProcessGroupTnt(store, rank, size, float(timeout))


def register():
    """Make "tnt" a torch.distributed backend (once per process)."""
    import torch.distributed as dist
    if not dist.is_available():
        return
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create)
