"""tntcomm.stats(): tnt_comm_stats (include/tnt/tnt.h) as a dict.

The ctypes mirror of tnt_stats_t (0.5: with the alltoall and p2p fields;
0.7: which communicator, and this rank's world rank).
The struct is versioned by its size: this mirror passes its own size, and
the library fills what both know, so a newer library still answers it.
"""
import ctypes

from ._lib import lib

_u64 = ctypes.c_uint64
KINDS = ("allreduce", "broadcast", "allgather", "reduce_scatter", "barrier",
         "reduce", "gather", "scatter")
_NKINDS, _NALGOS, _NTPS = 8, 24, 4   # TNT_STATS_KINDS, _ALGOS, _TRANSPORTS
_RUNNING, _REPORTS = 0x1, 0x2        # TNT_STATS_TP_*


class Count(ctypes.Structure):
    """tnt_stats_count_t"""
    _fields_ = [("calls", _u64), ("bytes", _u64)]


class Transport(ctypes.Structure):
    """tnt_stats_transport_t"""
    _fields_ = [("name", ctypes.c_char * 16), ("flags", ctypes.c_uint32),
                ("peers", ctypes.c_uint32), ("msgs_sent", _u64),
                ("bytes_sent", _u64), ("msgs_recv", _u64),
                ("bytes_recv", _u64), ("reconnects", _u64),
                ("strangers_refused", _u64), ("strangers_evicted", _u64)]


class Stats(ctypes.Structure):
    """tnt_stats_t"""
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32), ("kind", Count * _NKINDS),
                ("algo", Count * _NALGOS), ("transport", Transport * _NTPS),
                ("wait_ns", _u64), ("unexpected_hwm", _u64),
                ("alltoall", Count), ("p2p", Count),
                ("comm_name", ctypes.c_char * 48),
                ("comm_how", ctypes.c_char * 96),
                ("rank", ctypes.c_int32), ("world_rank", ctypes.c_int32)]


lib.tnt_comm_stats.restype = ctypes.c_int
lib.tnt_comm_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(Stats)]
lib.tnt_stats_algo_name.restype = ctypes.c_char_p
lib.tnt_stats_algo_name.argtypes = [ctypes.c_int]

_TP_FIELDS = ("peers", "msgs_sent", "bytes_sent", "msgs_recv", "bytes_recv",
              "reconnects", "strangers_refused", "strangers_evicted")


def query(comm):
    """(rc, dict) for communicator handle comm."""
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    s.version = 1
    rc = lib.tnt_comm_stats(comm, ctypes.byref(s))
    if rc != 0:
        return rc, None
    algos = {}
    for i in range(_NALGOS):
        name = lib.tnt_stats_algo_name(i)
        if name and s.algo[i].calls:
            algos[name.decode()] = {"calls": s.algo[i].calls,
                                    "bytes": s.algo[i].bytes}
    transports = {}
    for t in s.transport:
        if t.flags & _RUNNING:
            d = {f: getattr(t, f) for f in _TP_FIELDS}
            d["reports"] = bool(t.flags & _REPORTS)
            transports[t.name.decode()] = d
    return rc, {
        "kinds": dict({k: {"calls": s.kind[i].calls,
                           "bytes": s.kind[i].bytes}
                       for i, k in enumerate(KINDS)},
                      alltoall={"calls": s.alltoall.calls,
                                "bytes": s.alltoall.bytes},
                      p2p={"calls": s.p2p.calls, "bytes": s.p2p.bytes}),
        "algorithms": algos,
        "transports": transports,
        "wait_s": s.wait_ns * 1e-9,
        "unexpected_hwm": s.unexpected_hwm,
        "comm": {"name": s.comm_name.decode(), "how": s.comm_how.decode(),
                 "rank": s.rank, "world_rank": s.world_rank},
    }
