"""Checkpoints and resuming: a killed training restarts where it stopped;
and a training repeated with the same settings ends with the same weights."""

import gzip
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

import zoo
import zoo.data
from zoo import registry
from zoo.training import checkpoints
from zoo.training import loop as training

pytestmark = pytest.mark.tensorflow_only  # tf.data training

TINY = dict(
    train_size=64, valid_size=16, epochs=2, batch_size=16, verbose=0, evaluate_test=False
)


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


def test_an_epoch_resumed_inside_logs_the_mean_loss_of_all_its_batches(tmp_path):
    # fit resets the running loss at each epoch's start: the resumed part of
    # an epoch must go on from the checkpoint's, not average its batches alone.
    inputs = np.linspace(-1, 1, 48, dtype="float32").reshape(16, 3)
    targets = np.ones((16, 2), "float32")

    def fresh_model():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer="adam", loss="mse")
        return model

    whole = fresh_model().fit(inputs, targets, batch_size=4, shuffle=False, verbose=0)

    interrupted = fresh_model()
    interrupted.fit(inputs[:8], targets[:8], batch_size=4, shuffle=False, verbose=0)
    checkpoints.save_checkpoint(interrupted, tmp_path, epochs_done=0, steps_done=2)
    resumed = fresh_model()
    checkpoints.restore(resumed, checkpoints.latest_checkpoint(tmp_path))
    rest = resumed.fit(
        inputs[8:], targets[8:], batch_size=4, shuffle=False, verbose=0,
        callbacks=[checkpoints.CheckpointCallback(tmp_path, first_step=2)],
    )
    np.testing.assert_allclose(rest.history["loss"], whole.history["loss"], rtol=1e-6)


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


# Four batches an epoch, a checkpoint after each.
KILLABLE = dict(TINY, checkpoint_every_steps=1)
TRAIN_IN_A_CHILD = (
    "import sys; from zoo.training import loop as training; "
    "training.train('rnnsearch_small', sys.argv[1], **{settings})"
)


def train_until_killed(out, killed_once, settings=KILLABLE):
    """Trains `settings` in a child process and SIGKILLs it as soon as
    `killed_once(out)` is true; fails if the child ended by itself."""
    process = subprocess.Popen(
        [sys.executable, "-c", TRAIN_IN_A_CHILD.format(settings=settings), str(out)],
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not killed_once(out) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the training ended before it was killed"


def checkpoint_names(out):
    return sorted(p.stem for p in (out / "checkpoints").glob("*.json"))


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory):
    return training.train("rnnsearch_small", tmp_path_factory.mktemp("whole") / "run", **KILLABLE)


def test_a_run_killed_before_any_checkpoint_starts_over_as_an_uninterrupted_one(
    tmp_path, uninterrupted_run
):
    # Killed once the run directory has its config. The run then starts over
    # in this process, after the fixture's training moved every global
    # random state of it (Python's, NumPy's, TensorFlow's, Keras' seed
    # generator): only the run's own seeding makes the weights, the dropout
    # masks and the batch order come out the same again, as the two runs of
    # `make demo` need. A kill inside an epoch: the streamed test below (the
    # synthetic corpus goes through the same stream, from memory).
    out = tmp_path / "run"
    train_until_killed(out, lambda out: (out / "config.json").exists())
    names = checkpoint_names(out) if (out / "checkpoints").exists() else []
    assert names == [], f"killed too late: {names}"

    out = training.train("rnnsearch_small", out, **KILLABLE)

    metrics = json.loads((out / "metrics.json").read_text())
    assert "resumed_from" not in metrics
    resumed = zoo.load(out).model.get_weights()
    expected_weights = zoo.load(uninterrupted_run).model.get_weights()
    for expected, actual in zip(expected_weights, resumed, strict=True):
        np.testing.assert_array_equal(actual, expected)
    # Each epoch's logged loss too: the mean over all its batches.
    history = (out / "history.csv").read_text()
    assert history == (uninterrupted_run / "history.csv").read_text()
    assert [line.split(",")[0] for line in history.splitlines()] == ["epoch", "0", "1"]
    # Step checkpoints are gone once their epoch's checkpoint is written.
    assert checkpoint_names(out) == ["epoch-01", "epoch-02"]


@pytest.fixture(scope="module")
def streamed_settings(tmp_path_factory):
    """`KILLABLE` on a corpus of two gzip shard pairs: streamed in windows
    of 24 pairs, its epoch's size estimated from a sample of 40."""
    folder = tmp_path_factory.mktemp("corpus")
    pairs = zoo.data.synthetic_corpus(84, seed=1)
    for shard, part in enumerate((pairs[:40], pairs[40:])):
        for side, name in ((0, "src"), (1, "tgt")):
            text = "".join(f"{pair[side]}\n" for pair in part)
            (folder / f"train.{shard}.{name}.gz").write_bytes(gzip.compress(text.encode()))
    corpus = f"{folder}/train.*.src.gz,{folder}/train.*.tgt.gz"
    return dict(
        KILLABLE, data=corpus, train_size=None, valid_size=8, tokenizer="wordpiece",
        vocabulary_size=60, shuffle_buffer=24, vocabulary_sample=40,
    )


def test_a_streamed_run_killed_inside_an_epoch_resumes_bit_for_bit(tmp_path, streamed_settings):
    whole = training.train("rnnsearch_small", tmp_path / "whole", **streamed_settings)
    metrics = json.loads((whole / "metrics.json").read_text())
    assert metrics["epoch_size_estimated"] and metrics["filter_counts_estimated"]
    # What the start of a run cost, each part within the whole.
    assert 0 <= metrics["read_seconds"] <= metrics["first_update_seconds"]
    assert 0 <= metrics["vocabulary_seconds"] <= metrics["first_update_seconds"]

    out = tmp_path / "run"
    step_checkpoint = out / "checkpoints" / "epoch-02-step-000002.json"
    train_until_killed(out, lambda out: step_checkpoint.exists(), streamed_settings)
    assert "epoch-02" not in checkpoint_names(out), "killed too late"
    out = training.train("rnnsearch_small", out, **streamed_settings)

    assert json.loads((out / "metrics.json").read_text())["resumed_from"].startswith("epoch-02-step")
    for expected, actual in zip(
        zoo.load(whole).model.get_weights(), zoo.load(out).model.get_weights(), strict=True
    ):
        np.testing.assert_array_equal(actual, expected)
    # Each epoch's logged loss too: the mean over all its batches.
    history = (out / "history.csv").read_text()
    assert history == (whole / "history.csv").read_text()
    assert [line.split(",")[0] for line in history.splitlines()] == ["epoch", "0", "1"]
    # Step checkpoints are gone once their epoch's checkpoint is written.
    assert checkpoint_names(out) == ["epoch-01", "epoch-02"]


def test_training_killed_mid_epoch_resumes_and_runs_only_the_remaining_epochs(
    tmp_path, capsys
):
    out = tmp_path / "run"
    argv = ["train", "rnnsearch_small", "--train-size", "256", "--valid-size", "16",
            "--test-size", "0", "--epochs", "3", "--batch-size", "16", "--out", str(out)]
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


def test_a_finished_run_continues_to_more_epochs_from_its_last_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "rnnsearch_small", "--train-size", "32", "--valid-size", "16",
            "--test-size", "0", "--batch-size", "16", "--average-last", "1", "--out", str(out)]
    assert run_cli(capsys, *argv, "--epochs", "1")[0] == 0
    first_row = (out / "history.csv").read_text().splitlines()[1]
    first_weights = zoo.load(out).model.get_weights()

    code, _, stderr = run_cli(capsys, *argv, "--epochs", "2", "--continue")
    assert code == 0, stderr
    assert "epoch-01 (1 of 2 epochs done)" in stderr
    assert "does not restart" in stderr and "stays at its floor" in stderr
    history = (out / "history.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in history] == ["epoch", "0", "1"]
    assert history[1] == first_row
    assert checkpoint_names(out) == ["epoch-01", "epoch-02"]
    assert json.loads((out / "metrics.json").read_text())["resumed_from"] == "epoch-01"
    config = json.loads((out / "config.json").read_text())["training"]
    assert (config["epochs"], config["schedule_epochs"]) == (2, 1)
    # The run's weights, and those its average of 1 replaced, are the second epoch's now.
    model = zoo.load(out).model
    assert any((a != b).any() for a, b in zip(model.get_weights(), first_weights))
    model.load_weights(out / "checkpoints" / "epoch-02.weights.h5")
    second_epoch = model.get_weights()
    for name in ("model.weights.h5", "model.unaveraged.weights.h5"):
        model.load_weights(out / name)
        for expected, actual in zip(second_epoch, model.get_weights(), strict=True):
            np.testing.assert_array_equal(actual, expected, name)

    code, _, stderr = run_cli(capsys, *argv, "--epochs", "2", "--continue")
    assert_one_line_error(code, stderr, "done 2 epochs", "--epochs")


@pytest.mark.parametrize(
    "options, words",
    [
        (["--continue"], ["no run to continue", "drop --continue"]),
        (["--continue", "--overwrite"], ["--continue", "--overwrite"]),
        ([], ["finished run", "--continue"]),
        (["--continue", "--batch-size", "8"], ["other settings", "batch_size"]),
    ],
    ids=["nothing_to_continue", "with_overwrite", "finished_without_continue", "other_settings"],
)
def test_continuing_a_run_that_cannot_be_continued_is_refused(tmp_path, capsys, options, words):
    out = tmp_path / "run"
    if options != ["--continue"]:
        out.mkdir()
        training_settings = registry.get_preset("rnnsearch_small")["training"]
        (out / "config.json").write_text(
            json.dumps({"preset": "rnnsearch_small", "training": training_settings.to_dict()})
        )
        (out / "model.weights.h5").write_bytes(b"")
    code, _, stderr = run_cli(capsys, "train", "rnnsearch_small", "--out", str(out), *options)
    assert_one_line_error(code, stderr, *words)


def test_an_epoch_is_checkpointed_only_after_its_history_row_is_written(tmp_path, monkeypatch):
    # A run killed between the two would resume after the epoch and never
    # write its row (history.csv, validation BLEU, best checkpoint).
    rows_when_checkpointed = []
    save = checkpoints.save_checkpoint

    def save_and_count_rows(model, folder, epoch, steps_done=0):
        if not steps_done:
            history = folder.parent / "history.csv"
            rows_when_checkpointed.append(len(history.read_text().splitlines()) - 1)
        return save(model, folder, epoch, steps_done)

    monkeypatch.setattr(checkpoints, "save_checkpoint", save_and_count_rows)
    training.train("rnnsearch_small", tmp_path / "run", **TINY)
    assert rows_when_checkpointed == [1, 2]


def test_unfinished_run_with_other_settings_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(
        json.dumps({"preset": "rnnsearch_small", "training": {"epochs": 9}})
    )
    code, _, stderr = run_cli(capsys, "train", "rnnsearch_small", "--out", str(out))
    assert_one_line_error(code, stderr, "other settings", "epochs", "--overwrite")
