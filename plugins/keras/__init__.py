"""tntcomm.keras: Tarantella's Keras API on Keras 3 (TensorFlow backend)
over libtntcomm. The package `tarantella` is the same module under
Tarantella's name (docs/keras.md).

    import tntcomm.keras as tnt          # or: import tarantella as tnt
    model = tnt.Model(keras_model)       # weights from the master rank
    model.compile(optimizer, loss, metrics)
    model.fit(dataset.batch(global_batch), epochs=2)   # split over ranks
    model.evaluate(test.batch(global_batch))           # same on every rank

tnt.elastic (elastic.py) goes on after a rank died, as Horovod Elastic
does: KerasState, CommitStateCallback and the run decorator.

Importing it starts communication (the world communicator of tntcomm)
and, when the script has set no TensorFlow seed, sets one that is the same
on every rank (TNT_DEFAULT_SEED, default 42), so that unseeded shuffles
produce the same global batches everywhere.
"""
import os as _os

import tensorflow as _tf
from tensorflow.python.framework import random_seed as _random_seed

import tntcomm as _tntcomm
from tntcomm import (get_master_rank, get_rank, get_size,  # noqa: F401
                     is_master_rank, TntError)

from . import callbacks, elastic, models  # noqa: F401
from ._data import DatasetError  # noqa: F401
from ._model import Model, ParallelStrategy  # noqa: F401

__all__ = ["Model", "ParallelStrategy", "models", "callbacks", "elastic",
           "get_rank",
           "get_size", "get_master_rank", "is_master_rank", "DatasetError",
           "TntError"]

if _random_seed.get_seed(None)[0] is None:
    _tf.random.set_seed(int(_os.environ.get("TNT_DEFAULT_SEED", "42")))

_tntcomm.init()
