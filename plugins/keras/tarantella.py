"""tarantella: Tarantella's name for tntcomm.keras, so that the scripts of
Tarantella's manual run unchanged (`import tarantella as tnt`). The same
objects: tarantella.Model is tntcomm.keras.Model; tarantella.models,
tarantella.elastic and tarantella.keras.callbacks are tntcomm.keras's
modules."""
import sys as _sys
import types as _types

import tntcomm.keras as _impl
from tntcomm.keras import *  # noqa: F401,F403
from tntcomm.keras import callbacks, elastic, models  # noqa: F401

keras = _types.ModuleType("tarantella.keras",
                          "Tarantella's tarantella.keras: its callbacks")
keras.callbacks = callbacks
_sys.modules["tarantella.models"] = models
_sys.modules["tarantella.elastic"] = elastic
_sys.modules["tarantella.keras"] = keras
_sys.modules["tarantella.keras.callbacks"] = callbacks
__all__ = list(_impl.__all__) + ["keras"]
