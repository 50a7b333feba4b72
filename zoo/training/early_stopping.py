"""Early stopping: a run ends once its validation figure stops improving.

Keras' `EarlyStopping` callback decides. A zoo run calls `fit` more than
once, though: a run resumed after a crash, and the rest of an epoch
interrupted inside, are `fit`s of their own, and each resets the callback's
count of epochs without improvement. `RunEarlyStopping` counts on from the
epochs that history.csv already holds, so a resumed run stops after the
same epoch as an uninterrupted one.
"""

import csv
import logging

import keras

from zoo import runs

logger = logging.getLogger(__name__)

# How each figure improves: Keras' "auto" mode would take val_bleu for a
# loss, to be made smaller.
_MODES = {"val_loss": "min", "val_bleu": "max"}


def callback(out, training, bleu):
    """The early stopping of a run with `training`'s settings, or None when
    its `early_stopping_patience` is 0.

    Args:
        out: the run directory.
        training: the run's `TrainingConfig`.
        bleu: whether the run logs val_bleu; where it does not (a task
            without BLEU, or "multi-worker"), val_loss is watched instead,
            as `zoo.training.validation.BestCheckpoint` does.
    """
    if not training.early_stopping_patience:
        return None
    monitor = training.early_stopping_metric
    if monitor == "val_bleu" and not bleu:
        logger.warning("early stopping watches val_loss: this run logs no val_bleu")
        monitor = "val_loss"
    return RunEarlyStopping(out / runs.HISTORY, monitor, training.early_stopping_patience)


def stopped_already(callbacks):
    """Whether the `RunEarlyStopping` among `callbacks` finds, in the epochs
    done, that the run has stopped: no epoch left to fit."""
    return any(
        isinstance(each, RunEarlyStopping) and each.stopped_already() for each in callbacks
    )


class RunEarlyStopping(keras.callbacks.EarlyStopping):
    """Keras' `EarlyStopping`, counting from the epochs of history.csv.

    The run's weights stay those of its last epoch, as when it runs all its
    epochs (`best.weights.h5` keeps the best epoch's).

    Args:
        history: the path of the run's history.csv.
        monitor: "val_loss" or "val_bleu".
        patience: int >= 1, the epochs without improvement that stop the run.
    """

    def __init__(self, history, monitor, patience):
        super().__init__(monitor=monitor, patience=patience, mode=_MODES[monitor])
        self.history = history

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._replay_history()

    def stopped_already(self):
        """Whether the epochs done have run out the patience."""
        self.on_train_begin()
        return self.wait >= self.patience

    def _replay_history(self):
        """Sets the best value and the epochs waited since it as the epochs
        logged would have, one `on_epoch_end` each."""
        if self.monitor_op is None:
            self._set_monitor_op()
        for value in logged_values(self.history, self.monitor):
            self.wait += 1
            if self._is_improvement(value, self.best):
                self.best, self.wait = value, 0


def logged_values(history, name):
    """The values of column `name` in history.csv, one an epoch done (none
    when the file or the column is missing)."""
    try:
        with open(history, newline="") as rows:
            return [float(row[name]) for row in csv.DictReader(rows) if row.get(name)]
    except FileNotFoundError:
        return []
