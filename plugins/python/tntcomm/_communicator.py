"""tntcomm.Comm: a communicator handle besides the world one, for the
communicators derived from it (tnt_comm_split, tnt_comm_dup) and for the
survivors' communicator after a rank died (tnt_comm_shrink).

    world = tnt.Comm.world()
    half = world.split(color=tnt.get_rank() % 2)   # None on TNT_UNDEFINED
    total = half.allreduce(np.arange(4.0))
    try:
        world.allreduce(x)
    except tnt.TntError as e:                      # a peer died
        survivors = world.shrink()                 # TNT_RECOVERY=1 needed
        print(world.failed_ranks())
    half.free(); survivors.free()

A Comm made by split, dup or shrink is freed by free() (or when the
process exits); world() stands for the module's communicator, which
finalize() frees (its free() does nothing) and tntcomm.shrink()
replaces with the survivors' (a world() Comm then works on theirs).
"""
import ctypes
import weakref

import numpy as np

from ._lib import lib

UNDEFINED = -1  # TNT_UNDEFINED (include/tnt/tnt.h)

# Derived communicators not freed yet: freed at exit before the world one.
_alive = weakref.WeakSet()


class Comm:
    """A libtntcomm communicator: rank, size, allreduce, broadcast,
    barrier, and split, dup, shrink, failed_ranks, free."""

    def __init__(self, handle, owned):
        self._handle = handle
        self._owned = owned
        if owned:
            _alive.add(self)

    @classmethod
    def world(cls):
        """The module's world communicator (created if needed)."""
        from . import init
        init()
        return cls(None, False)

    def _h(self):
        if not self._owned:  # the world: whichever the module holds now
            from . import init
            return init()
        if self._handle is None:
            raise ValueError("tntcomm.Comm: the communicator was freed")
        return self._handle

    def _int(self, name):
        from . import _check
        out = ctypes.c_int()
        _check(name, getattr(lib, name)(self._h(), ctypes.byref(out)))
        return out.value

    @property
    def rank(self):
        return self._int("tnt_comm_rank")

    @property
    def size(self):
        return self._int("tnt_comm_size")

    def _new(self, name, rc, handle):
        from . import _check
        _check(name, rc)
        return Comm(handle, True) if handle.value else None

    def split(self, color, key=None):
        """Collective: ranks of one color (an int >= 0) form a new Comm,
        ranked by key (default: this rank), then by rank here; color None
        (or UNDEFINED) takes part and gets None."""
        color = UNDEFINED if color is None else color
        key = self.rank if key is None else key
        for what, v in (("color", color), ("key", key)):
            if not isinstance(v, int):
                raise TypeError("tntcomm.Comm.split: %s must be an int, "
                                "not %s" % (what, type(v).__name__))
        out = ctypes.c_void_p()
        return self._new("tnt_comm_split",
                         lib.tnt_comm_split(self._h(), color, key,
                                            ctypes.byref(out)), out)

    def dup(self):
        """Collective: a copy with a context of its own."""
        out = ctypes.c_void_p()
        return self._new("tnt_comm_dup",
                         lib.tnt_comm_dup(self._h(), ctypes.byref(out)), out)

    def shrink(self):
        """After a rank died: the survivors (all of them call it) agree on
        the dead ranks and get a Comm of themselves, in their order here
        (TNT_RECOVERY=1 on every rank; tnt-run --elastic sets it)."""
        out = ctypes.c_void_p()
        return self._new("tnt_comm_shrink",
                         lib.tnt_comm_shrink(self._h(), ctypes.byref(out)),
                         out)

    def failed_ranks(self):
        """The ranks here that failed: after shrink() the agreed set, else
        the peers this rank saw lost."""
        return failed_ranks(self._h())

    def allreduce(self, array, op="sum", inplace=False):
        """As tntcomm.allreduce, on this communicator."""
        from . import _allreduce_on
        return _allreduce_on(self._h, array, op, inplace)

    def broadcast(self, array, root=0, inplace=False):
        """As tntcomm.broadcast, on this communicator."""
        from . import _broadcast_on
        return _broadcast_on(self._h, array, root, inplace)

    def barrier(self):
        from . import _check
        _check("tnt_barrier", lib.tnt_barrier(self._h()))

    def free(self):
        """Free a communicator made by split, dup or shrink (the world one
        is finalize()'s); a second call is a TntError, as in C."""
        from . import TntError, _check
        if not self._owned:
            return
        if self._handle is None:
            raise TntError("tnt_comm_free", -10)
        handle, self._handle = self._handle, None
        _alive.discard(self)
        _check("tnt_comm_free", lib.tnt_comm_free(handle))


def failed_ranks(handle):
    """tnt_comm_failed_ranks of a communicator handle, as a list."""
    from . import _check
    n = ctypes.c_int()
    _check("tnt_comm_failed_ranks",
           lib.tnt_comm_failed_ranks(handle, None, 0, ctypes.byref(n)))
    buf = (ctypes.c_int * max(n.value, 1))()
    _check("tnt_comm_failed_ranks",
           lib.tnt_comm_failed_ranks(handle, buf, n.value, ctypes.byref(n)))
    return list(buf[:n.value])


def free_all():
    """Free every derived communicator still alive (finalize())."""
    for c in list(_alive):
        try:
            c.free()
        except Exception:  # noqa: BLE001  (best effort at exit)
            pass
