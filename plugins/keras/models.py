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
    """A model from a serialized config ({"class_name", "config"}) or from
    a model's get_config() (Keras 3 has no model_from_config: a functional
    model's config names its input layers, a Sequential's does not)."""
    if "class_name" in config:
        model = keras.saving.deserialize_keras_object(
            config, custom_objects=custom_objects)
    elif "input_layers" in config:
        model = keras.Model.from_config(config,
                                        custom_objects=custom_objects)
    else:
        model = keras.Sequential.from_config(config,
                                             custom_objects=custom_objects)
    return Model(model)


def model_from_json(json_string, custom_objects=None):
    return Model(keras.models.model_from_json(
        json_string, custom_objects=custom_objects))


def clone_model(model, **kwargs):
    return Model(keras.models.clone_model(_inner(model), **kwargs))
