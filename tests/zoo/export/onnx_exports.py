"""The tiny runs that the ONNX export tests export, and what they feed them."""

from pathlib import Path
from typing import Any
from typing import NamedTuple

import numpy as np
import tiny_configs

from zoo import registry
from zoo.data import synthetic_corpus
from zoo.training import untrained as training

# The shared tiny configs, with room for the longer test sentences.
TINY = {
    **tiny_configs.TINY,
    "transformer": {**tiny_configs.TINY["transformer"], "max_target_length": 40, "max_source_length": 40},
    "show_attend_tell": {**tiny_configs.TINY["show_attend_tell"], "max_target_length": 12},
}
# Every recipe that translates or captions, and each attention of its own
# decoding code: the fixed-vector RNNencdec (no attention), RNNsearch and
# its monotonic variant (a hard alignment carried in the state), Luong's
# local-p attention (a predicted window), GNMT, the Transformer (its cache
# write needs the export's ScatterND handler), and the captioner with soft
# and hard attention (an image source).
FAMILIES = [
    "rnnencdec_small",
    "rnnsearch_small",
    "rnnsearch_monotonic_small",
    "luong_local_p_general_small",
    "gnmt_small",
    "transformer_small",
    "show_attend_tell_small",
    "show_attend_tell_hard_small",
]
# One of each kind of folder, for the tests that run the folder alone: a
# WordPiece translator, a SentencePiece one, a captioner.
ALONE = ["rnnsearch_small", "transformer_small", "show_attend_tell_small"]
# Its export replaces (overwrite=True) a folder holding STALE: every export
# converts for seconds, so the overwrite path is checked on one of them.
OVERWRITTEN = "show_attend_tell_small"
# Its run has one SentencePiece vocabulary for both languages (shared.model).
SENTENCEPIECE = "transformer_small"
STALE = "stale.txt"
# Sentences of at most 8 word pieces: the Python API pads to a multiple of 8,
# so the Keras search is traced for one width only.
SENTENCES = [source for source, _ in synthetic_corpus(6, seed=3, min_length=3, max_length=6)]
IMAGES = np.random.default_rng(0).integers(0, 256, (5, 16, 16, 3), dtype="uint8")
TOLERANCE = 1e-4


def vocabulary(sentences):
    from zoo.data import RESERVED_TOKENS

    words = sorted({word for sentence in sentences for word in sentence.replace(".", " .").split()})
    return list(RESERVED_TOKENS) + words


def write_run(folder, preset):
    """A complete run directory of `preset` at tiny size, random weights."""
    from zoo.data import SentencePieceTokenizer
    from zoo.data import TextTokenizer

    recipe = registry.get_preset(preset)["recipe"]
    pairs = synthetic_corpus(200, seed=1, min_length=3, max_length=12)
    targets = [t for _, t in pairs] + ["a red circle ."]
    sources = [s for s, _ in pairs] + SENTENCES
    if preset == SENTENCEPIECE:
        shared = SentencePieceTokenizer.train(targets + sources, 400)
        target, source = shared, shared
    else:
        target, source = TextTokenizer(vocabulary(targets)), TextTokenizer(vocabulary(sources))
    run_dir = training.write_untrained_run(
        folder,
        preset,
        target,
        source,
        model_overrides={**TINY[recipe], "dropout": 0.0},
        training_overrides={"max_length": 10},
    )
    if not tiny_configs.is_captioning(preset):  # a CNN's features grow with its scale
        sharpen_weights(run_dir)
    return run_dir


# Random weights at initialisation give near-uniform logits, whose argmax a
# rounding difference of 1e-7 can flip; scaled up, the outputs are far from
# ties, so a different token means a different computation.
WEIGHT_SCALE = 3.0


def sharpen_weights(run_dir):
    """Scales every matrix of the run's weights by `WEIGHT_SCALE` (and
    writes the run's manifest again, as a writer of weights does)."""
    import zoo
    from zoo import runs
    from zoo.tasks import write_run_manifest

    model = zoo.load(run_dir).model
    for weight in model.weights:
        if len(weight.shape) >= 2:
            weight.assign(weight.numpy() * WEIGHT_SCALE)
    model.save_weights(run_dir / runs.WEIGHTS)
    write_run_manifest(run_dir)


class Exported(NamedTuple):
    run_dir: Path
    out: Path
    keras_side: Any  # the Python API's Translator or Captioner
    onnx_side: Any  # onnx_runner's Translator or Captioner
