"""tntcomm.keras.models (tarantella.models): Keras' model functions,
returning tnt.Model. Every rank loads the file (after a save, which ends
with a barrier, it is complete) and then takes the master rank's
weights."""
import keras

import tntcomm

from ._model import Model


def _inner(model):
    return model.model if isinstance(model, Model) else model


def load_model(filepath, compile=True, **kwargs):
    return Model(keras.models.load_model(filepath, compile=compile,
                                         **kwargs))


def save_model(model, filepath, tnt_save_all_devices=False, **kwargs):
    if tnt_save_all_devices or tntcomm.is_master_rank():
        keras.models.save_model(_inner(model), filepath, **kwargs)
    tntcomm.barrier()


def model_from_config(config, custom_objects=None):
    return Model(keras.models.model_from_config(
        config, custom_objects=custom_objects))


def model_from_json(json_string, custom_objects=None):
    return Model(keras.models.model_from_json(
        json_string, custom_objects=custom_objects))


def clone_model(model, **kwargs):
    return Model(keras.models.clone_model(_inner(model), **kwargs))
