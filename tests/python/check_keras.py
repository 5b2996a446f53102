"""Checks of tntcomm.keras / tarantella, run on every rank by
tests/test_keras.sh (tnt-run -n P). Two parts:

  --part proof    LeNet-5 on the digits (global batch 32) and an MLP with
                  a global batch that p may not divide (30): every rank
                  must hold bitwise the same weights and get the same
                  evaluate result; the master saves both to OUT/p{P}_*.npz
                  for compare_keras.py, which compares p = 1, 2, 4. predict
                  must equal the model applied to the whole set.
  --part features the default seed, callbacks, save/load, training
                  resumed from a ModelCheckpoint, dataset options, error
                  cases and eager mode.

Every check compares against a value computed here independently (the
ranks' own values gathered, the serial model) and raises on a mismatch.
"""
import argparse
import json
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import tarantella as tnt  # noqa: E402
import tntcomm  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples"))
import keras_lenet5  # noqa: E402

RANK, SIZE = tnt.get_rank(), tnt.get_size()
try:
    import tensorboard  # noqa: F401
    HAVE_TB = True
except ImportError:
    HAVE_TB = False


def fail(msg):
    raise AssertionError("rank %d of %d: %s" % (RANK, SIZE, msg))


def gathered(values):
    """values (float64 array) of every rank, shape (SIZE, n)."""
    v = np.ascontiguousarray(np.asarray(values, np.float64).ravel())
    return tntcomm.allgather(v).reshape(SIZE, -1)


def same_on_all_ranks(values, what):
    every = gathered(values)
    if not (every.view(np.uint64) == every[0].view(np.uint64)).all():
        fail("%s differs between ranks: %s" % (what, every.tolist()))


def flat(weights):
    return np.concatenate([np.asarray(w, np.float64).ravel()
                           for w in weights])


def digits(n_train):
    """The Quick Start's data and split: n_train training samples and
    200 test samples."""
    train, test = keras_lenet5.digits(n_test=200)
    return (train[0][:n_train], train[1][:n_train]), test


lenet5 = keras_lenet5.lenet5_model_generator


def mlp(seed=1, batchnorm=False):
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((8,)), keras.layers.Dense(16, activation="tanh",
              kernel_regularizer=keras.regularizers.L2(1e-3))]
    if batchnorm:
        layers.append(keras.layers.BatchNormalization())
    layers.append(keras.layers.Dense(3))
    return keras.Sequential(layers)


def mlp_data(n=90, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = (np.argmax(x[:, :3] + 0.3 * x[:, 3:6], axis=1)).astype(np.int32)
    return x, y


def compiled_mlp(lr=0.05, **kw):
    model = tnt.Model(mlp(**kw))
    model.compile(optimizer=keras.optimizers.SGD(lr, momentum=0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True),
                  metrics=["accuracy"])
    return model


# ---- proof --------------------------------------------------------------

def part_proof(out):
    keras.utils.set_random_seed(3)
    (x, y), (xt, yt) = digits(480)
    model = tnt.Model(lenet5())
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
        len(x), seed=11).batch(32)
    test = tf.data.Dataset.from_tensor_slices((xt, yt)).batch(32)
    hist = model.fit(train, epochs=2, verbose=0)
    ev = model.evaluate(test, verbose=0)
    same_on_all_ranks(flat(model.get_weights()), "LeNet-5 weights")
    same_on_all_ranks(ev, "LeNet-5 evaluate")
    same_on_all_ranks(hist.history["loss"], "LeNet-5 history")
    if ev[1] < 0.5:
        fail("LeNet-5 accuracy %.3f after 2 epochs (expected > 0.5)" % ev[1])
    # predict over the ranks against the model applied to the whole set
    pred = model.predict(test, verbose=0)
    direct = model.model(xt, training=False).numpy()
    if pred.shape != direct.shape or not np.allclose(pred, direct,
                                                     rtol=1e-5, atol=1e-6):
        fail("predict differs from the model applied to the test set")
    same_on_all_ranks(pred, "predict")

    # uneven micro-batches: global batch 30 (p = 4: 8, 8, 7, 7), with an L2
    # regularizer, whose gradient must not be counted p times
    x2, y2 = mlp_data()
    m2 = compiled_mlp()
    ds2 = tf.data.Dataset.from_tensor_slices((x2, y2)).batch(30)
    h2 = m2.fit(ds2, epochs=3, verbose=0)
    ev2 = m2.evaluate(tf.data.Dataset.from_tensor_slices((x2, y2)).batch(
        30), verbose=0)
    same_on_all_ranks(flat(m2.get_weights()), "MLP weights")
    same_on_all_ranks(ev2, "MLP evaluate")
    if RANK == 0:
        np.savez(os.path.join(out, "p%d_lenet.npz" % SIZE),
                 *model.get_weights())
        np.savez(os.path.join(out, "p%d_mlp.npz" % SIZE), *m2.get_weights())
        with open(os.path.join(out, "p%d.json" % SIZE), "w") as f:
            json.dump({"lenet_eval": [float(v) for v in ev],
                       "lenet_loss": hist.history["loss"],
                       "mlp_eval": [float(v) for v in ev2],
                       "mlp_loss": h2.history["loss"]}, f)
    print("proof: LeNet-5 evaluate %r, MLP evaluate %r" % (ev, ev2))


# ---- features -----------------------------------------------------------

def expect_error(fn, words, what):
    try:
        fn()
    except (tnt.DatasetError, ValueError, TypeError) as e:
        for w in words:
            if w not in str(e):
                fail("%s: message %r lacks %r" % (what, str(e), w))
        return
    fail("%s: no error" % what)


def check_errors():
    x, y = mlp_data()
    m = compiled_mlp()
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    expect_error(lambda: m.fit(ds.batch(6).batch(2), verbose=0),
                 ["batched 2 times", "batch it once"], "double batch")
    expect_error(lambda: m.fit(ds.batch(6 * SIZE), verbose=0,
                               tnt_micro_batch_size=5),
                 ["tnt_micro_batch_size=5 does not fit"], "micro-batch")
    expect_error(lambda: m.fit(ds, verbose=0), ["is not batched"],
                 "unbatched")
    def batches():
        for i in range(0, len(x), 6):
            yield x[i:i + 6], y[i:i + 6]
    unknown = tf.data.Dataset.from_generator(batches, output_signature=(
        tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None,),
                                                            tf.int32)))
    expect_error(lambda: m.fit(unknown, verbose=0), ["is not known"],
                 "unknown batch size")
    expect_error(lambda: m.fit(x, y, verbose=0), ["tf.data.Dataset"],
                 "numpy input")
    expect_error(lambda: tnt.Model(m, parallel_strategy="pipelining"),
                 ["only ParallelStrategy.DATA"], "strategy")
    expect_error(lambda: m.fit(ds, verbose=0, tnt_micro_batch_size=0),
                 ["must be a positive int"], "micro-batch size 0")
    for k in ("batch_size", "validation_split"):
        expect_error(lambda: m.fit(ds.batch(6), verbose=0, **{k: 0.5}),
                     [k + " is not supported"], k)
    expect_error(lambda: m.evaluate(x, y, verbose=0), ["tf.data.Dataset"],
                 "numpy input to evaluate")
    expect_error(lambda: m.predict(ds.batch(6), verbose=0, batch_size=6),
                 ["batched with the global batch size"], "predict batch_size")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.compile(optimizer="sgd", loss="mse", jit_compile=True)
    if not any("jit_compile=True is not supported" in str(i.message)
               for i in w) or m.model.jit_compile:
        fail("jit_compile=True: no warning, or XLA left on")
    print("features: errors ok")


def check_default_seed():
    """Run before anything sets a seed: importing tntcomm.keras set
    TensorFlow's global seed (TNT_DEFAULT_SEED, 42) on every rank, so a
    shuffle without a seed gives the same order everywhere (without it
    every rank would draw its own: their micro-batches would overlap)."""
    from tensorflow.python.framework import random_seed
    seed = random_seed.get_seed(None)[0]
    if seed != int(os.environ.get("TNT_DEFAULT_SEED", "42")):
        fail("global seed after import is %r" % seed)
    order = np.fromiter(tf.data.Dataset.range(64).shuffle(64)
                        .as_numpy_iterator(), np.float64)
    if np.array_equal(order, np.arange(64)):
        fail("the unseeded shuffle did not shuffle")
    same_on_all_ranks(order, "an unseeded shuffle's order")
    print("features: default seed ok")


def check_datasets(tmp):
    x, y = mlp_data(96)
    micro = 4
    # an unbatched dataset with tnt_micro_batch_size == batching with
    # micro * p: bitwise the same weights
    a = compiled_mlp()
    a.fit(tf.data.Dataset.from_tensor_slices((x, y)), epochs=2, verbose=0,
          tnt_micro_batch_size=micro)
    b = compiled_mlp()
    b.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(micro * SIZE),
          epochs=2, verbose=0, tnt_micro_batch_size=micro)
    if not np.array_equal(flat(a.get_weights()), flat(b.get_weights())):
        fail("unbatched + tnt_micro_batch_size differs from batch(micro*p)")
    # tnt_distribute_dataset=False: every rank its own shard
    c = compiled_mlp()
    own = tf.data.Dataset.from_tensor_slices((x, y)).shard(SIZE, RANK)
    c.fit(own.batch(micro), epochs=1, verbose=0, tnt_distribute_dataset=False)
    same_on_all_ranks(flat(c.get_weights()), "weights, own datasets")
    # validation data, distributed and not
    d = compiled_mlp()
    val = tf.data.Dataset.from_tensor_slices((x[:40], y[:40]))
    h = d.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(12),
              validation_data=val.batch(10), epochs=2, verbose=0)
    same_on_all_ranks(h.history["val_loss"], "val_loss")
    ev = d.evaluate(val.batch(10), verbose=0)
    if abs(ev[0] - h.history["val_loss"][-1]) > 1e-6 * abs(ev[0]):
        fail("val_loss %r is not evaluate's %r" % (h.history["val_loss"][-1],
                                                   ev[0]))
    h = d.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(12),
              validation_data=val, epochs=1, verbose=0,
              tnt_validation_micro_batch_size=2)
    h = d.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(12),
              validation_data=val.batch(4), epochs=1, verbose=0,
              tnt_distribute_validation_dataset=False)
    # evaluate on local data (not distributed): each rank's own, then
    # aggregated: the same on every rank
    ev = d.evaluate(val.shard(SIZE, RANK).batch(4), verbose=0,
                    tnt_distribute_dataset=False)
    same_on_all_ranks(ev, "evaluate of own datasets")
    print("features: datasets ok")


def check_eager():
    """run_eagerly=True: every gradient handed over, then waited for, one
    op at a time; the same training as in a tf.function to rounding."""
    x, y = mlp_data(96)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(12)
    graph = compiled_mlp()
    graph.fit(ds, epochs=2, verbose=0)
    eager = tnt.Model(mlp())
    eager.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), metrics=["accuracy"],
                  run_eagerly=True)
    eager.fit(ds, epochs=2, verbose=0)
    same_on_all_ranks(flat(eager.get_weights()), "weights (eager)")
    a, b = flat(graph.get_weights()), flat(eager.get_weights())
    if np.linalg.norm(a - b) > 1e-5 * np.linalg.norm(a):
        fail("eager training differs from tf.function's by %.3g"
             % (np.linalg.norm(a - b) / np.linalg.norm(a)))
    print("features: eager ok")


def check_callbacks(tmp):
    x, y = mlp_data(96)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(12)
    m = compiled_mlp()
    seen, local, master_calls = [], [], []

    class Own(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            local.append(logs["loss"])

    class Count(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            master_calls.append(epoch)

    ckpt = os.path.join(tmp, "ckpt.keras")
    cbs = [keras.callbacks.LambdaCallback(
               on_epoch_end=lambda e, logs: seen.append(logs["loss"])),
           keras.callbacks.LearningRateScheduler(lambda e, lr: 0.05 / (e + 1)),
           keras.callbacks.ModelCheckpoint(ckpt),
           keras.callbacks.CSVLogger(os.path.join(tmp, "log_%d.csv" % RANK)),
           ] + ([keras.callbacks.TensorBoard(
               os.path.join(tmp, "tb_%d" % RANK))] if HAVE_TB else []) + [
           keras.callbacks.ProgbarLogger(),
           keras.callbacks.History(),
           tnt.keras.callbacks.Callback(Own(), aggregate_logs=False),
           tnt.keras.callbacks.Callback(Count(), run_on_all_ranks=False)]
    h = m.fit(ds, epochs=3, verbose=0, callbacks=cbs)
    same_on_all_ranks(seen, "LambdaCallback's logs")
    if seen != h.history["loss"]:
        fail("LambdaCallback saw %r, history %r" % (seen, h.history["loss"]))
    lr = float(m.optimizer.learning_rate.numpy())
    if abs(lr - 0.05 / 3) > 1e-7:
        fail("LearningRateScheduler: lr %r, expected %r" % (lr, 0.05 / 3))
    if not os.path.exists(ckpt):
        fail("ModelCheckpoint: %s missing right after fit" % ckpt)
    loaded = tnt.models.load_model(ckpt, compile=False)
    if not np.array_equal(flat(loaded.get_weights()), flat(m.get_weights())):
        fail("the checkpoint's weights are not the model's")
    tntcomm.barrier()
    for r in range(SIZE):
        csv = os.path.exists(os.path.join(tmp, "log_%d.csv" % r))
        tb = os.path.exists(os.path.join(tmp, "tb_%d" % r))
        if not HAVE_TB:
            tb = r == 0
        if (csv, tb) != (r == 0, r == 0):
            fail("CSVLogger/TensorBoard of rank %d: files %r, expected on "
                 "the master only" % (r, (csv, tb)))
    if master_calls != ([0, 1, 2] if RANK == 0 else []):
        fail("run_on_all_ranks=False ran %r times" % master_calls)
    everyone = gathered(local)
    if SIZE > 1 and (everyone == everyone[0]).all():
        fail("aggregate_logs=False saw the aggregate: %r" % everyone.tolist())
    # the aggregate is the samples' mean: mean of the ranks' local means
    # (equal micro-batches here) over the last epoch... checked for the
    # last epoch's loss through evaluate-free arithmetic is not exact
    # (running means), so only the first epoch's, whose state is one sum
    agg = gathered(seen)[0]
    if abs(everyone[:, 0].mean() - agg[0]) > 1e-5 * abs(agg[0]):
        fail("aggregate loss %r is not the mean of the ranks' %r"
             % (agg[0], everyone[:, 0].tolist()))

    # EarlyStopping and ReduceLROnPlateau: stop/reduce on every rank alike
    m = compiled_mlp()
    h = m.fit(ds, epochs=6, verbose=0, callbacks=[
        keras.callbacks.EarlyStopping(monitor="loss", min_delta=10.0,
                                      patience=1),
        keras.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=10.0,
                                          patience=0, factor=0.5)])
    if len(h.history["loss"]) != 2:
        fail("EarlyStopping ran %d epochs, expected 2"
             % len(h.history["loss"]))
    lr = float(m.optimizer.learning_rate.numpy())
    same_on_all_ranks([lr], "ReduceLROnPlateau's lr")
    if lr >= 0.05:
        fail("ReduceLROnPlateau left lr at %r" % lr)
    # TerminateOnNaN: a NaN in the master's part only stops every rank
    xn = x.copy()
    xn[0, 0] = np.nan
    m = compiled_mlp()
    h = m.fit(tf.data.Dataset.from_tensor_slices((xn, y)).batch(12),
              epochs=3, verbose=0,
              callbacks=[keras.callbacks.TerminateOnNaN()])
    if len(h.history["loss"]) != 1 or not np.isnan(h.history["loss"][0]):
        fail("TerminateOnNaN: history %r" % h.history["loss"])
    # the BatchNorm warning, on the master, when the micro-batch is < 16
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = compiled_mlp(batchnorm=True)
        m.fit(ds, epochs=1, verbose=0)
    said = any("BatchNormalization" in str(i.message) for i in w)
    if said != (RANK == 0):
        fail("BatchNorm warning said %r" % said)
    # ... and none from 16 samples a micro-batch (p = 3: 17, 16, 16)
    xb, yb = mlp_data(49 * SIZE)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = compiled_mlp(batchnorm=True)
        m.fit(tf.data.Dataset.from_tensor_slices((xb, yb)).batch(
            16 * SIZE + 1), epochs=1, verbose=0)
    if any("BatchNormalization" in str(i.message) for i in w):
        fail("BatchNorm warning at 16 samples a micro-batch")
    # TensorBoard on every rank, each into LOG_DIR/rank_R, when asked
    if HAVE_TB:
        os.environ["TNT_TENSORBOARD_ON_ALL_DEVICES"] = "true"
        try:
            m = compiled_mlp()
            m.fit(ds, epochs=1, verbose=0, callbacks=[
                keras.callbacks.TensorBoard(os.path.join(tmp, "tball"))])
        finally:
            del os.environ["TNT_TENSORBOARD_ON_ALL_DEVICES"]
        tntcomm.barrier()
        for r in range(SIZE):
            if not os.listdir(os.path.join(tmp, "tball", "rank_%d" % r)):
                fail("TNT_TENSORBOARD_ON_ALL_DEVICES: rank %d wrote "
                     "nothing" % r)
    print("features: callbacks ok%s" % (
        "" if HAVE_TB else " (TensorBoard not checked: no tensorboard "
        "package in this interpreter)"))


def check_save_load(tmp):
    x, y = mlp_data()
    m = compiled_mlp()
    m.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(30), epochs=1,
          verbose=0)
    ref = flat(m.get_weights())
    path = os.path.join(tmp, "model.keras")
    m.save(path)
    for f in (lambda: tnt.models.load_model(path, compile=False),
              lambda: tnt.models.load_model(path)):
        if not np.array_equal(flat(f().get_weights()), ref):
            fail("load_model after save: other weights")
    wpath = os.path.join(tmp, "w.weights.h5")
    m.save_weights(wpath)
    # spoil the weights on this rank only, then load: the master's file
    m.model.set_weights([w + RANK + 1 for w in m.get_weights()])
    m.load_weights(wpath)
    if not np.array_equal(flat(m.get_weights()), ref):
        fail("load_weights: other weights")
    # set_weights: the master's weights win
    m.set_weights([np.full_like(w, RANK) for w in m.get_weights()])
    if flat(m.get_weights()).any():
        fail("set_weights did not take the master's weights")
    m.set_weights([w for w in np.split(ref, np.cumsum(
        [w.size for w in m.get_weights()])[:-1])] and
        [r.reshape(w.shape).astype(w.dtype) for r, w in zip(
            np.split(ref, np.cumsum([w.size for w in m.get_weights()])[:-1]),
            m.get_weights())])
    tnt.models.save_model(m, os.path.join(tmp, "m2.keras"))
    m2 = tnt.models.load_model(os.path.join(tmp, "m2.keras"))
    if not np.array_equal(flat(m2.get_weights()), ref):
        fail("save_model/load_model: other weights")
    # without tnt_save_all_devices the master alone writes
    m.save(os.path.join(tmp, "only_%d.keras" % RANK))
    m.save_weights(os.path.join(tmp, "only_%d.weights.h5" % RANK))
    for r in range(SIZE):
        for ext in ("keras", "weights.h5"):
            there = os.path.exists(os.path.join(tmp, "only_%d.%s" % (r, ext)))
            if there != (r == 0):
                fail("save (%s) without tnt_save_all_devices: rank %d's "
                     "file %s" % (ext, r, "written" if there else "missing"))
    own = os.path.join(tmp, "own_%d.keras" % RANK)
    m.save(own, tnt_save_all_devices=True)
    for r in range(SIZE):
        if not os.path.exists(os.path.join(tmp, "own_%d.keras" % r)):
            fail("tnt_save_all_devices: rank %d's file missing" % r)
    j = tnt.models.model_from_json(m.to_json())
    c = tnt.models.model_from_config(m.get_config())
    k = tnt.models.clone_model(m)
    for mm, what in ((j, "model_from_json"), (c, "model_from_config"),
                     (k, "clone_model")):
        same_on_all_ranks(flat(mm.get_weights()), what)
    m.summary(print_fn=lambda *a, **kw: None)
    print("features: save/load ok")


def check_resume(tmp):
    """Training resumed from a ModelCheckpoint continues where it stopped:
    4 epochs in one go against 2 epochs, then tnt.models.load_model of the
    checkpoint (weights, optimizer state with its step count and momenta)
    and fit(initial_epoch=2, epochs=4): bitwise the same weights, and the
    same per-epoch loss. A learning rate that depends on the epoch and
    momentum make both the epoch and the optimizer state count."""
    x, y = mlp_data(96)
    # a shuffle that is the same every epoch: a fresh pipeline after the
    # restart must give the batches the uninterrupted run saw
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
        96, seed=7, reshuffle_each_iteration=False).batch(12)

    def schedule():
        return keras.callbacks.LearningRateScheduler(
            lambda e, lr: 0.05 / (e + 1))

    whole = compiled_mlp()
    hw = whole.fit(ds, epochs=4, verbose=0, callbacks=[schedule()])
    ckpt = os.path.join(tmp, "resume.keras")
    first = compiled_mlp()
    h1 = first.fit(ds, epochs=2, verbose=0, callbacks=[
        schedule(), keras.callbacks.ModelCheckpoint(ckpt)])
    resumed = tnt.models.load_model(ckpt)
    steps = int(resumed.optimizer.iterations.numpy())
    if steps != 2 * 96 // 12:
        fail("resumed optimizer at step %d, expected %d" % (steps,
                                                            2 * 96 // 12))
    h2 = resumed.fit(ds, initial_epoch=2, epochs=4, verbose=0,
                     callbacks=[schedule()])
    same_on_all_ranks(flat(resumed.get_weights()), "resumed weights")
    if not np.array_equal(flat(resumed.get_weights()),
                          flat(whole.get_weights())):
        fail("resumed training differs from the uninterrupted one by %.3g"
             % np.abs(flat(resumed.get_weights()) -
                      flat(whole.get_weights())).max())
    if h1.history["loss"] + h2.history["loss"] != hw.history["loss"]:
        fail("losses %r + %r, uninterrupted %r" % (
            h1.history["loss"], h2.history["loss"], hw.history["loss"]))
    print("features: resume ok")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--part", choices=["proof", "features"], required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    tmp = os.path.join(args.out, "features_p%d" % SIZE)
    if args.part == "proof":
        part_proof(args.out)
    else:
        if RANK == 0:
            os.makedirs(tmp, exist_ok=True)
        tntcomm.barrier()
        check_default_seed()
        check_errors()
        check_datasets(tmp)
        check_eager()
        check_callbacks(tmp)
        check_save_load(tmp)
        check_resume(tmp)
    print("rank %d: all checks passed" % RANK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
