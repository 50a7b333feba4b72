"""What a training run reports besides Keras' losses: the validation
split's BLEU after each epoch, its loss and BLEU every N batches inside the
epochs, and the best epoch's weights kept."""

import contextlib
import csv
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


class StepValidation(keras.callbacks.Callback):
    """Validates every `every_steps` batches inside each epoch and appends
    a row (epoch, step, val_loss[, val_bleu]) to `validation.csv`; the
    epoch's end adds its own row from `fit`'s validation.

    Keras' `fit` validates once an epoch only (`validation_freq` counts
    epochs); a long epoch of a large corpus needs a look inside it, as
    OpenNMT-py's `valid_steps` gives. `evaluate` resets the model's running
    metrics, so the epoch's mean training loss so far is put back after it:
    the training itself, its logs and history.csv are those of a run
    without this callback. Comes after `ValidationBleu` in the callbacks,
    whose `val_bleu` the epoch's row records.

    Args:
        every_steps: validate after each multiple of this many batches of
            an epoch.
        valid_data: the validation split's batches.
        out: the run directory.
        validate: optional `(model, config) -> float`, the validation
            BLEU (`ValidationBleu`'s); None: the loss only.
        config: the run's config (what the translator reads).
        first_step: batches of the first epoch done before this `fit`.
        last_step: the epoch's batch count, after which `fit` validates
            anyway; None: not known exactly.
        stream: optional text stream that gets a line for each validation.
    """

    def __init__(
        self, every_steps, valid_data, out, validate=None, config=None, first_step=0,
        last_step=None, stream=None,
    ):
        super().__init__()
        self.every_steps = every_steps
        self.valid_data = valid_data
        self.path = out / runs.STEP_VALIDATION
        self.validate = validate
        self.config = config
        self.first_step = first_step
        self.last_step = last_step
        self.stream = stream
        self.columns = ["val_loss"] + (["val_bleu"] if validate is not None else [])
        self._epoch = 0
        self._steps = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._steps = self.first_step + batch + 1
        if self._steps % self.every_steps or self._steps == self.last_step:
            return
        model = self.model
        running = [keras.ops.convert_to_numpy(v) for v in model.metrics_variables]
        with _global_random_state_kept():
            results = model.evaluate(self.valid_data, verbose=0, return_dict=True)
            values = {"val_loss": float(results["loss"])}
            if self.validate is not None:
                values["val_bleu"] = float(self.validate(model, self.config))
        for variable, value in zip(model.metrics_variables, running):
            variable.assign(value)
        self._write(values)
        if self.stream is not None:
            shown = ", ".join(f"{name} {value:.4g}" for name, value in values.items())
            self.stream.write(f"validation at epoch {self._epoch + 1} step {self._steps}: {shown}\n")
            self.stream.flush()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if "val_loss" in logs:
            self._write({name: logs.get(name) for name in self.columns})
        self.first_step = 0

    def _write(self, values):
        new = not self.path.is_file()
        with self.path.open("a", newline="") as file:
            writer = csv.writer(file)
            if new:
                writer.writerow(["epoch", "step", *self.columns])
            cells = ["" if values.get(c) is None else f"{float(values[c]):.6g}" for c in self.columns]
            writer.writerow([self._epoch, self._steps, *cells])


def _global_random_state_kept():
    """A context that leaves the backend's global random state as it found
    it. On torch an unseeded `Dropout` draws from torch's global generator,
    which `evaluate` draws from too: without this, validating would change
    the dropout masks of the batches after it."""
    if keras.backend.backend() == "torch":
        import torch

        return torch.random.fork_rng()
    return contextlib.nullcontext()


def keep_validation_rows(out, epochs_done, steps_done):
    """Cuts validation.csv to the rows before the checkpoint a run resumes
    from (`epochs_done` epochs and `steps_done` batches of the next), so
    that the resumed run appends each validation once."""
    path = out / runs.STEP_VALIDATION
    if not path.is_file():
        return
    with path.open(newline="") as file:
        header, *rows = list(csv.reader(file))

    def done(row):
        epoch, step = int(row[0]), int(row[1])
        return epoch < epochs_done or (epoch == epochs_done and step <= steps_done)

    with path.open("w", newline="") as file:
        csv.writer(file).writerows([header, *filter(done, rows)])
