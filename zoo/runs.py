"""The run directory: everything a trained model needs, in one folder.

    config.json          preset, recipe, task, model config, training settings
    source.vocab         source WordPiece vocabulary, one token a line
                         (translation only)
    target.vocab         target (or caption) vocabulary
      or source.model,   the SentencePiece models instead, when the training's
      target.model       "tokenizer" is "sentencepiece"
      or shared.vocab /  one vocabulary for both languages, when its
      shared.model       "shared_vocabulary" is true
    model.weights.h5     the final weights
    checkpoints/         model + optimizer after each epoch (epoch-NN.weights.h5
                         and its manifest epoch-NN.json; see zoo.training.checkpoints)
    best.weights.h5      the weights of the best epoch by validation BLEU (or
                         loss), and best.json: which epoch, which value
    model.unaveraged.weights.h5, average.json
                         after `zoo average`: the weights training ended
                         with, and which checkpoints model.weights.h5 averages
    tensorboard/         TensorBoard event files (loss, val_loss, val_bleu,
                         learning rate per epoch)
    history.csv          loss (and val_loss, val_bleu) per epoch
    metrics.json         final figures (loss, time, tokens per second, BLEU)
    manifest.json        the size and SHA-256 of each file `zoo.load` reads
                         (config.json, the vocabularies, model.weights.h5),
                         written last, whenever those are (train, average)

`zoo.load(DIR)` reopens it as a `Translator` or a `Captioner`. Files are written to a
temporary name and renamed, so a crash never leaves a half-written one; the
manifest catches those damaged later (`check_manifest`).
"""

import json
import logging
from pathlib import Path

from zoo import files
from zoo.errors import ZooUserError

CONFIG = "config.json"
SOURCE_VOCABULARY = "source.vocab"
TARGET_VOCABULARY = "target.vocab"

# The tokenizers a run's vocabularies can be ("tokenizer" in its training
# settings), each with the suffix of its files.
TOKENIZERS = ("wordpiece", "sentencepiece")
VOCABULARY_SUFFIXES = {"wordpiece": ".vocab", "sentencepiece": ".model"}
SHARED = "shared"
WEIGHTS = "model.weights.h5"
METRICS = "metrics.json"
HISTORY = "history.csv"
# Validation inside the epochs (`validate_every_steps`), one row each.
STEP_VALIDATION = "validation.csv"
CHECKPOINTS = "checkpoints"
BEST_WEIGHTS = "best.weights.h5"
BEST_MANIFEST = "best.json"
TENSORBOARD = "tensorboard"
MANIFEST = "manifest.json"

logger = logging.getLogger(__name__)
# The runs without a manifest already warned about, so that a command that
# checks a run twice (the CLI, then `zoo.load`) warns once.
_UNCHECKED_WARNED = set()


class RunDirectoryError(ZooUserError):
    """A run directory that is missing, incomplete or unreadable."""


def vocabulary_files(roles, training):
    """Role -> file name of a run's vocabularies, for its training settings.

    A run whose settings name no "tokenizer" is a WordPiece run (every run
    was before SentencePiece came); with "shared_vocabulary" every role
    reads one file.

    Args:
        roles: the task's vocabulary roles ("source", "target").
        training: the run's `TrainingConfig`.
    """
    suffix = VOCABULARY_SUFFIXES[training.tokenizer or "wordpiece"]
    if training.shared_vocabulary and len(roles) > 1:
        return {role: SHARED + suffix for role in roles}
    return {role: role + suffix for role in roles}


def write_json(path, data):
    """Writes `data` as JSON atomically (temporary file, then rename)."""
    with files.replacing(path) as temporary:
        temporary.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def save_weights(model, path):
    """`model.save_weights` atomically (Keras wants the `.weights.h5` suffix)."""
    with files.replacing(path) as temporary:
        model.save_weights(temporary)


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise RunDirectoryError(f"cannot read {path}: {error}") from None


def write_manifest(run_dir, names):
    """Records the size and SHA-256 of the run's files `names` in its
    manifest.json, which `check_manifest` later holds them to."""
    run_dir = Path(run_dir)
    recorded = {name: files.fingerprint(run_dir / name) for name in names}
    write_json(run_dir / MANIFEST, {"files": recorded})


def check_manifest(run_dir):
    """Raises a one-line `RunDirectoryError` naming the first file of
    `run_dir` that is not what its manifest.json recorded (truncated,
    damaged, changed in place).

    A run written before runs had a manifest is loaded unchecked, with a
    warning, once per process.
    """
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST
    if not path.is_file():
        if run_dir.resolve() not in _UNCHECKED_WARNED:
            _UNCHECKED_WARNED.add(run_dir.resolve())
            logger.warning(
                "run directory %r has no %s (written by an older zoo): its files are "
                "loaded unchecked; retrain it to have them checked",
                str(run_dir),
                MANIFEST,
            )
        return
    recorded = read_json(path).get("files")
    if not isinstance(recorded, dict):
        raise RunDirectoryError(f"{path} lists no files; restore it from a copy or retrain the run")
    for name, expected in recorded.items():
        try:
            problem = files.fingerprint_problem(run_dir / name, expected)
        except (KeyError, TypeError):
            problem = f"{name}'s entry in {MANIFEST} is unreadable"
        if problem:
            raise RunDirectoryError(
                f"run directory {str(run_dir)!r}: {problem}; restore {name} from a copy "
                "or retrain the run"
            )
