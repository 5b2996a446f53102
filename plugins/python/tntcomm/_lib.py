"""Loading libtntcomm.so.0 and declaring the C signatures for ctypes.

The library is found, in this order, at $TNT_LIBRARY, at the path that
meson wrote into _config.py (the build tree's library for the copy in the
build tree, the installed one for the installed copy), and through the
linker's search path. Everything here is private to the package.
"""
import ctypes
import ctypes.util
import os

try:
    from . import _config
    _CONFIGURED = _config.LIBRARY
except ImportError:  # running from the source tree, not configured
    _CONFIGURED = None


def _candidates():
    env = os.environ.get("TNT_LIBRARY")
    if env:
        yield env
        return
    if _CONFIGURED:
        yield _CONFIGURED
    found = ctypes.util.find_library("tntcomm")
    if found:
        yield found
    yield "libtntcomm.so.0"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("tntcomm: cannot load libtntcomm (set TNT_LIBRARY to "
                      "its path): " + "; ".join(errors))


lib = _load()

c_int, c_size_t, c_void_p, c_char_p = (ctypes.c_int, ctypes.c_size_t,
                                       ctypes.c_void_p, ctypes.c_char_p)
P = ctypes.POINTER


class TensorDesc(ctypes.Structure):
    """tnt_tensor_desc_t (include/tnt/plugin.h), version 1."""
    _fields_ = [("size", c_size_t), ("version", ctypes.c_uint32),
                ("count", c_size_t), ("dtype", c_int), ("name", c_char_p)]


FUSION_CB = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_int)


class FusionConfig(ctypes.Structure):
    """tnt_fusion_config_t (include/tnt/plugin.h), version 1."""
    _fields_ = [("size", c_size_t), ("version", ctypes.c_uint32),
                ("op", c_int), ("min_bucket_bytes", c_size_t),
                ("max_bucket_bytes", c_size_t),
                ("first_bucket_bytes", c_size_t),
                ("callback", FUSION_CB), ("callback_arg", c_void_p)]


FUSION_DEFAULT = ctypes.c_size_t(-1).value

_SIGNATURES = {
    "tnt_strerror": (c_char_p, [c_int]),
    "tnt_last_error": (c_char_p, []),
    "tnt_get_version": (None, [P(c_int), P(c_int), P(c_int)]),
    "tnt_comm_init_from_env": (c_int, [P(c_void_p)]),
    "tnt_comm_free": (c_int, [c_void_p]),
    "tnt_comm_rank": (c_int, [c_void_p, P(c_int)]),
    "tnt_comm_size": (c_int, [c_void_p, P(c_int)]),
    "tnt_comm_master_rank": (c_int, [c_void_p, P(c_int)]),
    "tnt_comm_is_master": (c_int, [c_void_p, P(c_int)]),
    "tnt_comm_split": (c_int, [c_void_p, c_int, c_int, P(c_void_p)]),
    "tnt_comm_dup": (c_int, [c_void_p, P(c_void_p)]),
    "tnt_comm_shrink": (c_int, [c_void_p, P(c_void_p)]),
    "tnt_comm_failed_ranks": (c_int, [c_void_p, P(c_int), c_int, P(c_int)]),
    "tnt_allreduce": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                              c_int]),
    "tnt_broadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int]),
    "tnt_barrier": (c_int, [c_void_p]),
    "tnt_allgather": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t,
                              c_int]),
    "tnt_reduce_scatter": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t,
                                   c_int, c_int]),
    "tnt_iallreduce": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                               c_int, P(c_void_p)]),
    "tnt_ibroadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int,
                               P(c_void_p)]),
    "tnt_ibarrier": (c_int, [c_void_p, P(c_void_p)]),
    "tnt_iallgather": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                               P(c_void_p)]),
    "tnt_ireduce_scatter": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t,
                                    c_int, c_int, P(c_void_p)]),
    "tnt_reduce": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                           c_int, c_int]),
    "tnt_gather": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                           c_int]),
    "tnt_scatter": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int,
                            c_int]),
    "tnt_alltoall": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t,
                             c_int]),
    "tnt_alltoallv": (c_int, [c_void_p, c_void_p, P(c_size_t), P(c_size_t),
                              c_void_p, P(c_size_t), P(c_size_t), c_int]),
    "tnt_ialltoallv": (c_int, [c_void_p, c_void_p, P(c_size_t),
                               P(c_size_t), c_void_p, P(c_size_t),
                               P(c_size_t), c_int, P(c_void_p)]),
    "tnt_send": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int]),
    "tnt_recv": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int]),
    "tnt_isend": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int,
                          P(c_void_p)]),
    "tnt_irecv": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int,
                          P(c_void_p)]),
    "tnt_test": (c_int, [c_void_p]),
    "tnt_wait": (c_int, [c_void_p]),
    "tnt_request_free": (c_int, [c_void_p]),
    "tnt_request_source": (c_int, [c_void_p, P(c_int)]),
    "tnt_micro_batch": (c_int, [c_size_t, c_int, c_int, P(c_size_t),
                                P(c_size_t)]),
    "tnt_fusion_create": (c_int, [c_void_p, P(TensorDesc), c_size_t,
                                  P(FusionConfig), P(c_void_p)]),
    "tnt_fusion_ready": (c_int, [c_void_p, c_size_t, c_void_p]),
    "tnt_fusion_wait": (c_int, [c_void_p, c_size_t]),
    "tnt_fusion_wait_all": (c_int, [c_void_p]),
    "tnt_fusion_num_buckets": (c_int, [c_void_p, P(c_size_t)]),
    "tnt_fusion_free": (c_int, [c_void_p]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# The C values of tnt_dtype_t and tnt_op_t (include/tnt/tnt.h).
F32, F64, F16, BF16, I8, U8, I32, U32, I64, U64 = range(10)
SUM, AVG, PROD, MIN, MAX = range(5)
IN_PLACE = ctypes.c_void_p(1)
# tnt_result_t values the binding tells apart (include/tnt/tnt.h).
SUCCESS, INPROGRESS = 0, 1
