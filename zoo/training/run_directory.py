"""Opening a run directory to train into: a new run, a resumed one, or a
finished one continued (`zoo train --continue`)."""

import dataclasses
import logging
import shutil
from pathlib import Path

import keras

from zoo import runs
from zoo.training import checkpoints
from zoo.training import validation
from zoo.training.config import TrainingError
from zoo.training.config import of_run
from zoo.training.schedules import scheduled_updates

logger = logging.getLogger(__name__)

# What `--continue` may change in a run's training settings: it trains more
# epochs, may end with another average and stop early otherwise (a run that
# stopped early goes on), and keeps the schedule's length.
_CONTINUABLE = ("epochs", "average_last", "early_stopping_patience", "schedule_epochs")


def open_run_directory(out, overwrite, preset, training, continue_run=False):
    """The run directory, whether it holds a run to resume, and the
    `TrainingConfig` to train it with.

    An empty or missing directory starts a new run; so does any directory
    with `overwrite`. A directory holding an unfinished run (no final
    weights) of the same preset and training settings is resumed. With
    `continue_run`, a finished run of the same preset and settings but
    fewer epochs is resumed too, with `training` keeping the run's
    `schedule_epochs` (`_continued_settings`). Anything else is refused
    with a one-line error.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        # Refused with --overwrite too: a run replaces a folder, never a file.
        raise TrainingError(f"--out {str(out)!r} is a file, not a folder; choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        config_path = out / runs.CONFIG
        if not config_path.is_file():
            raise TrainingError(
                f"run directory {str(out)!r} already exists and is not empty; "
                "choose another --out or pass --overwrite"
            )
        if (out / runs.WEIGHTS).is_file() and not continue_run:
            raise TrainingError(
                f"run directory {str(out)!r} already holds a finished run; choose another "
                "--out, pass --overwrite, or train it further with --continue and more --epochs"
            )
        previous = runs.read_json(config_path)
        # Read as a config, so that a run written before a setting existed
        # compares with that setting's default.
        before = of_run(previous)
        ignored = _CONTINUABLE if continue_run else ()
        changed = sorted(
            field.name
            for field in dataclasses.fields(training)
            if field.name not in ignored
            and getattr(training, field.name) != getattr(before, field.name)
        )
        if previous.get("preset") != preset or changed:
            state = "a finished" if (out / runs.WEIGHTS).is_file() else "an unfinished"
            raise TrainingError(
                f"run directory {str(out)!r} holds {state} run "
                f"of {previous.get('preset')!r} with other settings "
                f"({', '.join(changed) or 'preset'}); resume it with the same "
                "options, or choose another --out, or pass --overwrite"
            )
        if continue_run:
            training = dataclasses.replace(training, schedule_epochs=_continued_schedule(out, before, training))
        return out, True, training
    if continue_run:
        raise TrainingError(
            f"--continue: {str(out)!r} holds no run to continue; drop --continue to start one"
        )
    if out.exists() and overwrite:
        shutil.rmtree(out)
    try:
        (out / runs.CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TrainingError(
            f"cannot create the run directory {str(out)!r}: {error.strerror}; choose another --out"
        ) from None
    return out, False, training


def _continued_schedule(out, previous, training):
    """The schedule length a continued run keeps from the run it continues
    (its first `epochs`), so that the schedule goes on where it stopped.

    Refuses an `epochs` that the run's newest checkpoint has already done.
    """
    checkpoint = checkpoints.latest_checkpoint(out / runs.CHECKPOINTS)
    if checkpoint is None:
        raise TrainingError(
            f"--continue: run directory {str(out)!r} has no intact checkpoint to continue "
            "from; choose another --out or pass --overwrite"
        )
    if training.epochs <= checkpoint.epochs_done:
        raise TrainingError(
            f"--continue: run directory {str(out)!r} has done {checkpoint.epochs_done} "
            f"epochs already; ask for more with --epochs (above {checkpoint.epochs_done})"
        )
    return previous.schedule_length


def schedule_note(model, training, batches_per_epoch):
    """One line on what the learning rate of a continued run does."""
    step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    if training.schedule == "inverse_sqrt":
        how = "goes on decaying with 1/sqrt(update)"
    elif step >= scheduled_updates(training, batches_per_epoch):
        how = "stays at its floor, a tenth of the peak"
    else:
        how = f"goes on decaying to a tenth of the peak by epoch {training.schedule_length}"
    return (
        f"continuing to {training.epochs} epochs: the {training.schedule} learning-rate "
        f"schedule does not restart; it goes on from update {step} (rate {rate:.3g}) and {how}"
    )


def resume(model, out, epochs):
    """Restores the newest intact checkpoint of `out` into `model`, or None."""
    checkpoint = checkpoints.latest_checkpoint(out / runs.CHECKPOINTS)
    if checkpoint is None:
        logger.warning("resuming %s: no complete checkpoint yet, starting from the beginning", out)
        return None
    model.build()
    try:
        checkpoints.restore(model, checkpoint)
    except (OSError, ValueError) as error:
        raise TrainingError(
            f"cannot restore checkpoint {checkpoint.weights}: {error}; "
            "delete it to resume from the one before, or pass --overwrite"
        ) from None
    logger.warning("resuming %s from checkpoint %s", out, checkpoint.describe(epochs))
    _keep_history_rows(out / runs.HISTORY, checkpoint.epochs_done)
    validation.keep_validation_rows(out, checkpoint.epochs_done, checkpoint.steps_done)
    return checkpoint


def _keep_history_rows(path, epochs_done):
    """Cuts history.csv to its header and the rows of the epochs done, so
    that a resumed run appends each epoch once."""
    if path.is_file():
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[: 1 + epochs_done]))
