"""Translate and caption with an ONNX export, with onnxruntime alone.

`zoo export RUN_DIR --format onnx` writes a folder that needs nothing of
keras-attention-zoo, Keras or TensorFlow to run; this file is in it, as
`run.py`:

    pip install numpy onnxruntime sentencepiece pillow   # the last two where needed
    python run.py "A man is riding a bike."
    python run.py --input sentences.txt --beam 5 > translations.txt
    python run.py photo.jpg                              # a captioning export

It imports only numpy, onnxruntime, `sentencepiece` (for a SentencePiece
vocabulary) and Pillow (to read image files). Everything else the Python
API does around the model is written here again in NumPy: the WordPiece
tokenizer, greedy and beam search (GNMT length and coverage penalties,
early or exact stopping, the n-best list, the alignment), batching,
splitting an over-long sentence at sentence ends, image resizing. A test
holds each piece to the package's own (`tests/zoo/export/`): the same
tokens, the same scores to 1e-4, and it runs this file where tensorflow,
keras and zoo cannot be imported.

Why one file and not an import of the package: a server that copies an
export folder (or a Java, C# or C++ service reading the same graphs and
manifest) must not need the training stack; one file is what a user copies.
`zoo.export.onnx_runner` is this same file, so the package's tests and
`zoo bench export` run exactly what is shipped.

The folder's files (see `zoo.export.onnx_export`):

    encoder.onnx, decoder_step.onnx   the recipes' contract as two graphs
    manifest.json                     special ids, state names, limits,
                                      search settings, image size
    *.vocab / *.model                 the tokenizers' files
    run.py                            this file
    README.md                         inputs, outputs and limits

Example:

>>> import onnx_runner  # or `from zoo.export import onnx_runner`
>>> translator = onnx_runner.load("exports/rnnsearch_small")  # doctest: +SKIP
>>> translator.translate(["the dog sees a cat."])[0].text  # doctest: +SKIP
"""

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import NamedTuple

import numpy as np
import onnxruntime

# --- the folder's layout (`zoo.export.onnx_export` writes it) ----------------

ENCODER = "encoder.onnx"
DECODER_STEP = "decoder_step.onnx"
MANIFEST = "manifest.json"
RUNNER = "run.py"
README = "README.md"
MANIFEST_FORMAT = "keras-attention-zoo-onnx"
# 3: the folder runs on its own (request limits, search settings, run.py).
MANIFEST_VERSION = 3
# The prefix of the decoder-step outputs that carry a changed state entry:
# an ONNX graph cannot have an input and an output of the same name.
NEW_STATE_PREFIX = "new_"
TRANSLATION = "translation"
CAPTIONING = "captioning"

# The recipes' contract's special tokens, in id order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")

# A batch's sources are padded to a multiple of this width, as the Python
# API pads them (`zoo.inference.translator.SOURCE_WIDTH_MULTIPLE`): the
# padded width sets the step limit, so both give the same translations.
SOURCE_WIDTH_MULTIPLE = 8

# The request limits a manifest holds, and their defaults (the export's
# options can change them): sentences or images per `translate` /
# `caption` call, bytes of one image file, pixels of a decoded image's
# longer side.
DEFAULT_LIMITS = {"max_batch": 256, "max_image_bytes": 20_000_000, "max_image_side": 8192}


class RunnerError(Exception):
    """A user mistake (a bad folder, request or option): its message is one
    line that names the problem and the fix."""


class ExportFolderError(RunnerError):
    """A folder that is missing, incomplete or not an ONNX export of ours."""


class RequestTooLarge(RunnerError):
    """A request over one of the manifest's `limits`; the message names it."""


class InputError(RunnerError):
    """Input text or an image that cannot be read (the message says where)."""


# --- the export folder and its two graphs -----------------------------------


def read_manifest(folder):
    """The manifest of an export folder, checked: a one-line error otherwise."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ExportFolderError(
            f"{str(folder)!r} is not an ONNX export: no {MANIFEST} "
            "(write one with `zoo export RUN_DIR --format onnx`)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportFolderError(f"cannot read {path}: {error}") from None
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise ExportFolderError(
            f"{path} is not a version-{MANIFEST_VERSION} {MANIFEST_FORMAT} manifest; "
            "re-export the run with `zoo export RUN_DIR --format onnx`"
        )
    graphs = [graph["file"] for graph in manifest["graphs"].values()]
    files = graphs + list(manifest["vocabularies"].values())
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise ExportFolderError(
            f"export folder {str(folder)!r} is incomplete: missing {', '.join(missing)}"
        )
    return manifest


def default_session_options():
    """onnxruntime's defaults, but intra-op threads that sleep when idle.

    A decoding step is many small ops driven from a Python loop, and
    onnxruntime's worker threads spin between ops by default, taking the
    cores from that loop (and from anything else on the machine).
    """
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxModel:
    """An exported model's encode / decode_step, run by onnxruntime.

    The recipes' contract over NumPy arrays (`zoo.recipes.contract`):
    `encode(source) -> state`, `decode_step(previous_tokens, state, step) ->
    (logits, state, attention)`, and the declarations the searches read.

    Args:
        folder: an export folder.
        providers: onnxruntime execution providers (default: CPU).
        session_options: optional `onnxruntime.SessionOptions` for both
            graphs; default: `default_session_options()`.

    Attributes:
        manifest: the folder's manifest dict.
        pad_id, bos_id, eos_id, max_target_length, constant_state_keys,
        attention_state_key: the contract's declarations, from the manifest.
        image_size, grid_shape: for a captioning export (else None).
    """

    def __init__(self, folder, providers=None, session_options=None):
        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        providers = providers or ["CPUExecutionProvider"]
        session_options = session_options or default_session_options()
        graphs = self.manifest["graphs"]
        self.encoder = onnxruntime.InferenceSession(
            str(self.folder / graphs["encoder"]["file"]), session_options, providers=providers
        )
        self.decoder = onnxruntime.InferenceSession(
            str(self.folder / graphs["decoder_step"]["file"]), session_options, providers=providers
        )
        self.pad_id = self.manifest["pad_id"]
        self.bos_id = self.manifest["bos_id"]
        self.eos_id = self.manifest["eos_id"]
        self.max_target_length = self.manifest["max_target_length"]
        self.attention_state_key = self.manifest["attention_state_key"]
        self.image_size = self.manifest["image_size"]
        grid = self.manifest["grid_shape"]
        self.grid_shape = tuple(grid) if grid else None
        self._state_names = self.manifest["state"]
        self._carried = self.manifest["carried_state"]
        self.constant_state_keys = tuple(n for n in self._state_names if n not in self._carried)
        self._step_outputs = graphs["decoder_step"]["outputs"]
        self._source = self.manifest["source"]

    def attention_width(self, state):
        """S: axis 1 of the declared state entry."""
        return int(state[self.attention_state_key].shape[1])

    def encode(self, source):
        """Source `[B, S]` int32 ids (or images `[B, H, W, 3]`) -> state dict."""
        source = np.asarray(source, self._source["dtype"])
        values = self.encoder.run(self._state_names, {self._source["name"]: source})
        return dict(zip(self._state_names, values))

    def decode_step(self, previous_tokens, state, step):
        """One target step: `(logits [B, V], state, attention [B, S])`."""
        feeds = {name: np.asarray(state[name]) for name in self._state_names}
        feeds["previous_tokens"] = np.asarray(previous_tokens, "int32")
        feeds["step"] = np.asarray(step, "int32")
        logits, attention, *carried = self.decoder.run(self._step_outputs, feeds)
        return logits, {**state, **dict(zip(self._carried, carried))}, attention


# --- greedy and beam search, in NumPy ----------------------------------------
# The algorithms of `zoo.recipes.decoding`, step for step: the same step
# limit, the same expansion, tie-breaking, stopping rules and n-best list.

# A "minus infinity" that stays finite (`zoo.recipes.decoding.NEG_INF`).
NEG_INF = -1e9
STOPPING_RULES = ("early", "exact")
COVERAGE_FLOOR = 1e-10


class DecodeResult(NamedTuple):
    """`zoo.recipes.decoding.DecodeResult`, of NumPy arrays."""

    tokens: Any
    lengths: Any
    scores: Any
    attention: Any
    finished: Any
    num_steps: Any
    penalized_scores: Any = None
    beam_tokens: Any = None
    beam_lengths: Any = None
    beam_scores: Any = None
    beam_penalized_scores: Any = None


def max_decoding_steps(model, source_length, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.max_decoding_steps` for a python int length."""
    if max_length is not None:
        limit = int(max_length)
    else:
        limit = max(1, math.ceil(max_length_ratio * int(source_length)) + int(max_length_offset))
    cap = getattr(model, "max_target_length", None)
    return min(limit, int(cap)) if cap is not None else limit


def greedy_search(model, source, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.greedy_search` over NumPy arrays.

    The argmax of the running total of float32 log-probabilities, PAD fed
    back after EOS, the same step limit, and a stop when every example has
    ended.

    Args:
        model: an `OnnxModel` (or any object with the contract over NumPy
            arrays).
        source: int32 `[B, S]` token ids (or images `[B, H, W, 3]`).
        max_length, max_length_ratio, max_length_offset: the step limit
            (`max_decoding_steps`).

    Returns:
        A `DecodeResult` (the beam fields None).
    """
    source = np.asarray(source)
    batch = source.shape[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    tokens = np.full((batch,), model.bos_id, "int32")
    logits, state, attention = model.decode_step(tokens, state, 0)
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    hypotheses = np.zeros((batch, limit), "int32")
    alignment = np.zeros((batch, limit, source_width), "float32")
    scores = np.zeros((batch,), "float32")
    lengths = np.zeros((batch,), "int32")
    finished = np.zeros((batch,), bool)
    step = 0
    while True:
        totals = scores[:, None] + log_softmax(logits.astype("float32"))
        tokens = np.where(finished, model.pad_id, totals.argmax(axis=-1)).astype("int32")
        hypotheses[:, step] = tokens
        alignment[:, step] = np.where(finished[:, None], 0.0, attention)
        scores = np.where(finished, scores, totals.max(axis=-1))
        lengths += ~finished
        finished |= tokens == model.eos_id
        step += 1
        if step >= limit or finished.all():
            break
        logits, state, attention = model.decode_step(tokens, state, step)
    return DecodeResult(
        tokens=hypotheses,
        lengths=lengths,
        scores=scores,
        attention=alignment,
        finished=finished,
        num_steps=np.int32(step),
    )


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def beam_search(
    model,
    source,
    beam_width=4,
    length_penalty=0.0,
    coverage_penalty=0.0,
    max_length=None,
    max_length_ratio=1.5,
    max_length_offset=10,
    stopping="early",
):
    """`zoo.recipes.decoding.beam_search` over NumPy arrays (see its docstring)."""
    raise NotImplementedError("beam search: the `search` branch writes it")


def decode_to_lists(tokens, eos_id, pad_id, include_eos=False):
    """`zoo.recipes.decoding.decode_to_lists`: ids cut at the first EOS."""
    array = np.asarray(tokens)
    if array.ndim == 1:
        sequence = [int(t) for t in array]
        if eos_id in sequence:
            end = sequence.index(eos_id)
            return sequence[: end + 1] if include_eos else sequence[:end]
        while sequence and sequence[-1] == pad_id:
            sequence.pop()
        return sequence
    return [decode_to_lists(row, eos_id, pad_id, include_eos) for row in array]


# --- tokenizers ---------------------------------------------------------------
# `zoo.data.TextTokenizer` (WordPiece) and `zoo.data.SentencePieceTokenizer`
# without TensorFlow: each has encode(list of str) -> lists of ids,
# decode(ids) -> str, id_to_token(id) -> str.


def load_tokenizer(path):
    """The tokenizer of a vocabulary file: SentencePiece for `.model`,
    WordPiece for a vocabulary (one token a line)."""
    raise NotImplementedError("tokenizers: the `text` branch writes them")


# --- images ---------------------------------------------------------------------


def load_image(path, image_size, limits=None):
    """An image file as float32 `[image_size, image_size, 3]` in [0, 1], as
    `zoo.data.load_image` reads it; `limits` (the manifest's) bound the
    file's bytes and the decoded image's side (`RequestTooLarge`)."""
    raise NotImplementedError("images: the `text` branch writes them")


# --- translating and captioning -----------------------------------------------


@dataclass
class Hypothesis:
    """One entry of an n-best list: `text`, `score` (log P(Y|X)) and
    `penalized_score` (what the beam ranked it by)."""

    text: str
    score: float
    penalized_score: float


@dataclass
class Translation:
    """One translated sentence, as `zoo.inference.translator.Translation`."""

    text: str
    source_pieces: list
    target_pieces: list
    alignment: np.ndarray
    score: float
    n_best: list = None
    parts: int = 1
    cut_parts: int = 0


@dataclass
class Caption:
    """One image's caption, as `zoo.inference.captioner.Caption`."""

    text: str
    words: list
    attention: np.ndarray
    score: float
    n_best: list = field(default=None)


def load(folder, providers=None, session_options=None):
    """An export folder as a `Translator` or a `Captioner`.

    Args:
        folder: an export folder.
        providers, session_options: see `OnnxModel`.
    """
    raise NotImplementedError("serving: the main branch writes it")


# --- the command line ------------------------------------------------------------


def main(argv=None):
    """`python run.py ...`: see `--help`."""
    raise NotImplementedError("the command line: the main branch writes it")


if __name__ == "__main__":
    sys.exit(main())
