"""What a training run reports after each epoch besides Keras' losses: the
validation split's BLEU, and the best epoch's weights kept."""

import json
import logging
import operator

import keras

from zoo import runs

logger = logging.getLogger(__name__)

# How each monitored figure improves.
_BETTER = {"val_bleu": operator.gt, "val_loss": operator.lt}


class ValidationBleu(keras.callbacks.Callback):
    """Adds `val_bleu`, the validation split's greedy BLEU, to each epoch's logs.

    Keras has no metric that decodes; this runs the run's own translator
    after each epoch. Callbacks later in the list receive the same logs,
    so `CSVLogger`, `History` and `TensorBoard` record `val_bleu` when this
    callback comes before them.

    Args:
        validate: `(model, config) -> float`, the task data's `validate`.
        config: the run's config (what the translator reads).
    """

    def __init__(self, validate, config):
        super().__init__()
        self.validate = validate
        self.config = config

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["val_bleu"] = float(self.validate(self.model, self.config))


def read_best(out, monitor, epochs_done):
    """The best `monitor` value of the epochs done, from `best.json`, or None.

    A manifest of an epoch after `epochs_done` (written before a crash
    undid that epoch) does not count: the resumed run writes it again.
    """
    path = out / runs.BEST_MANIFEST
    try:
        best = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if best.get("monitor") != monitor or best.get("epochs_done", epochs_done + 1) > epochs_done:
        return None
    return best.get("value")


class BestCheckpoint(keras.callbacks.Callback):
    """Keeps the weights of the best epoch so far as `best.weights.h5`.

    Keras' `ModelCheckpoint(save_best_only=True)` writes its file in place
    (a kill during the write loses the best weights) and forgets the best
    value when a run resumes; here the weights are written atomically, then
    `best.json` (monitor, value, epochs done), which a resumed run reads.

    Args:
        out: the run directory.
        monitor: "val_bleu" (higher is better) or "val_loss" (lower).
        epochs_done: epochs finished before this `fit` (resuming).
    """

    def __init__(self, out, monitor, epochs_done=0):
        super().__init__()
        self.out = out
        self.monitor = monitor
        self.best = read_best(out, monitor, epochs_done)

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        value = float(value)
        if self.best is not None and not _BETTER[self.monitor](value, self.best):
            return
        self.best = value
        runs.save_weights(self.model, self.out / runs.BEST_WEIGHTS)
        runs.write_json(
            self.out / runs.BEST_MANIFEST,
            {"monitor": self.monitor, "value": value, "epochs_done": epoch + 1},
        )
