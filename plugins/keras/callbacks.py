"""tntcomm.keras.callbacks (tarantella.keras.callbacks): Callback, the
wrapper that says how a callback runs in data-parallel training, and
Keras' callbacks under their usual names (used as in serial training:
tnt.Model.fit wraps them itself; see _callbacks.py)."""
from keras.callbacks import (CSVLogger, EarlyStopping, History,  # noqa: F401
                             LambdaCallback, LearningRateScheduler,
                             ModelCheckpoint, ProgbarLogger,
                             ReduceLROnPlateau, TensorBoard, TerminateOnNaN)

from ._callbacks import Callback  # noqa: F401
