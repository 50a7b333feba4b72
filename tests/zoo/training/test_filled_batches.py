"""A bucket's last batch filled up to the bucket's size (the fixed shapes a
compiled train step gets, `zoo.data.pipeline.bucketed_batches`) trains each
recipe as the batch without its filler rows does."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tiny_configs import SOURCE
from tiny_configs import TARGET_IN
from tiny_configs import TARGET_OUT
from tiny_configs import tiny_model

from zoo import registry
from zoo.data import pipeline
from zoo.training.losses import TokenCrossentropy

# One bucket [8, 16): its batches are padded to 15 tokens and filled to 5 rows.
BOUNDARIES, BATCH_SIZES, LENGTH, ROWS = [8, 16], [4, 5, 5], 15, 5


def translation_recipes():
    """The first preset of each translation recipe on torch, whose eager
    steps cost the least; the Transformer on TensorFlow and an RNN on JAX
    (the layers' backend code is checked against NumPy by their own tests)."""
    first = {}
    for name in sorted(registry.PRESETS):
        recipe = registry.get_preset(name)["recipe"]
        if registry.task_of(recipe) == "translation":
            first.setdefault(recipe, name)
    return {
        "tensorflow": [first["transformer"]], "jax": [first["rnnsearch"]]
    }.get(keras.backend.backend(), sorted(first.values()))


def padded(rows):
    return np.pad(rows, [(0, 0), (0, LENGTH - rows.shape[1])])


def trained_weights(name, inputs, targets):
    keras.utils.set_random_seed(0)
    model = tiny_model(name)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=TokenCrossentropy())
    model.train_on_batch(inputs, targets)
    return model.get_weights()


@pytest.mark.parametrize("name", translation_recipes())
def test_a_filled_batch_trains_as_the_batch_alone(name):
    source, target_in, target_out = (padded(rows) for rows in (SOURCE, TARGET_IN, TARGET_OUT))
    filled = pipeline._filled(
        *(tf.constant(rows) for rows in (source, target_in, target_out)),
        boundaries=BOUNDARIES, batch_sizes=BATCH_SIZES,
    )
    filled_source, filled_in, filled_out = (value.numpy() for value in filled)
    assert filled_source.shape == filled_out.shape == (ROWS, LENGTH)
    np.testing.assert_array_equal(filled_out[len(SOURCE):], 0)

    expected = trained_weights(name, {"source": source, "target_in": target_in}, target_out)
    actual = trained_weights(name, {"source": filled_source, "target_in": filled_in}, filled_out)
    for before, after in zip(expected, actual, strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
