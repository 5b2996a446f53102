"""A Keras training that survives the death of ranks: an MLP on the 8x8
digits that scikit-learn ships, data-parallel with tntcomm.keras, under
tnt.elastic (docs/keras.md, "Going on after a rank died").

    tnt-run -n 4 --elastic --interpreter .venv/bin/python \\
        examples/keras_elastic.py --kill-rank 1 --kill-step 70

(with PYTHONPATH=build/plugins/python from the build tree). The training
runs in a function decorated with tnt.elastic.run; a KerasState commits
the weights and the optimizer's variables when fit starts and after every
epoch (CommitStateCallback). When a rank dies, the survivors shrink the
world to themselves, take the furthest commit and run the function again:
fit(initial_epoch=state.epoch) repeats the interrupted epoch with each
global batch split over the survivors. The shuffle has a seed and
reshuffle_each_iteration=False, so that the repeated epoch sees the
batches an undisturbed run would.

--kill-rank R --kill-step S: rank R (of the start) kills itself with
SIGKILL before global step S, to show it. The master prints each
epoch's loss (an epoch repeated after a death prints again), the test
accuracy and whether every rank ends with bitwise the same weights;
--dump-weights FILE writes them (.npz, master). --plain trains without
tnt.elastic, to show what a death looks like there: fit raises
tntcomm.TntError with code tntcomm.PEER_LOST on every survivor.
"""
import argparse
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

from weights_check import ranks_agree  # noqa: E402

tnt = None       # tntcomm.keras, imported by main() after the arguments
tntcomm = None


def digits(n_test=359, seed=1):
    """(x_train, y_train), (x_test, y_test): pixels in [0, 1]."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def mlp():
    return keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(64, activation="tanh"),
        keras.layers.Dense(64, activation="tanh"),
        keras.layers.Dense(10)])


class KillAt(keras.callbacks.Callback):
    """Rank `rank` (of the start) kills itself before global step `step`:
    a crash, for the tests."""

    def __init__(self, rank, step, steps_per_epoch):
        super().__init__()
        self.mine = rank == tnt.get_rank()
        self.step = step
        self.steps_per_epoch = steps_per_epoch
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.mine and \
                self.epoch * self.steps_per_epoch + batch == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class PrintLoss(keras.callbacks.Callback):
    """The epoch's loss, printed by whichever rank is the master now."""

    def on_epoch_end(self, epoch, logs=None):
        if tnt.is_master_rank():
            print("epoch %3d  loss %.7f" % (epoch + 1, logs["loss"]),
                  flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=0)
    p.add_argument("--dump-weights", default="")
    p.add_argument("--min-accuracy", type=float, default=0.9)
    p.add_argument("--plain", action="store_true",
                   help="fit without tnt.elastic (a death: TntError)")
    args = p.parse_args()
    if args.epochs < 1 or args.global_batch < 1:
        p.error("--epochs and --global-batch must be positive")
    if args.kill_step < 0:
        p.error("--kill-step must be 0 or more")
    global tnt, tntcomm
    import tntcomm  # noqa: F811
    import tntcomm.keras as tnt  # noqa: F811  (starts communication)

    # the same seed everywhere: the shuffle's order must be the same on
    # every rank (the initial weights are the master's anyway)
    keras.utils.set_random_seed(args.seed)
    (x, y), (xt, yt) = digits()
    model = tnt.Model(mlp())
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=args.lr,
                                                 momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
        len(x), seed=args.seed, reshuffle_each_iteration=False).batch(
        args.global_batch)
    test = tf.data.Dataset.from_tensor_slices((xt, yt)).batch(
        args.global_batch)
    steps = -(-len(x) // args.global_batch)
    callbacks = [KillAt(args.kill_rank, args.kill_step, steps), PrintLoss()]
    if tnt.is_master_rank():
        print("keras_elastic: %d ranks, %d training and %d test samples, "
              "global batch %d, %d steps an epoch"
              % (tnt.get_size(), len(x), len(xt), args.global_batch, steps),
              flush=True)

    if args.plain:
        rank = tnt.get_rank()
        try:
            model.fit(train, epochs=args.epochs, verbose=0,
                      callbacks=callbacks)
        except tntcomm.TntError as e:
            if e.code != tntcomm.PEER_LOST:
                raise
            print("keras_elastic: rank %d: fit raised TntError with code "
                  "PEER_LOST (raised in %s)" % (rank, e.call), flush=True)
            return 0
        print("keras_elastic: rank %d: fit ended without an error"
              % rank, flush=True)
        return 1

    state = tnt.elastic.KerasState(model, epoch=0)

    @tnt.elastic.run
    def train_and_test(state):
        model.fit(train, epochs=args.epochs, initial_epoch=state.epoch,
                  verbose=0,
                  callbacks=callbacks + [tnt.elastic.CommitStateCallback(
                      state)])
        return model.evaluate(test, verbose=0)

    loss, accuracy = train_and_test(state)
    weights = model.get_weights()
    agree = ranks_agree(weights, tntcomm.allgather)
    if tnt.is_master_rank():
        print("test accuracy %.4f (%d samples)" % (accuracy, len(xt)))
        print("weights %s on all %d rank%s"
              % ("identical" if agree else "DIFFER", tnt.get_size(),
                 "" if tnt.get_size() == 1 else "s"), flush=True)
        if args.dump_weights:
            np.savez(args.dump_weights, *weights)
    if not agree:
        return 1
    if accuracy < args.min_accuracy:
        print("keras_elastic: test accuracy %.4f is below --min-accuracy %g"
              % (accuracy, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
