"""Validation inside the epochs (`validate_every_steps`): a row in
validation.csv every N batches and at each epoch's end, and a training
otherwise the same as without it."""

import csv

import keras
import numpy as np
import pytest
import tensorflow as tf

from tiny_configs import tiny_training_preset

from zoo import registry
from zoo import runs
from zoo.training import loop as training
from zoo.training import validation
from zoo.training.config import TrainingConfig
from zoo.training.config import TrainingError

# Several batches an epoch, so that an epoch holds validations of its own.
TINY_RUN = tiny_training_preset(batch_size=4, epochs=2)
EVERY = 2


def rows(path):
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def fit_small_model(callbacks):
    """A small model with dropout fit 2 epochs of 8 batches, validated at
    each epoch's end."""
    random = np.random.default_rng(0)
    inputs, targets = random.random((32, 3), "float32"), random.random((32, 2), "float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(8, "relu"), keras.layers.Dropout(0.3),
         keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse")
    history = model.fit(
        inputs, targets, batch_size=4, epochs=2, shuffle=False, verbose=0,
        validation_data=VALID, callbacks=callbacks,
    )
    return model, history.history


VALID = tf.data.Dataset.from_tensor_slices(
    tuple(np.random.default_rng(1).random((8, n), "float32") for n in (3, 2))
).batch(4)


def test_on_every_backend_a_fit_validated_inside_its_epochs_is_unchanged(tmp_path):
    # `evaluate` inside an epoch resets the running loss, and on JAX it moves
    # the model's state out of the fit loop and back.
    model, history = fit_small_model([validation.StepValidation(3, VALID, tmp_path)])
    expected_model, expected_history = fit_small_model([])
    assert history == expected_history
    for actual, expected in zip(model.get_weights(), expected_model.get_weights(), strict=True):
        np.testing.assert_array_equal(actual, expected)
    logged = rows(tmp_path / runs.STEP_VALIDATION)
    assert [(row["epoch"], row["step"]) for row in logged] == [
        ("0", "3"), ("0", "6"), ("0", "8"), ("1", "3"), ("1", "6"), ("1", "8")
    ]
    assert [float(logged[i]["val_loss"]) for i in (2, 5)] == pytest.approx(
        expected_history["val_loss"], rel=1e-6
    )


@pytest.mark.tensorflow_only  # tf.data training: once
def test_a_run_logs_a_validation_every_n_batches_and_at_each_epochs_end(tmp_path, monkeypatch):
    # That the training is the same as without it: the test above.
    monkeypatch.setitem(registry.PRESETS, "tiny_run", TINY_RUN)
    run = training.train(
        "tiny_run", tmp_path / "run", verbose=0, evaluate_test=False, validate_every_steps=EVERY
    )
    logged = rows(run / runs.STEP_VALIDATION)
    history = rows(run / runs.HISTORY)
    for epoch in range(2):
        steps = [int(row["step"]) for row in logged if int(row["epoch"]) == epoch]
        batches = steps[-1]
        assert batches > EVERY, "the tiny run needs more batches an epoch than N"
        assert steps == [*range(EVERY, batches, EVERY), batches]
        epoch_end = [row for row in logged if int(row["epoch"]) == epoch][-1]
        np.testing.assert_allclose(
            float(epoch_end["val_loss"]), float(history[epoch]["val_loss"]), rtol=1e-5
        )
    losses = [float(row["val_loss"]) for row in logged]
    assert all(np.isfinite(losses)) and len(set(losses)) == len(losses), losses


def test_a_resumed_run_keeps_the_rows_before_its_checkpoint(tmp_path):
    path = tmp_path / runs.STEP_VALIDATION
    path.write_text(
        "epoch,step,val_loss\n0,2,3.0\n0,5,2.5\n1,2,2.0\n1,4,1.9\n1,5,1.8\n2,2,1.7\n"
    )
    validation.keep_validation_rows(tmp_path, epochs_done=1, steps_done=2)
    assert path.read_text().splitlines() == ["epoch,step,val_loss", "0,2,3.0", "0,5,2.5", "1,2,2.0"]
    validation.keep_validation_rows(tmp_path, epochs_done=1, steps_done=0)
    assert path.read_text().splitlines() == ["epoch,step,val_loss", "0,2,3.0", "0,5,2.5"]


def test_a_bad_interval_is_refused_in_one_line():
    with pytest.raises(TrainingError, match="validate_every_steps must be"):
        TrainingConfig(validate_every_steps=0)
