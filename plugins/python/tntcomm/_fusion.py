"""Fusion: the gradient-fusion plugin ABI (tnt/plugin.h) for Python.

A Fusion registers a list of tensors (element count and dtype, in the
order backprop is expected to produce them); every iteration, ready(i,
address) hands tensor i's buffer to the library, which allreduces a bucket
as soon as all its tensors are in, and wait_all() ends the iteration with
every buffer reduced in place. The caller keeps the buffers alive until
wait_all() returns. tntcomm.torch builds its DistributedOptimizer on it.
A Fusion reduces on the world communicator of its creation:
tntcomm.shrink() frees it (make a new one on the survivors').
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib


class Fusion:
    def __init__(self, tensors, op="avg", threshold=None):
        """tensors: a list of (count, dtype, name) with dtype a numpy dtype
        (or anything np.dtype accepts) and name a str or None. threshold:
        the minimum bucket size in bytes (None: the library's default)."""
        from . import _check, _dtype_of, _fusions, _op_of, generation, init
        self._check = _check
        self._names = [None if n is None else n.encode()
                       for _, _, n in tensors]
        descs = (_lib.TensorDesc * max(len(tensors), 1))()
        for i, (count, dtype, _) in enumerate(tensors):
            d = descs[i]
            d.size = ctypes.sizeof(_lib.TensorDesc)
            d.version = 1
            d.count = int(count)
            d.dtype = _dtype_of(np.empty(0, dtype=dtype))
            d.name = self._names[i]
        cfg = _lib.FusionConfig()
        cfg.size = ctypes.sizeof(_lib.FusionConfig)
        cfg.version = 1
        cfg.op = _op_of(op)
        cfg.min_bucket_bytes = (_lib.FUSION_DEFAULT if threshold is None
                                else int(threshold))
        cfg.max_bucket_bytes = _lib.FUSION_DEFAULT
        cfg.first_bucket_bytes = _lib.FUSION_DEFAULT
        self.ntensors = len(tensors)
        self.generation = generation()  # of the world communicator
        self._handle = ctypes.c_void_p()
        _check("tnt_fusion_create",
               lib.tnt_fusion_create(init(), descs, len(tensors),
                                     ctypes.byref(cfg),
                                     ctypes.byref(self._handle)))
        _fusions.add(self)

    def _h(self):
        if not self._handle:
            from . import generation
            if generation() != self.generation:
                raise ValueError("tntcomm: the Fusion context was freed by "
                                 "tntcomm.shrink(); make a new one on the "
                                 "survivors' communicator")
            raise ValueError("tntcomm: the Fusion context is freed")
        return self._handle

    def ready(self, index, address):
        """Tensor `index` is final at `address` (an int)."""
        self._check("tnt_fusion_ready",
                    lib.tnt_fusion_ready(self._h(), index, address))

    def wait(self, index):
        self._check("tnt_fusion_wait", lib.tnt_fusion_wait(self._h(), index))

    def wait_all(self):
        self._check("tnt_fusion_wait_all",
                    lib.tnt_fusion_wait_all(self._h()))

    def num_buckets(self):
        n = ctypes.c_size_t()
        self._check("tnt_fusion_num_buckets",
                    lib.tnt_fusion_num_buckets(self._h(), ctypes.byref(n)))
        return n.value

    def free(self):
        if self._handle:
            h, self._handle = self._handle, ctypes.c_void_p()
            self._check("tnt_fusion_free", lib.tnt_fusion_free(h))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass
