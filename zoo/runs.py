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

`zoo.load(DIR)` reopens it as a `Translator` or a `Captioner`. Files are written to a
temporary name and renamed, so a crash never leaves a half-written one.
"""

import json
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
CHECKPOINTS = "checkpoints"
BEST_WEIGHTS = "best.weights.h5"
BEST_MANIFEST = "best.json"
TENSORBOARD = "tensorboard"


class RunDirectoryError(ZooUserError):
    """A run directory that is missing, incomplete or unreadable."""


def vocabulary_files(roles, training):
    """Role -> file name of a run's vocabularies, for its training settings.

    A run whose settings name no "tokenizer" is a WordPiece run (every run
    was before SentencePiece came); with "shared_vocabulary" every role
    reads one file.

    Args:
        roles: the task's vocabulary roles ("source", "target").
        training: the run's training settings.
    """
    suffix = VOCABULARY_SUFFIXES[training.get("tokenizer") or "wordpiece"]
    if training.get("shared_vocabulary") and len(roles) > 1:
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
