"""Checkpoints and resuming: a killed training restarts where it stopped."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli

from zoo import checkpoints
from zoo import training
from zoo import translator

pytestmark = pytest.mark.tensorflow_only  # tf.data training

TINY = dict(train_size=64, epochs=2, batch_size=16, verbose=0, evaluate_test=False)


def tiny_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dropout(0.5)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0)
    return model


def test_checkpoint_round_trip_restores_optimizer_and_dropout_state(tmp_path):
    model = tiny_model()
    saved = checkpoints.save_checkpoint(model, tmp_path, epochs_done=1, steps_done=3)
    assert saved.name == "epoch-02-step-000003"
    seed_states = checkpoints._seed_states(model)
    assert seed_states, "the model has a dropout seed generator"
    expected = [keras.ops.convert_to_numpy(v) for v in model.variables]

    fresh = tiny_model()
    fresh.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0, epochs=3)  # move everything
    checkpoints.restore(fresh, checkpoints.latest_checkpoint(tmp_path))
    for variable, value in zip(fresh.variables, expected):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), value, variable.path)
    assert int(fresh.optimizer.iterations) == 1


def test_damaged_checkpoint_is_reported_and_the_previous_one_used(tmp_path, caplog):
    model = tiny_model()
    checkpoints.save_checkpoint(model, tmp_path, epochs_done=1)
    newest = checkpoints.save_checkpoint(model, tmp_path, epochs_done=2)
    assert checkpoints.latest_checkpoint(tmp_path) == newest

    data = newest.weights.read_bytes()
    newest.weights.write_bytes(data[: len(data) // 2])  # truncated, as by a full disk
    assert checkpoints.latest_checkpoint(tmp_path).name == "epoch-01"
    assert "epoch-02 is unusable" in caplog.text and "truncated" in caplog.text

    newest.weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit off
    assert checkpoints.latest_checkpoint(tmp_path).name == "epoch-01"
    assert "checksum" in caplog.text

    (tmp_path / "epoch-01.json").write_text("{not json")
    assert checkpoints.latest_checkpoint(tmp_path) is None


def test_a_checkpoint_without_its_manifest_does_not_count(tmp_path):
    model = tiny_model()
    checkpoints.save_checkpoint(model, tmp_path, epochs_done=1)
    newest = checkpoints.save_checkpoint(model, tmp_path, epochs_done=2)
    (tmp_path / "epoch-02.json").unlink()  # killed between the two renames
    assert newest.weights.is_file()
    assert checkpoints.latest_checkpoint(tmp_path).name == "epoch-01"


class Crash(Exception):
    pass


def test_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, monkeypatch):
    keras.utils.set_random_seed(0)
    training.train("rnnsearch_small", tmp_path / "whole", **TINY)

    # Crash in the second epoch, just after its second step checkpoint.
    save_at_step = checkpoints.CheckpointCallback.on_train_batch_end

    def crash_after_step_2_of_epoch_2(callback, batch, logs=None):
        save_at_step(callback, batch, logs)
        if callback._epoch == 1 and callback.first_step + batch + 1 == 2:
            raise Crash

    monkeypatch.setattr(
        checkpoints.CheckpointCallback, "on_train_batch_end", crash_after_step_2_of_epoch_2
    )
    keras.utils.set_random_seed(0)
    with pytest.raises(Crash):
        training.train("rnnsearch_small", tmp_path / "crashed", checkpoint_every_steps=1, **TINY)
    monkeypatch.undo()
    # A fresh process would start from other random weights: resuming must not care.
    keras.utils.set_random_seed(1)
    out = training.train("rnnsearch_small", tmp_path / "crashed", checkpoint_every_steps=1, **TINY)

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from"] == "epoch-02-step-000002"
    whole = translator.load(tmp_path / "whole").model.get_weights()
    resumed = translator.load(out).model.get_weights()
    for expected, actual in zip(whole, resumed):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    history = (out / "history.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in history] == ["epoch", "0", "1"]
    # Step checkpoints are gone once their epoch's checkpoint is written.
    assert sorted(p.name for p in (out / "checkpoints").glob("*.json")) == [
        "epoch-01.json", "epoch-02.json",
    ]


def test_training_killed_mid_epoch_resumes_and_runs_only_the_remaining_epochs(
    tmp_path, capsys
):
    out = tmp_path / "run"
    argv = ["train", "rnnsearch_small", "--train-size", "256", "--epochs", "3",
            "--batch-size", "16", "--out", str(out)]
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli", *argv],
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first_epoch = out / "checkpoints" / "epoch-01.json"
    deadline = time.monotonic() + 300
    while not first_epoch.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert first_epoch.exists(), "the training never finished its first epoch"
    assert not (out / "checkpoints" / "epoch-02.json").exists(), "killed too late"
    assert not (out / "model.weights.h5").exists()

    code, stdout, stderr = run_cli(capsys, *argv)
    assert code == 0, stderr
    assert "resuming" in stderr and "epoch-01 (1 of 3 epochs done)" in stderr
    assert "Epoch 1/3" not in stdout and "Epoch 2/3" in stdout and "Epoch 3/3" in stdout
    history = (out / "history.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in history] == ["epoch", "0", "1", "2"]
    assert json.loads((out / "metrics.json").read_text())["resumed_from"] == "epoch-01"

    # Finished now: a third call refuses instead of training again.
    code, _, stderr = run_cli(capsys, *argv)
    assert_one_line_error(code, stderr, "finished run", "--overwrite")


def test_unfinished_run_with_other_settings_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(
        json.dumps({"preset": "rnnsearch_small", "training": {"epochs": 9}})
    )
    code, _, stderr = run_cli(capsys, "train", "rnnsearch_small", "--out", str(out))
    assert_one_line_error(code, stderr, "other settings", "epochs", "--overwrite")
