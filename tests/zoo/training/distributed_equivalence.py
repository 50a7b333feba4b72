"""Run by test_distributed.py in its own process: TensorFlow's logical
devices must be configured before TensorFlow first touches them.

Trains the same tiny token model from the same weights on the same global
batches (replicas holding different numbers of target tokens, clipping
active) on one device, with `zoo.training.distributed.fit` under MirroredStrategy
on two logical CPUs, and with its custom loop, and prints, as one JSON
line, how far the final weights are from one device's and what each run's
callbacks saw.

It also trains a Luong recipe (an LSTM recurrence) with the custom loop,
the multi-worker path, on batches of 8 and 1 rows: the 1-row batch leaves
the second replica an empty share inside the step's tf.function. (Not
under XLA: a jit-compiled step cannot reach the variables of a second
logical CPU in one process.)
"""

import json
import sys
from pathlib import Path

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from zoo.training import distributed  # noqa: E402
from zoo.training import losses  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[2]))  # tests/, for tiny_configs
import tiny_configs  # noqa: E402

VOCABULARY, LENGTH, BATCH, BATCHES = 13, 7, 8, 4


def dataset():
    """Each global batch of 8: its first half (replica 0) has 1 target token
    a row, its second half (replica 1) has 7."""
    rng = np.random.default_rng(0)
    size = BATCH * BATCHES
    source = rng.integers(4, VOCABULARY, size=(size, LENGTH))
    target = rng.integers(4, VOCABULARY, size=(size, LENGTH))
    lengths = np.where(np.arange(size) % BATCH < BATCH // 2, 1, LENGTH)
    target = np.where(np.arange(LENGTH)[None] < lengths[:, None], target, 0)
    target_in = np.concatenate([np.full((size, 1), 2), target[:, :-1]], axis=1)
    inputs = {"source": source.astype("int32"), "target_in": target_in.astype("int32")}
    return tf.data.Dataset.from_tensor_slices((inputs, target.astype("int32"))).batch(BATCH)


class Events(keras.callbacks.Callback):
    """The callback calls a run makes, in order."""

    def __init__(self):
        super().__init__()
        self.events = []

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("epoch_begin", epoch))

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(("batch_end", batch, sorted(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(("epoch_end", epoch, sorted(logs)))


def train(strategy, run, **fit_arguments):
    with distributed.strategy_scope(strategy):
        keras.utils.set_random_seed(7)
        # A recipe would do, but tracing its recurrence 5 times costs
        # minutes on 2 cores; the loss and the optimizer are what is tested.
        source = keras.Input((LENGTH,), dtype="int32", name="source")
        target_in = keras.Input((LENGTH,), dtype="int32", name="target_in")
        embedded = keras.layers.Embedding(VOCABULARY, 8)(source) + keras.layers.Embedding(
            VOCABULARY, 8
        )(target_in)
        logits = keras.layers.Dense(VOCABULARY)(keras.layers.Dense(8, activation="tanh")(embedded))
        model = keras.Model({"source": source, "target_in": target_in}, logits)
        model.compile(
            # A tiny clipnorm: every step clips, so clipping before the
            # replicas' gradients are summed would show.
            optimizer=keras.optimizers.SGD(0.5, clipnorm=0.05),
            loss=losses.TokenCrossentropy(),
        )
    initial = [np.asarray(w) for w in model.get_weights()]
    events = Events()
    history = run(
        model, dataset(), strategy=strategy, callbacks=[events], verbose=0, **fit_arguments
    )
    weights = [np.asarray(w) for w in model.get_weights()]
    return weights, history.history, int(model.optimizer.iterations.numpy()), events.events, initial


def train_recipe_with_an_empty_share(strategy, run):
    """Luong, tiny, one epoch of a batch of 8 rows then one of 1 row."""
    with distributed.strategy_scope(strategy):
        keras.utils.set_random_seed(7)
        # The paper's Luong, the model this check trained before the presets
        # gained a bidirectional encoder (with which the script ran past its
        # timeout once, on a loaded machine).
        model = tiny_configs.tiny_model(
            "luong_multi30k",
            bidirectional_encoder=False,
            attentional_activation="tanh",
            initial_state="encoder",
        )
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=losses.TokenCrossentropy())
    rows = np.arange(9) % len(tiny_configs.SOURCE)
    data = tf.data.Dataset.from_tensor_slices((
        {"source": tiny_configs.SOURCE[rows], "target_in": tiny_configs.TARGET_IN[rows]},
        tiny_configs.TARGET_OUT[rows],
    )).batch(8)
    history = run(model, data, strategy=strategy, epochs=1, verbose=0)
    return [np.asarray(w) for w in model.get_weights()], history.history["loss"]


def relative_difference(weights, reference):
    return max(
        float(np.max(np.abs(w - r)) / (np.max(np.abs(r)) + 1e-12))
        for w, r in zip(weights, reference)
    )


def main():
    mirrored = distributed.make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
    results = {"replicas": distributed.replica_count(mirrored)}
    settings = {
        "whole_epochs": dict(epochs=2, validation_data=dataset()),
        # One iterator across epochs: epoch 1 takes batches 0-2, epoch 2
        # batch 3 and, from a new pass, ... as keras' EpochIterator does.
        "steps_per_epoch": dict(epochs=3, initial_epoch=1, steps_per_epoch=3),
    }
    for setting, arguments in settings.items():
        one_device = train(None, distributed.fit, **arguments)
        runs = {"loop": distributed.custom_loop_fit}
        if setting == "whole_epochs":
            runs["fit"] = distributed.fit
        for name, run in runs.items():
            weights, history, iterations, events, initial = train(mirrored, run, **arguments)
            results[f"{setting}/{name}"] = {
                "weight_difference": relative_difference(weights, one_device[0]),
                "history": history,
                "one_device_history": one_device[1],
                "iterations": iterations,
                "one_device_iterations": one_device[2],
                "events_match": events == one_device[3],
                "moved": max(float(np.max(np.abs(w - i))) for w, i in zip(weights, initial)),
            }
    one_device, _ = train_recipe_with_an_empty_share(None, distributed.fit)
    weights, loss = train_recipe_with_an_empty_share(mirrored, distributed.custom_loop_fit)
    results["empty_share"] = {
        "weight_difference": relative_difference(weights, one_device),
        "loss": loss,
    }
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
