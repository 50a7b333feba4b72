"""Training checkpoints that survive a crash, and resuming from them.

A checkpoint is two files in the run directory's `checkpoints/` folder:

    epoch-02.weights.h5              the model's and the optimizer's variables
    epoch-02.json                    its manifest: how far training had got
                                     (epochs and steps done), the weights
                                     file's size and SHA-256

and, when checkpoints every N steps are asked for, `epoch-03-step-000040.*`
inside an epoch. Each file is written to a temporary name and renamed, the
weights first, so a checkpoint exists only once its manifest does, and the
manifest's checksum catches a weights file that was truncated or damaged
later. `latest_checkpoint` walks the manifests from the newest and returns
the first whose weights are intact, saying what it skipped and why.

Keras' own `BackupAndRestore` callback keeps a single backup, writes it in
place (a kill during the write damages it), and restarts a half-done epoch
from its beginning; this module keeps the previous checkpoint until the next
is complete and resumes inside an epoch.
"""

import json
import logging
import re
from pathlib import Path
from typing import NamedTuple

import keras

from zoo import files
from zoo import runs

logger = logging.getLogger(__name__)

# How many step checkpoints to keep: the newest, and one to fall back to.
_STEP_CHECKPOINTS_KEPT = 2
_MANIFEST = re.compile(r"epoch-(\d+)(?:-step-(\d+))?\.json")


class Checkpoint(NamedTuple):
    """A complete checkpoint: where training stood when it was written.

    Attributes:
        weights: Path of the `.weights.h5` file (model and optimizer).
        epochs_done: int, epochs finished.
        steps_done: int, batches finished of the next epoch (0 at an epoch's end).
    """

    weights: Path
    epochs_done: int
    steps_done: int

    @property
    def name(self):
        return self.weights.name[: -len(".weights.h5")]

    def describe(self, epochs):
        where = f"{self.epochs_done} of {epochs} epochs done"
        if self.steps_done:
            where += f", and {self.steps_done} steps of epoch {self.epochs_done + 1}"
        return f"{self.name} ({where})"


def checkpoint_name(epochs_done, steps_done=0):
    """`epoch-NN` after an epoch, `epoch-NN-step-SSSSSS` inside epoch NN."""
    if steps_done:
        return f"epoch-{epochs_done + 1:02d}-step-{steps_done:06d}"
    return f"epoch-{epochs_done:02d}"


def save_checkpoint(model, folder, epochs_done, steps_done=0):
    """Writes the checkpoint of `model` (weights and optimizer state) atomically.

    Returns:
        The `Checkpoint`.
    """
    folder = Path(folder)
    name = checkpoint_name(epochs_done, steps_done)
    weights = folder / f"{name}.weights.h5"
    runs.save_weights(model, weights)
    runs.write_json(
        folder / f"{name}.json",
        {
            "weights": weights.name,
            "epochs_done": epochs_done,
            "steps_done": steps_done,
            **files.fingerprint(weights),
            "optimizer_steps": _optimizer_steps(model),
            "seed_states": [
                keras.ops.convert_to_numpy(state).tolist() for state in _seed_states(model)
            ],
            "metric_states": {
                variable.path: keras.ops.convert_to_numpy(variable).tolist()
                for variable in model.metrics_variables
            },
        },
    )
    return Checkpoint(weights, epochs_done, steps_done)


def _optimizer_steps(model):
    if model.optimizer is None:
        return None
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def _seed_states(model):
    """The state variables of the model's random seed generators (dropout).

    `save_weights` leaves them out; without them a resumed run would draw
    other dropout masks than an uninterrupted one.
    """
    return [v for v in model.variables if v.path.endswith("seed_generator_state")]


def _read_manifest(checkpoint):
    return json.loads(checkpoint.weights.with_name(f"{checkpoint.name}.json").read_text())


def _restore_metric_states(model, manifest):
    """Sets the model's running metrics (the epoch's mean loss so far) to
    those a step checkpoint saved.

    `fit` resets them at each epoch's start, so without this a run resumed
    inside an epoch would log the mean of that epoch's remaining batches
    only, not of all of them.
    """
    saved = manifest.get("metric_states", {})
    for variable in model.metrics_variables:
        if variable.path in saved:
            variable.assign(saved[variable.path])


def _remove(checkpoint):
    for path in (checkpoint.weights, checkpoint.weights.with_name(f"{checkpoint.name}.json")):
        path.unlink(missing_ok=True)


def _manifests(folder):
    """Every checkpoint manifest in `folder`, newest first, as (path, position)."""
    found = []
    for path in Path(folder).glob("epoch-*.json"):
        match = _MANIFEST.fullmatch(path.name)
        if match:
            epoch, step = int(match.group(1)), int(match.group(2) or 0)
            # A step checkpoint of epoch N has done N - 1 epochs.
            found.append((path, (epoch - 1, step) if step else (epoch, 0)))
    return sorted(found, key=lambda item: item[1], reverse=True)


def _check(manifest_path):
    """The `Checkpoint` a manifest describes, or the reason it is unusable."""
    try:
        manifest = json.loads(manifest_path.read_text())
        weights = manifest_path.with_name(manifest["weights"])
        expected = {"bytes": manifest["bytes"], "sha256": manifest["sha256"]}
        position = int(manifest["epochs_done"]), int(manifest["steps_done"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"its manifest {manifest_path.name} is unreadable ({error})"
    problem = files.fingerprint_problem(weights, expected)
    if problem:
        return None, problem
    return Checkpoint(weights, *position), None


def latest_checkpoint(folder):
    """The newest intact checkpoint in `folder`, or None.

    A checkpoint whose manifest is unreadable or whose weights file is
    missing, truncated or damaged is skipped with a warning naming it and
    the reason, and the one before it is tried.
    """
    for manifest_path, _ in _manifests(folder):
        checkpoint, problem = _check(manifest_path)
        if checkpoint is not None:
            return checkpoint
        logger.warning(
            "checkpoint %s is unusable: %s; trying the one before it",
            manifest_path.name[: -len(".json")],
            problem,
        )
    return None


def epoch_checkpoints(folder):
    """The intact checkpoints written at epoch ends in `folder`, oldest first
    (those unusable are left out, as `latest_checkpoint` skips them)."""
    found = []
    for manifest_path, (_, steps_done) in _manifests(folder):
        checkpoint, _ = _check(manifest_path)
        if checkpoint is not None and steps_done == 0:
            found.append(checkpoint)
    return found[::-1]


def restore(model, checkpoint):
    """Loads a checkpoint's model and optimizer variables into `model`.

    `model` must be built and compiled; its optimizer's variables are
    created first so that the checkpoint's values have somewhere to go.
    """
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    model.load_weights(checkpoint.weights)
    manifest = _read_manifest(checkpoint)
    # Keras only warns when an optimizer's variables don't fit the model's.
    if _optimizer_steps(model) != manifest.get("optimizer_steps"):
        raise ValueError(
            f"the optimizer state was not restored (step {_optimizer_steps(model)}, "
            f"checkpoint step {manifest.get('optimizer_steps')}): was the model "
            "compiled with another optimizer?"
        )
    states = _seed_states(model)
    if len(manifest.get("seed_states", [])) == len(states):
        for variable, value in zip(states, manifest["seed_states"]):
            variable.assign(value)


class CheckpointCallback(keras.callbacks.Callback):
    """Writes a checkpoint after every epoch, and every `every_steps` batches.

    Epoch checkpoints are all kept (`zoo` users compare epochs); step
    checkpoints are removed once their epoch's checkpoint is written, and
    only the newest two are kept meanwhile. A `fit` resumed inside an epoch
    (`first_step` > 0) starts that epoch's running metrics from the step
    checkpoint it resumes, so the epoch logs the mean loss of all its
    batches, as an uninterrupted run does.

    Args:
        folder: the checkpoints folder.
        every_steps: optional int, also checkpoint every this many batches.
        first_step: int, batches of the first epoch already done before this
            `fit` (a run resumed inside an epoch), so step numbers count
            from the epoch's start.
    """

    def __init__(self, folder, every_steps=None, first_step=0):
        super().__init__()
        self.folder = Path(folder)
        self.every_steps = every_steps
        self.first_step = first_step
        self._epoch = 0
        self._step_checkpoints = []

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        if self.first_step:
            # fit reset the metrics just before this call.
            resumed = Checkpoint(
                self.folder / f"{checkpoint_name(epoch, self.first_step)}.weights.h5",
                epoch,
                self.first_step,
            )
            _restore_metric_states(self.model, _read_manifest(resumed))

    def on_train_batch_end(self, batch, logs=None):
        steps_done = self.first_step + batch + 1
        if self.every_steps and steps_done % self.every_steps == 0:
            self._step_checkpoints.append(
                save_checkpoint(self.model, self.folder, self._epoch, steps_done)
            )
            while len(self._step_checkpoints) > _STEP_CHECKPOINTS_KEPT:
                _remove(self._step_checkpoints.pop(0))

    def on_epoch_end(self, epoch, logs=None):
        save_checkpoint(self.model, self.folder, epoch + 1)
        self.first_step = 0
        self._step_checkpoints = []
        # Also those of a crashed earlier attempt at this epoch.
        for path in self.folder.glob(f"epoch-{epoch + 1:02d}-step-*"):
            path.unlink(missing_ok=True)
