"""Tarantella's Transformer tutorial at small scale on tntcomm.keras: an
encoder-decoder Transformer (a few layers) learning a toy translation,
reversing a sequence of tokens, on data made with a fixed seed.

    tarantella -n 4 -- examples/keras_transformer.py --steps 8

The master prints the time of each epoch and the final loss;
--check-ranks fails unless every rank holds bitwise the same weights.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

import tarantella as tnt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_resnet50 import fit_and_report  # noqa: E402

START = 1  # token 0 pads, 1 starts the target


def positional(length, d):
    pos = np.arange(length)[:, None]
    i = np.arange(d)[None, :]
    angle = pos / np.power(10000.0, (2 * (i // 2)) / d)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)) \
        .astype(np.float32)


def embed(tokens, vocab, d, length):
    x = keras.layers.Embedding(vocab, d)(tokens)
    return x + positional(length, d)


def block(x, d, heads, ff, context=None, causal=False):
    a = keras.layers.MultiHeadAttention(heads, d // heads)(
        x, x, use_causal_mask=causal)
    x = keras.layers.LayerNormalization()(x + a)
    if context is not None:
        a = keras.layers.MultiHeadAttention(heads, d // heads)(x, context)
        x = keras.layers.LayerNormalization()(x + a)
    f = keras.layers.Dense(ff, activation="relu")(x)
    f = keras.layers.Dense(d)(f)
    return keras.layers.LayerNormalization()(x + f)


def transformer(vocab, length, d, heads, ff, layers):
    src = keras.Input((length,), dtype="int32")
    tgt = keras.Input((length,), dtype="int32")
    x = embed(src, vocab, d, length)
    for _ in range(layers):
        x = block(x, d, heads, ff)
    y = embed(tgt, vocab, d, length)
    for _ in range(layers):
        y = block(y, d, heads, ff, context=x, causal=True)
    logits = keras.layers.Dense(vocab)(y)
    return keras.Model([src, tgt], logits)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=32)
    p.add_argument("--length", type=int, default=12)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--check-ranks", action="store_true")
    args = p.parse_args()

    keras.utils.set_random_seed(args.seed)
    n = args.global_batch * args.steps
    rng = np.random.default_rng(args.seed)
    src = rng.integers(2, args.vocab, size=(n, args.length)).astype(np.int32)
    out = src[:, ::-1].copy()
    tgt_in = np.concatenate([np.full((n, 1), START, np.int32),
                             out[:, :-1]], axis=1)
    model = tnt.Model(transformer(args.vocab, args.length, args.d_model,
                                  args.heads, args.ff, args.layers))
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    train = tf.data.Dataset.from_tensor_slices(((src, tgt_in), out)).shuffle(
        n, seed=args.seed).batch(args.global_batch)
    return fit_and_report(model, train, args, "Transformer")

if __name__ == "__main__":
    sys.exit(main())
