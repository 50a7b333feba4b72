"""Run by test_distributed.py in its own JAX process, which sees two CPU
devices (XLA_FLAGS, set by the test before JAX starts): trains the same tiny
token model from the same weights on the same global batches on one device
and with `zoo.training.distributed.fit` under --strategy data-parallel over
both devices, and prints, as one JSON line, how far apart the final weights
are. (A recipe would do, but compiling its recurrence twice costs minutes
on 2 cores; the loss, the optimizer and the strategy are what is tested.)"""

import json

import jax
import keras
import numpy as np

from zoo.training import distributed

from zoo.training import losses

VOCABULARY, LENGTH, BATCH, BATCHES = 13, 7, 8, 4


def batches():
    """Global batches of 8 rows; the first half of each has 1 target token a
    row, the second half 7, so the devices' shares differ in token count."""
    rng = np.random.default_rng(0)
    size = BATCH * BATCHES
    source = rng.integers(4, VOCABULARY, size=(size, LENGTH)).astype("int32")
    target = rng.integers(4, VOCABULARY, size=(size, LENGTH))
    lengths = np.where(np.arange(size) % BATCH < BATCH // 2, 1, LENGTH)
    target = np.where(np.arange(LENGTH)[None] < lengths[:, None], target, 0).astype("int32")
    return source, target


def train(strategy):
    with distributed.strategy_scope(strategy):
        keras.utils.set_random_seed(7)
        source = keras.Input((LENGTH,), dtype="int32")
        embedded = keras.layers.Embedding(VOCABULARY, 8)(source)
        hidden = keras.layers.Dense(8, activation="tanh")(embedded)
        model = keras.Model(source, keras.layers.Dense(VOCABULARY)(hidden))
        model.compile(
            optimizer=keras.optimizers.SGD(0.5, clipnorm=0.05),
            loss=losses.TokenCrossentropy(),
        )
    initial = [np.asarray(w) for w in model.get_weights()]
    source, target = batches()
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices((source, target)).batch(BATCH)
    history = distributed.fit(model, data, strategy=strategy, epochs=2, verbose=0)
    return [np.asarray(w) for w in model.get_weights()], initial, history.history["loss"]


def main():
    parallel = distributed.make_strategy("data-parallel")
    one_weights, initial, one_losses = train(None)
    weights, _, losses = train(parallel)
    print("RESULT " + json.dumps({
        "devices": len(jax.devices()),
        "replicas": distributed.replica_count(parallel),
        "difference": max(float(np.max(np.abs(w - o))) for w, o in zip(weights, one_weights)),
        "moved": max(float(np.max(np.abs(w - i))) for w, i in zip(weights, initial)),
        "losses": losses,
        "one_device_losses": one_losses,
    }))


if __name__ == "__main__":
    main()
