"""Early stopping (`early_stopping_patience`): a run whose validation loss
stops improving ends early, and ends as a finished run, also when it was
killed before it had finished; `--continue` trains it further."""

import json

import pytest

from tiny_configs import tiny_training_preset

from zoo import registry
from zoo import runs
from zoo.training import early_stopping
from zoo.training import loop as training
from zoo.training.config import TrainingError

pytestmark = pytest.mark.tensorflow_only  # tf.data training

TINY_RUN = tiny_training_preset(
    batch_size=16, epochs=4, average_last=3, early_stopping_patience=1
)


class Interrupted(Exception):
    pass


def test_a_run_stopped_early_is_finished_also_when_killed_before_its_end(
    tmp_path, monkeypatch
):
    monkeypatch.setitem(registry.PRESETS, "tiny_early", TINY_RUN)
    # No epoch improves on the first: patience 1 stops the run after epoch 2.
    monkeypatch.setattr(
        early_stopping.RunEarlyStopping, "_is_improvement", lambda self, value, best: best is None
    )
    finish = training._finish_run

    def killed(*args):
        raise Interrupted  # after the last epoch's checkpoint, before the final weights

    monkeypatch.setattr(training, "_finish_run", killed)
    out = tmp_path / "run"
    with pytest.raises(Interrupted):
        training.train("tiny_early", out, verbose=0, evaluate_test=False)
    monkeypatch.setattr(training, "_finish_run", finish)
    # Resumed, it finds the run stopped and fits no epoch more.
    training.train("tiny_early", out, verbose=0, evaluate_test=False)

    assert epochs_logged(out) == ["0", "1"]
    assert sorted(path.name for path in (out / runs.CHECKPOINTS).glob("*.json")) == [
        "epoch-01.json", "epoch-02.json",
    ]
    metrics = json.loads((out / runs.METRICS).read_text())
    assert metrics["stopped_early_after_epoch"] == 2
    assert metrics["resumed_from"] == "epoch-02"
    # average_last 3 of a run that did 2 epochs: those 2.
    assert metrics["averaged_checkpoints"] == ["epoch-01", "epoch-02"]
    with pytest.raises(TrainingError, match="already holds a finished run"):
        training.train("tiny_early", out, verbose=0, evaluate_test=False)

    # Continued, it trains on, until an epoch fails to improve on the best.
    training.train("tiny_early", out, continue_run=True, epochs=6, verbose=0, evaluate_test=False)
    assert epochs_logged(out) == ["0", "1", "2"]
    assert json.loads((out / runs.METRICS).read_text())["stopped_early_after_epoch"] == 3


def epochs_logged(out):
    return [row.split(",")[0] for row in (out / runs.HISTORY).read_text().split()[1:]]
