"""Checkpoint averaging: the mean of the weights of a run's last N epochs.

Averaging the last few checkpoints of a run (Vaswani et al. 2017 average
the last 5 or 20; fairseq's `average_checkpoints.py`, Marian's and
OpenNMT's averaging do the same) usually scores a little higher than the
last checkpoint alone. Every epoch's checkpoint is kept in `checkpoints/`
(see `zoo.training.checkpoints`), so any N up to the run's epochs can be
averaged after training.

    zoo average runs/transformer_multi30k --last 5

By default the average becomes the run's `model.weights.h5`, so `zoo
evaluate`, `zoo translate` and `zoo export` use it unchanged, and the
weights training ended with are kept as `model.unaveraged.weights.h5`
(kept once: averaging again never replaces them); `average.json` says
which checkpoints went in. `--out FILE` writes the average elsewhere and
leaves the run as it is.
"""

import numpy as np

from zoo import files
from zoo import registry
from zoo import runs
from zoo.errors import ZooUserError
from zoo.training import checkpoints

UNAVERAGED_WEIGHTS = "model.unaveraged.weights.h5"
AVERAGE_MANIFEST = "average.json"


class AveragingError(ZooUserError):
    """An averaging request that can't be carried out."""


def forget_average(run_dir):
    """Removes the record of an earlier average from `run_dir` (its
    `model.unaveraged.weights.h5` and `average.json`): a continued run has
    new weights to end with, which they no longer describe."""
    for name in (UNAVERAGED_WEIGHTS, AVERAGE_MANIFEST):
        (run_dir / name).unlink(missing_ok=True)


def average_weights(model, weights_files):
    """The mean of the model weights in `weights_files`, one array a weight.

    Each file is loaded into `model` (its optimizer's variables in the file
    are not read); floating-point weights are averaged in float64 and cast
    back to their dtype, any others (integer counters) taken from the last.
    """
    loaded = []
    for path in weights_files:
        model.load_weights(path)
        loaded.append(model.get_weights())
    averaged = []
    for values in zip(*loaded):
        if np.issubdtype(values[-1].dtype, np.floating):
            mean = np.mean(np.stack(values).astype(np.float64), axis=0)
            averaged.append(mean.astype(values[-1].dtype))
        else:
            averaged.append(values[-1])
    return averaged


def average_run(run_dir, last, out=None):
    """Averages the last `last` epoch checkpoints of the finished run `run_dir`.

    Args:
        run_dir: a finished run directory of `zoo train`.
        last: int >= 1, how many of the newest epoch checkpoints to average.
        out: optional path of the averaged weights file (must end in
            `.weights.h5`); default: the run's `model.weights.h5`, the
            original kept as `model.unaveraged.weights.h5`.

    Returns:
        `(path, names)`: the weights file written, and the checkpoints averaged.

    Raises:
        AveragingError: `last` is not a positive int, the run has fewer
            epoch checkpoints, or `out` does not end in `.weights.h5` or
            cannot be written.
    """
    from zoo.tasks import check_run_directory
    from zoo.tasks import write_run_manifest

    run_dir = check_run_directory(run_dir)
    if not isinstance(last, int) or isinstance(last, bool) or last < 1:
        raise AveragingError(f"--last must be an int >= 1; received {last!r}")
    if out is not None and not str(out).endswith(".weights.h5"):
        raise AveragingError(f"--out must end in .weights.h5 (Keras' weights files); got {str(out)!r}")
    if out is not None:
        files.check_writable(out, "--out", AveragingError)
    found = checkpoints.epoch_checkpoints(run_dir / runs.CHECKPOINTS)
    if len(found) < last:
        raise AveragingError(
            f"run directory {str(run_dir)!r} has {len(found)} intact epoch checkpoint(s), "
            f"fewer than --last {last}"
        )
    chosen = found[-last:]
    model = registry.build_model(runs.read_json(run_dir / runs.CONFIG))
    model.set_weights(average_weights(model, [c.weights for c in chosen]))
    names = [c.name for c in chosen]
    if out is not None:
        runs.save_weights(model, out)
        return out, names
    # The original first, so that a failure anywhere after leaves it kept.
    kept = run_dir / UNAVERAGED_WEIGHTS
    if not kept.exists():
        with files.replacing(kept) as temporary:
            temporary.write_bytes((run_dir / runs.WEIGHTS).read_bytes())
    runs.save_weights(model, run_dir / runs.WEIGHTS)
    runs.write_json(
        run_dir / AVERAGE_MANIFEST, {"checkpoints": names, "unaveraged": UNAVERAGED_WEIGHTS}
    )
    write_run_manifest(run_dir)
    return run_dir / runs.WEIGHTS, names
