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
import contextlib
import io
import json
import math
import os
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import NamedTuple

import numpy as np

# --- the folder's layout (`zoo.export.onnx_export` writes it) ----------------

ENCODER = "encoder.onnx"
DECODER_STEP = "decoder_step.onnx"
MANIFEST = "manifest.json"
RUNNER = "run.py"
README = "README.md"
MANIFEST_FORMAT = "keras-attention-zoo-onnx"
# 3: the folder runs on its own (request limits, search settings, run.py).
# 4: `step_cache_axes`; the decoder step takes its caches cut to any length.
MANIFEST_VERSION = 4
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


def check_limits(limits, error=None):
    """`DEFAULT_LIMITS` with `limits` (a dict, or None) over them, checked:
    known keys, ints >= 1; `error` (an exception class, default
    `RunnerError`) otherwise. The exports' options go through it."""
    error = error or RunnerError
    if limits is not None and not isinstance(limits, dict):
        raise error(f"limits must be a dict of limit names to ints; received {limits!r}")
    limits = dict(limits or {})
    unknown = sorted(set(limits) - set(DEFAULT_LIMITS))
    if unknown:
        raise error(
            f"unknown limit {', '.join(map(repr, unknown))}; the limits are {', '.join(DEFAULT_LIMITS)}"
        )
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise error(f"limit {name} must be an int >= 1; received {value!r}")
    return {**DEFAULT_LIMITS, **limits}


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


def default_session_options(intra_op_threads=0):
    """onnxruntime's defaults, but intra-op threads that sleep when idle.

    A decoding step is many small ops driven from a Python loop, and
    onnxruntime's worker threads spin between ops by default, taking the
    cores from that loop (and from anything else on the machine).

    Args:
        intra_op_threads: threads an op may be split over (0: onnxruntime's
            choice, one per core).
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = intra_op_threads
    return options


def _session(path, options, providers):
    """An onnxruntime session of the graph file `path`, or a one-line
    `ExportFolderError` naming it when onnxruntime cannot read it (a
    truncated or damaged file)."""
    import onnxruntime
    # onnxruntime's own exception classes: a damaged file is the user's to
    # fix, not a bug (onnxruntime exports them only from here).
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidProtobuf

    try:
        return onnxruntime.InferenceSession(str(path), options, providers=providers)
    except (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ExportFolderError(
            f"cannot load {path}: {reason}; if the file is truncated or damaged, "
            "export the run again with `zoo export RUN_DIR --format onnx`"
        ) from None


class OnnxModel:
    """An exported model's encode / decode_step, run by onnxruntime.

    The recipes' contract over NumPy arrays (`zoo.recipes.contract`):
    `encode(source) -> state`, `decode_step(previous_tokens, state, step) ->
    (logits, state, attention)`, and the declarations the searches read.

    Args:
        folder: an export folder.
        providers: onnxruntime execution providers (default: CPU).
        session_options: optional `onnxruntime.SessionOptions` for both
            graphs; default: `default_session_options()` for the encoder,
            and the same on one thread for the decoder step (its ops are
            small: splitting each over threads costs more than it saves,
            docs/performance.md "Serving latency").

    Attributes:
        manifest: the folder's manifest dict.
        pad_id, bos_id, eos_id, max_target_length, constant_state_keys,
        attention_state_key, step_cache_axes: the contract's declarations,
        from the manifest.
        image_size, grid_shape: for a captioning export (else None).
    """

    def __init__(self, folder, providers=None, session_options=None):
        # Imported here, so that `--help`, the manifest and the limits are
        # read without loading onnxruntime.
        import onnxruntime

        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        providers = providers or ["CPUExecutionProvider"]
        encoder_options = session_options or default_session_options()
        step_options = session_options or default_session_options(intra_op_threads=1)
        graphs = self.manifest["graphs"]
        self.encoder = _session(self.folder / graphs["encoder"]["file"], encoder_options, providers)
        self.decoder = _session(
            self.folder / graphs["decoder_step"]["file"], step_options, providers
        )
        self.pad_id = self.manifest["pad_id"]
        self.bos_id = self.manifest["bos_id"]
        self.eos_id = self.manifest["eos_id"]
        self.max_target_length = self.manifest["max_target_length"]
        self.attention_state_key = self.manifest["attention_state_key"]
        self.step_cache_axes = self.manifest["step_cache_axes"]
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
    beam_finished: Any = None


def max_decoding_steps(model, source_length, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.max_decoding_steps` for a python int length."""
    if max_length is not None:
        if not _is_int(max_length) or max_length < 1:
            raise ValueError(
                f"`max_length` must be a positive int or None. Received: max_length={max_length!r}"
            )
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

    Unlike the compiled search, whose loop keeps the batch's shape, the
    model is run only on the examples still decoding (`_worth_dropping`).
    Each example's result is its own (the model's rows are independent), so
    the tokens are the same either way.

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
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    state = _fit_step_caches(model, state, limit)
    tokens = np.full((batch,), model.bos_id, "int32")
    logits, state, attention = model.decode_step(tokens, state, 0)
    hypotheses = np.zeros((batch, limit), "int32")
    alignment = np.zeros((batch, limit, source_width), "float32")
    scores = np.zeros((batch,), "float32")
    lengths = np.zeros((batch,), "int32")
    finished = np.zeros((batch,), bool)
    rows = np.arange(batch)  # the example of each row the model runs
    step = 0
    while True:
        ended = finished[rows]
        best, log_prob = _best_tokens(np.asarray(logits, "float32"))
        tokens = np.where(ended, model.pad_id, best).astype("int32")
        hypotheses[rows, step] = tokens
        alignment[rows, step] = np.where(ended[:, None], 0.0, attention)
        scores[rows] = np.where(ended, scores[rows], scores[rows] + log_prob)
        lengths[rows] += ~ended
        finished[rows] |= tokens == model.eos_id
        step += 1
        if step >= limit or finished.all():
            break
        not_ended = ~finished[rows]
        if _worth_dropping(not_ended):
            state = _keep_rows(state, not_ended)
            rows, tokens = rows[not_ended], tokens[not_ended]
        logits, state, attention = model.decode_step(tokens, state, step)
    # PAD after each end up to the last step, as the compiled search writes
    # it for an example that is no longer run.
    hypotheses[:, :step][np.arange(step) >= lengths[:, None]] = model.pad_id
    return DecodeResult(
        tokens=hypotheses,
        lengths=lengths,
        scores=scores,
        attention=alignment,
        finished=finished,
        num_steps=np.int32(step),
    )


def _worth_dropping(still_running):
    """Whether the searches drop the examples that no longer run from the
    model's rows: once an eighth of them have ended (or are done).

    A step's cost grows with its rows, and in a batch of sentences of
    similar length the last to end (often one that repeats itself up to the
    step limit) would otherwise keep every row running; each drop copies the
    state once, so it waits for an eighth.
    """
    return 8 * np.count_nonzero(~still_running) >= len(still_running)


def _keep_rows(state, rows):
    """The state's entries, of the rows `rows` (a boolean mask) only."""
    return {key: np.asarray(value)[rows] for key, value in state.items()}


def _best_tokens(logits):
    """Each row's most likely token and its log-probability.

    The argmax of the logits is that of the log-probabilities plus the
    running score, so only the chosen token's log-probability is computed,
    not the whole row's (the greedy step runs once per target token).
    """
    best = logits.argmax(axis=-1)
    highest = logits[np.arange(len(logits)), best]
    shifted = logits - highest[:, None]
    np.exp(shifted, out=shifted)
    return best, -np.log(shifted.sum(axis=-1))


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return shifted


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
    """`zoo.recipes.decoding.beam_search` in NumPy: its docstring has the rules.

    The same search step for step: `beam_width` live hypotheses expanded by
    their raw log-probability, candidates that produce EOS set aside in a
    store of `beam_width` finished ones ranked by the GNMT score (length
    penalty `((5 + |Y|) / 6) ** length_penalty`, coverage penalty over the
    non-PAD positions of a token source, every position of an image), the
    `"early"` or `"exact"` stopping rule, done examples frozen (their live
    hypotheses kept, not expanded), and the n-best list filled with those
    live hypotheses where fewer have finished (`beam_finished`). Ties
    go to the lower index, as `keras.ops.top_k` breaks them.

    Args:
        model: an `OnnxModel` (or any object with the contract over NumPy
            arrays).
        source: int32 `[B, S]` token ids (or images `[B, H, W, 3]`).
        beam_width: int >= 1, the hypotheses kept per example.
        length_penalty: float >= 0, GNMT's alpha.
        coverage_penalty: float >= 0, GNMT's beta.
        max_length, max_length_ratio, max_length_offset: the step limit
            (`max_decoding_steps`).
        stopping: `"early"` (default) or `"exact"`.

    Returns:
        A `DecodeResult` with every field set: the best hypothesis of each
        example, its `penalized_scores`, and the n-best list (`beam_*`).
    """
    _check_beam_arguments(beam_width, length_penalty, coverage_penalty, stopping)
    width = int(beam_width)
    source = np.asarray(source)
    batch = source.shape[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    carried = _carried_state_keys(model, state)
    state = _fit_step_caches(model, state, limit)
    state = {key: np.repeat(np.asarray(value), width, axis=0) for key, value in state.items()}
    scorer = _GnmtScorer(
        length_penalty, coverage_penalty, _coverage_mask(source, batch, source_width, model.pad_id)
    )
    # Every beam of an example starts from the same BOS: only the first is
    # live, so the first expansion yields K distinct tokens.
    alive = np.full((batch, width), NEG_INF, "float32")
    alive[:, 0] = 0.0
    # Each live hypothesis' length: the step count, frozen when its example
    # is done.
    alive_lengths = np.zeros((batch, width), "int32")
    # Each live hypothesis' attention summed over its steps, for the
    # coverage penalty only.
    coverage = np.zeros((batch, width, source_width), "float32") if coverage_penalty else None
    history = _BeamHistory(limit, batch, width, source_width)
    store = _FinishedStore(batch, width)
    done = np.zeros((batch,), bool)
    tokens = np.full((batch * width,), model.bos_id, "int32")
    # The example of each group of `width` rows the model runs: done examples
    # are dropped from the state, as greedy search drops ended ones.
    examples = np.arange(batch)
    step = 0
    while step < limit and not done.all():
        logits, state, attention = model.decode_step(tokens, state, step)
        groups = len(examples)
        # A done example's live hypotheses are kept, not expanded.
        was_done = done[examples]
        expandable = np.where(was_done[:, None], np.float32(NEG_INF), alive[examples])
        log_probs = log_softmax(np.asarray(logits, "float32"))
        vocabulary = log_probs.shape[-1]
        totals = expandable[:, :, None] + log_probs.reshape(groups, width, vocabulary)
        top_scores, top = _top_k(totals.reshape(groups, width * vocabulary), width)
        parents, token = np.divmod(top, vocabulary)
        origin = (np.arange(groups)[:, None] * width + parents).reshape(-1)
        # A constant entry (the memory, its mask) is the same for every beam
        # of an example: only the carried ones follow their beam.
        state = {key: value[origin] if key in carried else value for key, value in state.items()}
        # The step's attention is still in the last step's beams: it is
        # stored so, and read through the parents (`_backtrack`).
        attention = np.asarray(attention, "float32").reshape(groups, width, source_width)
        history.write(step, examples, token, parents, attention)
        step_coverage = None
        if coverage is not None:
            step_coverage = np.take_along_axis(
                coverage[examples] + attention, parents[:, :, None], axis=1
            )
            coverage[examples] = np.where(was_done[:, None, None], coverage[examples], step_coverage)

        length = step + 1
        live = top_scores > NEG_INF / 2
        ends = live & (token == model.eos_id)
        penalized = scorer(top_scores, length, step_coverage, examples)
        store.add(examples, np.where(ends, penalized, NEG_INF), top_scores, length)

        step_alive = np.where(live & ~ends, top_scores, np.float32(NEG_INF))
        done[examples] |= _examples_done(
            step_alive, store.keys[examples], scorer, length, limit, stopping == "early"
        )
        # A done example is frozen: its live hypotheses stay as they were at
        # the step it was done (they fill its n-best list), and no token of
        # it is fed on.
        alive[examples] = np.where(was_done[:, None], alive[examples], step_alive)
        alive_lengths[examples] = np.where(was_done[:, None], alive_lengths[examples], length)
        fed = (alive[examples] > NEG_INF / 2) & ~done[examples][:, None]
        tokens = np.where(fed, token, model.pad_id).reshape(-1).astype("int32")
        step += 1
        not_done = ~done[examples]
        if _worth_dropping(not_done):
            rows = np.repeat(not_done, width)
            state = _keep_rows(state, rows)
            examples, tokens = examples[not_done], tokens[rows]
    return _beam_result(history, store, alive, alive_lengths, coverage, scorer, step, model.pad_id)


def _check_beam_arguments(beam_width, length_penalty, coverage_penalty, stopping):
    """`zoo.recipes.decoding.beam_search`'s checks, with its messages."""
    if not _is_int(beam_width) or beam_width < 1:
        raise ValueError(
            f"`beam_width` must be a positive int. Received: beam_width={beam_width!r}"
        )
    for name, value in (("length_penalty", length_penalty), ("coverage_penalty", coverage_penalty)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or value < 0:
            raise ValueError(f"`{name}` must be a float >= 0. Received: {name}={value!r}")
    if not isinstance(stopping, str) or stopping not in STOPPING_RULES:
        raise ValueError(
            f"`stopping` must be one of {STOPPING_RULES}. Received: stopping={stopping!r}"
        )


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _fit_step_caches(model, state, steps):
    """`zoo.recipes.contract.fit_step_caches`: each declared step cache cut
    to its first `steps` slots, all that a search of `steps` steps uses."""
    fitted = dict(state)
    for key, axis in getattr(model, "step_cache_axes", {}).items():
        cut = [slice(None)] * np.ndim(state[key])
        cut[axis] = slice(0, steps)
        fitted[key] = np.ascontiguousarray(state[key][tuple(cut)])
    return fitted


def _carried_state_keys(model, state):
    """`zoo.recipes.contract.carried_state_keys`: the entries beam search
    reorders; a declared constant entry that `state` lacks is an error (a
    renamed entry would otherwise be reordered by nobody)."""
    missing = [key for key in model.constant_state_keys if key not in state]
    if missing:
        raise ValueError(
            f"{type(model).__name__}.constant_state_keys names {missing}, which the "
            f"state from `encode` does not hold (it holds {list(state)})"
        )
    return [key for key in state if key not in model.constant_state_keys]


def _coverage_mask(source, batch, source_width, pad_id):
    """float32 `[B, S]`: 1 where the coverage penalty counts. PAD positions
    of a token source are left out; every position of another source
    (image regions) counts."""
    if source.ndim == 2 and np.issubdtype(source.dtype, np.integer):
        return (source != pad_id).astype("float32")
    return np.ones((batch, source_width), "float32")


def _top_k(values, k):
    """`keras.ops.top_k` on the last axis: the k largest, best first, and
    the lower index first among equal ones (as `tf.math.top_k`), which a
    stable sort of the negated values gives."""
    indices = np.argsort(-values, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(values, indices, axis=-1), indices.astype("int32")


def _pick(first, second, indices):
    """Entries `indices` `[B, K]` of each example's `[first; second]` (both
    `[B, K]`): index i < K is `first[:, i]`, K + i is `second[:, i]`."""
    return np.take_along_axis(np.concatenate([first, second], axis=1), indices, axis=1)


def _beam_indices(batch, width):
    """int32 `[B, K]`: each beam's index in its example."""
    return np.broadcast_to(np.arange(width, dtype="int32"), (batch, width))


class _GnmtScorer:
    """s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y) for hypotheses `[B, K]`, in
    float32 as `zoo.recipes.decoding.penalties._GnmtScorer` computes it."""

    def __init__(self, alpha, beta, coverage_mask):
        self.alpha = np.float32(alpha)
        self.beta = np.float32(beta)
        self.coverage_mask = coverage_mask[:, None, :]  # [B, 1, S]

    def length_factor(self, length):
        return np.power((np.float32(5.0) + np.float32(length)) / np.float32(6.0), self.alpha)

    def __call__(self, log_probs, length, coverage, examples=None):
        """log_probs `[B, K]`, length an int, coverage `[B, K, S]` (None
        without a coverage penalty); with `examples`, the rows are those
        examples only."""
        score = log_probs
        if self.alpha:
            score = score / self.length_factor(length)
        if self.beta:
            mask = self.coverage_mask if examples is None else self.coverage_mask[examples]
            covered = np.log(np.clip(coverage, np.float32(COVERAGE_FLOOR), np.float32(1.0)))
            score = score + self.beta * np.sum(covered * mask, axis=-1)
        return score

    def best_reachable(self, log_probs, length):
        """The most s(Y, X) that extensions of live hypotheses can reach at
        lengths up to `length` (cp <= 0 is left out)."""
        return log_probs / self.length_factor(length) if self.alpha else log_probs


class _BeamHistory:
    """Back-pointers `[L, B, K]`: the token candidate k of step t produced,
    the beam of step t - 1 it extends, and the attention `[L, B, K, S]` that
    beam k computed at step t (before the step reordered the beams)."""

    def __init__(self, limit, batch, width, source_width):
        self.tokens = np.zeros((limit, batch, width), "int32")
        self.parents = np.zeros((limit, batch, width), "int32")
        self.attention = np.zeros((limit, batch, width, source_width), "float32")

    def write(self, step, examples, tokens, parents, attention):
        """Step `step` of the rows `[E, K]` of `examples`."""
        self.tokens[step, examples] = tokens
        self.parents[step, examples] = parents
        self.attention[step, examples] = attention


class _FinishedStore:
    """The K best finished hypotheses of each example, best first by
    penalised score (NEG_INF in unused places); each is kept as its beam at
    its last step (`lengths - 1`) in the history, never written again."""

    def __init__(self, batch, width):
        self.keys = np.full((batch, width), NEG_INF, "float32")
        self.scores = np.full((batch, width), NEG_INF, "float32")
        self.lengths = np.zeros((batch, width), "int32")
        self.beams = np.zeros((batch, width), "int32")

    def add(self, examples, keys, scores, length):
        """Candidates `[E, K]` of `examples`, with penalised `keys` (NEG_INF
        for those that did not end), compete with their store for its K
        places."""
        groups, width = keys.shape
        self.keys[examples], kept = _top_k(
            np.concatenate([self.keys[examples], keys], axis=1), width
        )
        self.scores[examples] = _pick(self.scores[examples], scores, kept)
        lengths = np.full((groups, width), length, "int32")
        self.lengths[examples] = _pick(self.lengths[examples], lengths, kept)
        self.beams[examples] = _pick(self.beams[examples], _beam_indices(groups, width), kept)


def _examples_done(alive, finished_keys, scorer, length, limit, early):
    """Which examples the stopping rule ends after a step at `length`
    (`zoo.recipes.decoding.beam_search` states the rules)."""
    best_alive = alive.max(axis=1)
    done = (best_alive <= NEG_INF / 2) | (
        finished_keys[:, 0] >= scorer.best_reachable(best_alive, limit)
    )
    if early:
        # The last place is the worst of the K finished ones, NEG_INF while
        # fewer than K have finished.
        worst_finished = finished_keys[:, -1]
        done |= (worst_finished > NEG_INF / 2) & (
            worst_finished >= scorer.best_reachable(best_alive, length)
        )
    return done


def _beam_result(history, store, alive, alive_lengths, coverage, scorer, num_steps, pad_id):
    """The n-best list: finished hypotheses by penalised score, then live
    ones (as the example stopped) to fill it; its first entry is the result."""
    batch, width = alive.shape
    alive_valid = alive > NEG_INF / 2
    alive_keys = np.where(alive_valid, scorer(alive, alive_lengths, coverage), np.float32(NEG_INF))
    num_finished = np.sum(store.keys > NEG_INF / 2, axis=1, keepdims=True)
    _, alive_order = _top_k(alive_keys, width)
    rank = np.arange(width)[None, :]
    from_alive = np.take_along_axis(alive_order, np.clip(rank - num_finished, 0, width - 1), axis=1)
    slot = np.where(rank < num_finished, rank, width + from_alive)  # into [finished; alive]

    keys = _pick(store.keys, alive_keys, slot)
    valid = keys > NEG_INF / 2
    lengths = np.where(valid, _pick(store.lengths, alive_lengths, slot), 0)
    # A live hypothesis ends in its beam at its last step: a done example's
    # beams are not reordered after it.
    beams = _pick(store.beams, _beam_indices(batch, width), slot)
    tokens, attention = _backtrack(history, beams, lengths, pad_id)
    scores = np.where(valid, _pick(store.scores, alive, slot), np.float32(NEG_INF))
    finished = (slot < width) & valid
    return DecodeResult(
        tokens=tokens[:, 0],
        lengths=lengths[:, 0].astype("int32"),
        scores=scores[:, 0],
        attention=attention,
        finished=finished[:, 0],
        num_steps=np.int32(num_steps),
        penalized_scores=keys[:, 0],
        beam_tokens=tokens,
        beam_lengths=lengths.astype("int32"),
        beam_scores=scores,
        beam_penalized_scores=keys,
        beam_finished=finished,
    )


def _backtrack(history, beams, lengths, pad_id):
    """The tokens int32 `[B, K, L]` of the hypotheses that end in `beams`
    `[B, K]` at step `lengths - 1` (PAD after the end), and the attention
    float32 `[B, L, S]` of each example's first one (zero after its end),
    followed from the end back to step 0 through the parents."""
    limit, batch, width = history.tokens.shape
    tokens = np.full((batch, width, limit), pad_id, "int32")
    attention = np.zeros((batch, limit, history.attention.shape[-1]), "float32")
    examples = np.arange(batch)
    beam = beams
    for step in reversed(range(limit)):
        produced = step < lengths
        parent = np.take_along_axis(history.parents[step], beam, axis=1)
        tokens[:, :, step] = np.where(
            produced, np.take_along_axis(history.tokens[step], beam, axis=1), pad_id
        )
        # A step's attention was computed by the beam the hypothesis extends.
        first = history.attention[step, examples, parent[:, 0]]
        attention[:, step] = np.where(produced[:, :1], first, 0.0)
        beam = np.where(produced, parent, beam)
    return tokens, attention


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
# decode(ids) -> str, id_to_token(id) -> str, ids_to_tokens(ids) -> list of str.

# A vocabulary's kind by its file's suffix (`zoo.runs.VOCABULARY_SUFFIXES`).
VOCABULARY_SUFFIXES = {"wordpiece": ".vocab", "sentencepiece": ".model"}

# The contract's ids of SPECIAL_TOKENS that `decode` reads.
_PAD_ID, _UNK_ID, _BOS_ID, _EOS_ID = range(len(SPECIAL_TOKENS))

# WordPiece (`zoo.data.tokenizer`): continuation pieces start with this, and
# tensorflow-text's FastWordpieceTokenizer spells a word of more UTF-8 bytes
# than this as "[UNK]".
SUFFIX_INDICATOR = "##"
MAX_BYTES_PER_WORD = 100

# How `decode` spaces punctuation (`zoo.data.tokenizer._join_words`).
_ATTACH_LEFT = frozenset(".,;:!?)]}%“”")  # no space before
_ATTACH_RIGHT = frozenset("([{„")  # no space after
_ATTACH_BOTH = frozenset("-'/’")  # neither: t-shirt, man's, and/or

# keras-hub's pre-tokenization split (`keras_hub.src.tokenizers.
# word_piece_tokenizer.pretokenize`, RE2 patterns), one character at a time:
# white space is RE2's ASCII `\s` plus the Cc and Cf categories; punctuation
# is every non-alphanumeric ASCII symbol plus the P categories; CJK is BERT's
# ideograph blocks. Punctuation and CJK characters are words of their own.
_ASCII_SPACE = frozenset(" \t\n\r\f")
_ASCII_PUNCTUATION = frozenset(
    chr(c) for lo, hi in ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E))
    for c in range(lo, hi + 1)
)
_CJK_BLOCKS = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class VocabularyError(RunnerError):
    """A vocabulary file that cannot be read (the message names it)."""


class MissingPackageError(RunnerError):
    """A package that reading one of the folder's or the request's files
    needs (`sentencepiece`, Pillow) is not installed."""


def _is_space(char):
    return char in _ASCII_SPACE or unicodedata.category(char) in ("Cc", "Cf")


def _is_own_word(char):
    if char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P"):
        return True
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_BLOCKS)


def pretokenize(text):
    """keras-hub's split of normalized text into words (a list of str)."""
    words = []
    word = []
    for char in text:
        if _is_space(char):
            own = False
        elif _is_own_word(char):
            own = True
        else:
            word.append(char)
            continue
        if word:
            words.append("".join(word))
            word = []
        if own:
            words.append(char)
    if word:
        words.append("".join(word))
    return words


def _join_words(words):
    """Join pre-tokenized words into text, spacing punctuation as written."""
    text = ""
    glue = True
    for word in words:
        if not glue and word not in _ATTACH_LEFT and word not in _ATTACH_BOTH:
            text += " "
        text += word
        glue = word in _ATTACH_RIGHT or word in _ATTACH_BOTH
    return text


def _kept_ids(ids, vocabulary_size):
    """The ids `decode` reads of one sequence (`zoo.data.tokenizer_base.
    kept_id_list`): those before the first EOS, without PAD or BOS; a
    ValueError for anything but one sequence of ids of the vocabulary."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"decode takes one sequence of ids; received shape {ids.shape}.")
    ids = ids.tolist()
    if _EOS_ID in ids:
        ids = ids[: ids.index(_EOS_ID)]
    return _check_ids([i for i in ids if i not in (_PAD_ID, _BOS_ID)], vocabulary_size)


def _check_ids(ids, vocabulary_size):
    """`ids` as a list of int; a ValueError naming the first outside the vocabulary."""
    ids = [int(token_id) for token_id in ids]
    if ids and not 0 <= min(ids) <= max(ids) < vocabulary_size:
        _check_id(next(i for i in ids if not 0 <= i < vocabulary_size), vocabulary_size)
    return ids


def _check_id(token_id, vocabulary_size):
    if not 0 <= int(token_id) < vocabulary_size:
        raise ValueError(
            f"token id {int(token_id)} is outside the vocabulary [0, {vocabulary_size - 1}]."
        )


class WordPieceTokenizer:
    """`zoo.data.TextTokenizer` in Python: the same ids and the same text.

    Text is NFKC-normalized, lowercased (`str.lower`, which is
    `tf.strings.lower`'s UTF-8 mapping) exactly when the vocabulary has no
    uppercase letter, split into words (`pretokenize`), and each word
    spelled with the longest vocabulary pieces first, later pieces
    prefixed with "##"; a word that cannot be spelled, or of more than
    `MAX_BYTES_PER_WORD` UTF-8 bytes, is "[UNK]". Python's and
    TensorFlow's Unicode tables can differ on characters that one of them
    does not know yet.

    Args:
        vocabulary: list of str tokens, starting with SPECIAL_TOKENS.
        name: where the vocabulary comes from, for error messages.
    """

    def __init__(self, vocabulary, name="vocabulary"):
        vocabulary = list(vocabulary)
        if tuple(vocabulary[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise VocabularyError(
                f"{name}: a WordPiece vocabulary must start with {', '.join(SPECIAL_TOKENS)}; "
                "re-export the run with `zoo export RUN_DIR --format onnx`"
            )
        bad = [t for t in vocabulary if not t or t != t.strip() or "\n" in t]
        self._ids = {token: i for i, token in enumerate(vocabulary)}
        if bad or len(self._ids) != len(vocabulary):
            problem = f"a token {bad[0]!r} with white space" if bad else "a repeated token"
            raise VocabularyError(
                f"{name}: not a WordPiece vocabulary ({problem}); "
                "re-export the run with `zoo export RUN_DIR --format onnx`"
            )
        self._vocabulary = vocabulary
        self.lowercase = not any(
            char.isupper() for token in vocabulary[len(SPECIAL_TOKENS) :] for char in token
        )

    @classmethod
    def load(cls, path):
        """The tokenizer of a `.vocab` file (UTF-8, one token a line)."""
        try:
            with open(path, encoding="utf-8", newline="") as file:
                tokens = file.read().split("\n")
        except (OSError, UnicodeDecodeError) as error:
            raise VocabularyError(f"cannot read the vocabulary {os.fspath(path)}: {error}") from None
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls(tokens, os.fspath(path))

    @property
    def vocabulary_size(self):
        """The number of tokens, reserved tokens included."""
        return len(self._vocabulary)

    def id_to_token(self, token_id):
        """The token (str) of an id; a ValueError outside the vocabulary."""
        _check_id(token_id, len(self._vocabulary))
        return self._vocabulary[int(token_id)]

    def ids_to_tokens(self, ids):
        """The tokens of a sequence of ids, as `id_to_token` of each."""
        return [self._vocabulary[i] for i in _check_ids(ids, len(self._vocabulary))]

    def normalize(self, text):
        """NFKC, then lowercase for a lowercase vocabulary."""
        text = unicodedata.normalize("NFKC", text)
        return text.lower() if self.lowercase else text

    def _spell(self, word):
        """WordPiece ids of one word: longest pieces first, or [UNK]."""
        if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
            return [_UNK_ID]
        ids = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else SUFFIX_INDICATOR + word[start:end]
                if piece in self._ids:
                    ids.append(self._ids[piece])
                    start = end
                    break
            else:
                return [_UNK_ID]
        return ids

    def encode(self, sentences):
        """Token ids of each sentence (a list of str), no BOS or EOS: a list
        of lists of int."""
        if isinstance(sentences, str):
            raise TypeError("encode takes a list of str; wrap one sentence in a list.")
        return [
            [i for word in pretokenize(self.normalize(s)) for i in self._spell(word)]
            for s in sentences
        ]

    def decode(self, ids):
        """Text of one sequence of ids: stops at the first EOS, drops PAD
        and BOS, joins "##" pieces into words and words into text."""
        words = []
        for token_id in _kept_ids(ids, len(self._vocabulary)):
            token = self._vocabulary[token_id]
            piece = token[len(SUFFIX_INDICATOR) :]
            if token.startswith(SUFFIX_INDICATOR) and piece:
                if words:
                    words[-1] += piece
                else:
                    words.append(piece)
            else:
                words.append(token)
        return _join_words(words)

    def __repr__(self):
        return f"WordPieceTokenizer(vocabulary_size={self.vocabulary_size}, lowercase={self.lowercase})"


class SentencePieceTokenizer:
    """`zoo.data.SentencePieceTokenizer` through the `sentencepiece` package.

    The package's tokenizer runs the same model with tensorflow-text's
    SentencePiece op: no sampling, no BOS or EOS added, so the ids are the
    model's plain encoding; a character the model never saw is [UNK] and
    decodes as "[UNK]".

    Args:
        proto: bytes, a serialized SentencePiece model (a `.model` file).
        name: where the model comes from, for error messages.
    """

    def __init__(self, proto, name="SentencePiece model"):
        try:
            import sentencepiece
        except ImportError:
            raise MissingPackageError(
                f"{name} is a SentencePiece model, and the `sentencepiece` package "
                "is not installed: pip install sentencepiece"
            ) from None
        try:
            self._processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        except (RuntimeError, OSError, TypeError) as error:
            raise VocabularyError(f"{name}: not a SentencePiece model ({error})") from None
        pieces = [self._processor.id_to_piece(i) for i in range(len(SPECIAL_TOKENS))]
        if tuple(pieces) != SPECIAL_TOKENS:
            raise VocabularyError(
                f"{name}: a SentencePiece model must start with {', '.join(SPECIAL_TOKENS)}; "
                "re-export the run with `zoo export RUN_DIR --format onnx`"
            )

    @classmethod
    def load(cls, path):
        """The tokenizer of a `.model` file."""
        try:
            with open(path, "rb") as file:
                proto = file.read()
        except OSError as error:
            raise VocabularyError(f"cannot read the vocabulary {os.fspath(path)}: {error}") from None
        return cls(proto, os.fspath(path))

    @property
    def vocabulary_size(self):
        """The number of pieces, reserved pieces included."""
        return self._processor.vocab_size()

    def id_to_token(self, token_id):
        """The piece (str) of an id; a ValueError outside the vocabulary."""
        _check_id(token_id, self.vocabulary_size)
        return self._processor.id_to_piece(int(token_id))

    def ids_to_tokens(self, ids):
        """The pieces of a sequence of ids, as `id_to_token` of each, in one
        call of the package (a sentence's pieces are wanted for every
        translation's alignment)."""
        return self._processor.id_to_piece(_check_ids(ids, self.vocabulary_size))

    def encode(self, sentences):
        """Token ids of each sentence (a list of str), no BOS or EOS: a list
        of lists of int."""
        if isinstance(sentences, str):
            raise TypeError("encode takes a list of str; wrap one sentence in a list.")
        sentences = list(sentences)
        return [list(ids) for ids in self._processor.encode(sentences)] if sentences else []

    def decode(self, ids):
        """Text of one sequence of ids: stops at the first EOS, drops PAD and BOS."""
        return self._processor.decode(_kept_ids(ids, self.vocabulary_size))

    def __repr__(self):
        return f"SentencePieceTokenizer(vocabulary_size={self.vocabulary_size})"


_TOKENIZER_CLASSES = {"wordpiece": WordPieceTokenizer, "sentencepiece": SentencePieceTokenizer}


def load_tokenizer(path):
    """The tokenizer of a vocabulary file, by its suffix as
    `zoo.data.load_tokenizer` picks it: SentencePiece for `.model`,
    WordPiece for `.vocab` (one token a line).

    Raises:
        VocabularyError: the file has another suffix, cannot be read, or is
            a `.model` and `sentencepiece` is not installed.
    """
    path = Path(path)
    for kind, suffix in VOCABULARY_SUFFIXES.items():
        if path.suffix == suffix:
            return _TOKENIZER_CLASSES[kind].load(path)
    raise VocabularyError(
        f"{path}: not a vocabulary file (expected a name ending in "
        f"{' or '.join(VOCABULARY_SUFFIXES.values())})"
    )


def load_tokenizers(folder, files):
    """{role: tokenizer} of the vocabulary `files` ({role: file name}) in
    `folder`, each file loaded once: roles that share a file share the
    tokenizer (`zoo.tasks.loading.load_tokenizers`)."""
    folder = Path(folder)
    loaded = {name: load_tokenizer(folder / name) for name in dict.fromkeys(files.values())}
    return {role: loaded[name] for role, name in files.items()}


# --- images ---------------------------------------------------------------------

# The file formats `tf.io.decode_image` reads, by Pillow's names: no other.
IMAGE_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP")

# Pillow's modes of a 16-bit grayscale PNG.
_SIXTEEN_BIT_GRAY = ("I;16", "I;16B", "I;16L", "I;16N", "I")


def load_image(path, image_size, limits=None):
    """An image file as float32 `[image_size, image_size, 3]` in [0, 1], as
    `zoo.data.load_image` reads it; `limits` (the manifest's) bound the
    file's bytes and the decoded image's side (`RequestTooLarge`).

    See `load_image_bytes` for what is equal to TensorFlow's reading.

    Args:
        path: str or path-like, a JPEG, PNG, GIF (first frame), BMP or WebP
            file.
        image_size: int >= 1, the height and width to resize it to.
        limits: a dict with `max_image_bytes` and `max_image_side` (a
            manifest's `limits`); missing entries, or None, take
            `DEFAULT_LIMITS`; an entry None is no limit.

    Raises:
        InputError: the file is missing or cannot be decoded.
        RequestTooLarge: the file or the image is over a limit.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        what = "is a folder, not an image" if os.path.isdir(path) else "no such file"
        raise InputError(f"{path}: {what}")
    _check_image_bytes(os.path.getsize(path), limits, path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    return load_image_bytes(data, image_size, limits, name=path)


def load_image_bytes(data, image_size, limits=None, name="the image"):
    """An image file's contents as float32 `[image_size, image_size, 3]` in
    [0, 1], as `zoo.data.caption_pipeline.decode_image_bytes` makes it.

    Pillow decodes it (the first frame of a GIF; three channels: alpha
    dropped, gray repeated; a 16-bit PNG by its high byte, as
    `tf.io.decode_image`), and the resize is TensorFlow's `tf.image.resize(
    ..., antialias=True)` written in NumPy: the triangle kernel of
    ScaleAndTranslate, widened by the scale's inverse when it shrinks. For
    PNG, GIF, BMP and lossless WebP the pixels are TensorFlow's, and the
    result equals TensorFlow's to 1e-5. A JPEG's do not quite:
    `tf.io.decode_image` runs libjpeg's fast integer DCT, Pillow the
    accurate one (its pixels are exactly `tf.io.decode_jpeg(...,
    dct_method="INTEGER_ACCURATE")`'s), so a pixel can differ by a few
    units of 255; the resized image stays within the tests' JPEG_TOLERANCE
    of TensorFlow's (`tests/zoo/export/test_onnx_runner_text.py`).

    Args:
        data: bytes, the contents of an image file.
        image_size: int >= 1, the height and width to resize it to.
        limits: see `load_image`.
        name: what to call the image in error messages (its file).

    Raises:
        InputError: the bytes cannot be decoded as an image.
        RequestTooLarge: the bytes or the image are over a limit.
    """
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1:
        raise ValueError(f"image_size must be an int >= 1; received {image_size!r}.")
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    data = bytes(data)
    _check_image_bytes(len(data), limits, name)
    try:
        from PIL import Image
    except ImportError:
        raise MissingPackageError(
            f"reading {name} needs Pillow, which is not installed: pip install pillow"
        ) from None
    try:
        image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
        width, height = image.size  # read from the header: nothing decoded yet
    except Image.DecompressionBombError as error:
        raise RequestTooLarge(f"{name}: over Pillow's pixel limit ({error})") from None
    except Exception as error:  # Pillow raises many kinds for a bad file
        raise InputError(f"{name}: cannot be decoded as an image ({_reason(error)})") from None
    side = limits["max_image_side"]
    if side is not None and max(width, height) > side:
        raise RequestTooLarge(
            f"{name}: the image is {width}x{height} pixels (width x height), over the "
            f"limit max_image_side={side} (the export's limits); send a smaller image"
        )
    try:
        pixels = _rgb_pixels(image)
    except Exception as error:  # truncated or corrupt pixel data
        raise InputError(f"{name}: cannot be decoded as an image ({_reason(error)})") from None
    resized = _resize_antialiased(pixels, image_size)
    return np.clip(resized / np.float32(255.0), 0.0, 1.0).astype("float32")


def _check_image_bytes(size, limits, name):
    limit = {**DEFAULT_LIMITS, **(limits or {})}["max_image_bytes"]
    if limit is not None and size > limit:
        raise RequestTooLarge(
            f"{name}: {size} bytes is over the limit max_image_bytes={limit} "
            "(the export's limits); send a smaller file"
        )


def _reason(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _rgb_pixels(image):
    """uint8 `[H, W, 3]` of a Pillow image's first frame, as
    `tf.io.decode_image(channels=3)` gives them."""
    if image.format == "GIF":
        return _gif_first_frame(image)
    image.load()
    if image.mode in _SIXTEEN_BIT_GRAY:
        # TensorFlow keeps the high byte (libpng's strip_16); Pillow's own
        # conversion would clip the 16-bit values to 255.
        gray = (np.asarray(image).astype("int64") >> 8).clip(0, 255).astype("uint8")
        return np.repeat(gray[:, :, None], 3, axis=2)
    return np.asarray(image.convert("RGB"))


def _gif_first_frame(image):
    """A GIF's first frame as TensorFlow's decoder gives it: a canvas of the
    frame's own size (not the screen's), the frame drawn at its offset on
    it, and black where the frame is transparent or does not reach."""
    left, top, right, bottom = image.tile[0][1]  # the frame's extent, before load
    image.load()
    screen = np.asarray(image.convert("RGB")).copy()
    if image.mode in ("P", "L") and "transparency" in image.info:
        screen[np.asarray(image) == image.info["transparency"]] = 0
    height, width = bottom - top, right - left
    canvas = np.zeros((height, width, 3), "uint8")
    frame = screen[top:bottom, left:right]
    canvas[top:, left:] = frame[: max(height - top, 0), : max(width - left, 0)]
    return canvas


def _resize_spans(input_size, output_size):
    """`(index, weights)`, each `[output_size, span]`: the sources of each
    output pixel and their weights, as TensorFlow's ScaleAndTranslate
    computes them for `tf.image.resize(antialias=True)` (bilinear: the
    triangle kernel of radius 1; no translation), in float32 as it does."""
    f32 = np.float32
    inverse_scale = f32(1.0) / (f32(output_size) / f32(input_size))
    # Shrinking widens the kernel by 1/scale: each output averages all the
    # pixels it covers, not just its two neighbours.
    kernel_scale = max(inverse_scale, f32(1.0))
    sample = (np.arange(output_size, dtype=f32) + f32(0.5)) * inverse_scale
    start = np.clip(np.ceil(sample - kernel_scale - f32(0.5)), 0, input_size - 1).astype("int64")
    end = np.clip(np.floor(sample + kernel_scale - f32(0.5)), 0, input_size - 1).astype("int64") + 1
    span = int((end - start).max())
    index = start[:, None] + np.arange(span)
    position = (index.astype(f32) + f32(0.5) - sample[:, None]) / kernel_scale
    weights = np.where(index < end[:, None], np.maximum(f32(0.0), f32(1.0) - np.abs(position)), f32(0.0))
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(f32)
    return np.minimum(index, input_size - 1), weights


def _resize_antialiased(pixels, size):
    """uint8 `[H, W, 3]` -> float32 `[size, size, 3]` in [0, 255]:
    `tf.image.resize(pixels, [size, size], antialias=True)`."""
    rows_index, rows_weights = _resize_spans(pixels.shape[0], size)
    columns_index, columns_weights = _resize_spans(pixels.shape[1], size)
    # Rows first, then columns, as TensorFlow; one span offset at a time, so
    # that a large image is never copied whole as floats.
    rows = np.zeros((size, pixels.shape[1], 3), "float32")
    for k in range(rows_index.shape[1]):
        rows += rows_weights[:, k, None, None] * pixels[rows_index[:, k]]
    resized = np.zeros((size, size, 3), "float32")
    for k in range(columns_index.shape[1]):
        resized += columns_weights[None, :, k, None] * rows[:, columns_index[:, k]]
    return resized


# --- translating and captioning -----------------------------------------------
# `zoo.inference.translator.Translator` and `zoo.inference.captioner.Captioner`
# over an `OnnxModel`: the same batching, padding, splitting and step limits,
# so that the same sentences give the same tokens.

# Where an over-long input is split: after ". ! ?" followed by white space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# The search settings a manifest holds (`zoo export`'s options), and the
# Python API's defaults for a manifest without them.
DEFAULT_SEARCH = {"beam": 1, "length_penalty": 0.6, "coverage_penalty": 0.0, "stopping": "early"}


@dataclass
class Hypothesis:
    """One entry of an n-best list: `text`, `score` (log P(Y|X)),
    `penalized_score` (what the beam ranked it by) and `finished` (False for
    an unfinished hypothesis that fills the list; `beam_finished`)."""

    text: str
    score: float
    penalized_score: float
    finished: bool = True


@dataclass
class Translation:
    """One translated sentence, as `zoo.inference.translator.Translation`.

    Attributes:
        text: the detokenized translation.
        source_pieces, target_pieces: the pieces read and produced (EOS
            included when produced).
        alignment: float array `[len(target_pieces), len(source_pieces)]`,
            the attention of each produced piece over the source pieces.
        score: log P(Y | X).
        n_best: the `Hypothesis` list, best first, when asked for.
        parts: how many sentences an over-long source was translated as
            (with more than 1, `alignment` is a `BlockAlignment`).
        cut_parts: how many of those parts were still too long, and cut.
    """

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
    """One image's caption, as `zoo.inference.captioner.Caption`.

    Attributes:
        text: the detokenized caption.
        words: the pieces produced (EOS included when produced).
        attention: float array `[len(words), H, W]` over the feature grid.
        score: log P(Y | X).
        n_best: the `Hypothesis` list, best first, when asked for.
    """

    text: str
    words: list
    attention: np.ndarray
    score: float
    n_best: list = None


def split_sentences(text):
    """`text` split after each ". ! ?" that white space follows."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


def _padded(width):
    return -(-width // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE


class BlockAlignment:
    """`zoo.evaluation.alignment.BlockAlignment`: a block-diagonal alignment
    kept as its blocks (the parts' own), so that its memory grows with the
    line, not with its square; `np.asarray` makes it dense."""

    def __init__(self, blocks):
        self.blocks = [np.asarray(block) for block in blocks]

    @property
    def shape(self):
        return tuple(int(sum(block.shape[axis] for block in self.blocks)) for axis in (0, 1))

    @property
    def nbytes(self):
        return sum(block.nbytes for block in self.blocks)

    def placed(self):
        """Yields `(first row, first column, block)` along the diagonal."""
        row = column = 0
        for block in self.blocks:
            yield row, column, block
            row, column = row + block.shape[0], column + block.shape[1]

    def __array__(self, dtype=None, copy=None):
        dense = np.zeros(self.shape, dtype or np.result_type(*self.blocks, np.float32))
        for row, column, block in self.placed():
            dense[row : row + block.shape[0], column : column + block.shape[1]] = block
        return dense


def _join_parts(parts):
    """One `Translation` of the translations of a source's parts, in order
    (`zoo.inference.translator._join_parts`)."""
    if len(parts) == 1:
        return parts[0]
    n_best = None
    if parts[0].n_best is not None:
        n_best = []
        for k in range(max(len(p.n_best) for p in parts)):
            entries = [p.n_best[min(k, len(p.n_best) - 1)] for p in parts]
            n_best.append(
                Hypothesis(
                    text=" ".join(h.text for h in entries if h.text),
                    score=sum(h.score for h in entries),
                    penalized_score=sum(h.penalized_score for h in entries),
                    finished=all(h.finished for h in entries),
                )
            )
    return Translation(
        text=" ".join(p.text for p in parts if p.text),
        source_pieces=[piece for p in parts for piece in p.source_pieces],
        target_pieces=[piece for p in parts for piece in p.target_pieces],
        alignment=BlockAlignment(p.alignment for p in parts),
        score=sum(p.score for p in parts),
        n_best=n_best,
        parts=len(parts),
        cut_parts=sum(p.cut_parts for p in parts),
    )


class _Server:
    """What the translator and the captioner share: the model, the
    manifest's limits and search settings, and the search itself."""

    def __init__(self, model, manifest):
        self.model = model
        self.manifest = manifest
        self.limits = {**DEFAULT_LIMITS, **(manifest.get("limits") or {})}
        self.search_settings = {**DEFAULT_SEARCH, **(manifest.get("search") or {})}

    def settings(self, beam, length_penalty, coverage_penalty, stopping, n_best):
        """The search settings of a request: each one given, else the
        manifest's; checked, with one-line errors."""
        given = {
            "beam": beam,
            "length_penalty": length_penalty,
            "coverage_penalty": coverage_penalty,
            "stopping": stopping,
        }
        settings = {k: self.search_settings[k] if v is None else v for k, v in given.items()}
        beam = settings["beam"]
        if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or beam < 1:
            raise RunnerError(f"beam must be an int >= 1; received {beam!r}")
        for name in ("length_penalty", "coverage_penalty"):
            value = settings[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise RunnerError(f"{name} must be a number >= 0; received {value!r}")
        if settings["stopping"] not in STOPPING_RULES:
            raise RunnerError(
                f"stopping must be one of {', '.join(STOPPING_RULES)}; "
                f"received {settings['stopping']!r}"
            )
        if n_best > beam:
            raise RunnerError(f"n_best {n_best} needs a beam of {n_best} or more (beam is {beam})")
        return settings

    def check_request(self, count, what):
        limit = self.limits["max_batch"]
        if count > limit:
            raise RequestTooLarge(
                f"the request has {count} {what}, more than this export's max_batch={limit}; "
                "send at most that many a request"
            )

    def search(self, source, settings, max_length=None):
        if settings["beam"] == 1:
            return greedy_search(self.model, source, max_length=max_length)
        return beam_search(
            self.model,
            source,
            beam_width=settings["beam"],
            length_penalty=settings["length_penalty"],
            coverage_penalty=settings["coverage_penalty"],
            max_length=max_length,
            stopping=settings["stopping"],
        )

    def n_best_lists(self, result, rows, n_best, tokens, scores):
        """Per row, up to `n_best` `(tokens, score, penalized_score,
        finished)`."""
        if not n_best:
            return None
        eos, pad = self.model.eos_id, self.model.pad_id
        if result.beam_tokens is None:  # greedy: its one hypothesis
            return [
                [(t, float(s), float(s), bool(f))] for t, s, f in zip(tokens, scores, result.finished)
            ]
        beam_tokens = decode_to_lists(result.beam_tokens, eos, pad)
        return [
            [
                (
                    beam_tokens[row][k],
                    float(result.beam_scores[row, k]),
                    float(result.beam_penalized_scores[row, k]),
                    bool(result.beam_finished[row, k]),
                )
                for k in range(n_best)
                if result.beam_lengths[row, k] > 0  # an unused slot: the beam held fewer
            ]
            for row in range(rows)
        ]


class Translator(_Server):
    """An export folder's translation model and tokenizers (see `load`).

    Args:
        model: an `OnnxModel`.
        source_tokenizer, target_tokenizer: see `load_tokenizer`.
        manifest: the folder's manifest dict.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, manifest):
        super().__init__(model, manifest)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    @property
    def max_source_length(self):
        """The most source pieces a sentence is read as (the training cut)."""
        return self.manifest.get("training_max_length")

    def _encode_sources(self, sentences):
        """For each sentence, the `(ids, cut)` of its parts (as the Python
        API's `Translator._encode_sources`)."""
        limit = self.max_source_length
        units = []
        for sentence, ids in zip(sentences, self.source_tokenizer.encode(sentences)):
            if limit and len(ids) > limit:
                parts = split_sentences(sentence)
                part_ids = self.source_tokenizer.encode(parts) if len(parts) > 1 else [ids]
                units.append([(p[:limit] or [self.model.eos_id], len(p) > limit) for p in part_ids])
            else:
                units.append([(ids or [self.model.eos_id], False)])
        return units

    def translate(
        self,
        sentences,
        beam=None,
        length_penalty=None,
        coverage_penalty=None,
        n_best=0,
        stopping=None,
        batch_size=64,
        progress=None,
    ):
        """Translates a list of sentences: one request, at most the
        manifest's `max_batch` sentences.

        Sentences are decoded in batches of similar length. A sentence
        longer than the manifest's `training_max_length` pieces is split
        after ". ! ?" and white space, its parts translated and joined
        (`Translation.parts`); a part still longer is cut
        (`Translation.cut_parts`).

        Args:
            sentences: a list of str (or one str).
            beam, length_penalty, coverage_penalty, stopping: the search;
                None takes the manifest's (`zoo export`'s options).
            n_best: when positive, each `Translation.n_best` holds the
                `n_best` best hypotheses (at most `beam`).
            batch_size: sentences decoded at once.
            progress: optional callable, called with the number of
                sentences finished as each batch ends.

        Returns:
            A list of `Translation`, in the order of `sentences`.

        Raises:
            RequestTooLarge: more than `max_batch` sentences.
            RunnerError: a bad search setting.
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = list(sentences)
        self.check_request(len(sentences), "sentences")
        settings = self.settings(beam, length_penalty, coverage_penalty, stopping, n_best)
        units = self._encode_sources(sentences)
        owners = [(row, k) for row, parts in enumerate(units) for k in range(len(parts))]
        remaining = [len(parts) for parts in units]
        order = np.argsort([len(units[row][k][0]) for row, k in owners], kind="stable")
        decoded = [[None] * len(parts) for parts in units]
        for start in range(0, len(order), batch_size):
            batch = [owners[i] for i in order[start : start + batch_size]]
            translations = self._decode_batch([units[row][k] for row, k in batch], settings, n_best)
            finished = 0
            for (row, k), translation in zip(batch, translations):
                decoded[row][k] = translation
                remaining[row] -= 1
                finished += remaining[row] == 0
            if progress is not None:
                progress(finished)
        return [_join_parts(parts) for parts in decoded]

    def _decode_batch(self, units, settings, n_best):
        width = _padded(max(len(ids) for ids, _ in units))
        source = np.zeros((len(units), width), "int32")
        for row, (ids, _) in enumerate(units):
            source[row, : len(ids)] = ids
        result = self.search(source, settings)
        tokens = decode_to_lists(result.tokens, self.model.eos_id, self.model.pad_id, include_eos=True)
        lists = self.n_best_lists(result, len(units), n_best, tokens, result.scores)
        decode, pieces = self.target_tokenizer.decode, self.target_tokenizer.ids_to_tokens
        translations = []
        for i, (source_ids, cut) in enumerate(units):
            target = tokens[i]
            translations.append(
                Translation(
                    text=decode(target),
                    source_pieces=self.source_tokenizer.ids_to_tokens(source_ids),
                    target_pieces=pieces(target),
                    alignment=np.asarray(result.attention[i, : len(target), : len(source_ids)]),
                    score=float(result.scores[i]),
                    n_best=None
                    if lists is None
                    else [Hypothesis(decode(t), s, p, f) for t, s, p, f in lists[i]],
                    cut_parts=int(cut),
                )
            )
        return translations


class Captioner(_Server):
    """An export folder's captioning model and caption tokenizer (see `load`)."""

    def __init__(self, model, tokenizer, manifest):
        super().__init__(model, manifest)
        self.tokenizer = tokenizer

    @property
    def image_size(self):
        return self.model.image_size

    def caption(
        self,
        images,
        beam=None,
        length_penalty=None,
        coverage_penalty=None,
        n_best=0,
        stopping=None,
        batch_size=64,
        progress=None,
    ):
        """Captions images: uint8 (0-255) or float (0-1) `[N, S, S, 3]`, or
        a list of image file paths (read by `load_image`); one request, at
        most the manifest's `max_batch` images. The search arguments are
        `Translator.translate`'s. Returns a list of `Caption`."""
        count = len(images)
        self.check_request(count, "images")
        settings = self.settings(beam, length_penalty, coverage_penalty, stopping, n_best)
        if not isinstance(images, np.ndarray) and all(isinstance(i, (str, Path)) for i in images):
            images = np.stack([load_image(path, self.image_size, self.limits) for path in images])
        images = self._as_batch(images)
        grid = tuple(self.model.grid_shape)
        max_length = self.manifest.get("training_max_length")
        captions = []
        for start in range(0, count, batch_size):
            batch = images[start : start + batch_size]
            result = self.search(batch, settings, max_length=max_length)
            eos, pad = self.model.eos_id, self.model.pad_id
            tokens = decode_to_lists(result.tokens, eos, pad, include_eos=True)
            lists = self.n_best_lists(result, len(batch), n_best, tokens, result.scores)
            for k, ids in enumerate(tokens):
                steps = len(ids)
                captions.append(
                    Caption(
                        text=self.tokenizer.decode(ids),
                        words=self.tokenizer.ids_to_tokens(ids),
                        attention=np.asarray(result.attention[k, :steps]).reshape((steps,) + grid),
                        score=float(result.scores[k]),
                        n_best=None
                        if lists is None
                        else [
                            Hypothesis(self.tokenizer.decode(t), s, p, f)
                            for t, s, p, f in lists[k]
                        ],
                    )
                )
            if progress is not None:
                progress(len(batch))
        return captions

    def _as_batch(self, images):
        """Images as float32 `[N, S, S, 3]` in [0, 1] (uint8 scaled by 1/255),
        or a one-line error naming the shape expected."""
        images = np.asarray(images)
        expected = (self.image_size, self.image_size, 3)
        if images.ndim != 4 or images.shape[1:] != expected:
            raise InputError(
                f"images must have shape [N, {self.image_size}, {self.image_size}, 3] "
                f"(or be image file paths); received {images.shape}"
            )
        if images.dtype == np.uint8:
            return images.astype("float32") / 255.0
        return images.astype("float32")


def load(folder, providers=None, session_options=None):
    """An export folder as a `Translator` or a `Captioner`.

    Args:
        folder: an export folder.
        providers, session_options: see `OnnxModel`.

    Returns:
        A `Translator` for a translation export, a `Captioner` for a
        captioning one.
    """
    model = OnnxModel(folder, providers, session_options)
    manifest = model.manifest
    tokenizers = load_tokenizers(model.folder, manifest["vocabularies"])
    if manifest["task"] == CAPTIONING:
        return Captioner(model, tokenizers["target"], manifest)
    return Translator(model, tokenizers["source"], tokenizers["target"], manifest)


# --- word alignments -------------------------------------------------------------
# `zoo.evaluation.alignment.word_alignment`: each target word's pieces linked
# to the source word of their attention peak, in Pharaoh format.

_NON_WORD_PIECES = frozenset([t for t in SPECIAL_TOKENS if t != "[UNK]"] + ["<pad>", "<s>", "</s>"])
_SENTENCEPIECE_WORD_START = "\u2581"


def piece_words(pieces):
    """The index of the word each piece belongs to (None for a special
    piece): "▁" begins a SentencePiece word, "##" continues a WordPiece one."""
    sentencepiece = any(p.startswith(_SENTENCEPIECE_WORD_START) for p in pieces)
    words, current = [], -1
    for piece in pieces:
        if piece in _NON_WORD_PIECES:
            words.append(None)
            continue
        begins = piece.startswith(_SENTENCEPIECE_WORD_START) if sentencepiece else not piece.startswith("##")
        if begins or current < 0:
            current += 1
        words.append(current)
    return words


def pharaoh_alignment(translation):
    """The word alignment of a `Translation`: `"0-0 1-2 ..."` (source-target)."""
    source_words = piece_words(translation.source_pieces)
    target_words = piece_words(translation.target_pieces)
    attention = translation.alignment
    if not isinstance(attention, BlockAlignment):
        links = _peak_links(attention, source_words, target_words)
    else:
        # Attention is never negative, so a row's peak lies in its own block
        # whenever the row attends to a word at all: block by block is exact.
        links = set()
        for row, column, block in attention.placed():
            rows, columns = block.shape
            links |= _peak_links(
                block, source_words[column : column + columns], target_words[row : row + rows]
            )
    return " ".join(f"{s}-{t}" for s, t in sorted(links))


def _peak_links(attention, source_words, target_words):
    """`zoo.evaluation.alignment.peak_links`, as a set of links."""
    usable = np.array([w is not None for w in source_words], bool)
    if not usable.any():
        return set()
    attention = np.asarray(attention, "float64")
    masked = np.where(usable[None, :], attention, -np.inf)
    attended = np.where(usable[None, :], attention, 0.0).any(axis=1)
    links = set()
    for piece, word in enumerate(target_words):
        if word is not None and attended[piece]:
            links.add((source_words[int(np.argmax(masked[piece]))], word))
    return links


# --- the command line ------------------------------------------------------------

STDIN = "-"


def _parser(task):
    inputs = "image files" if task == CAPTIONING else "sentences"
    parser = argparse.ArgumentParser(
        prog="run.py",
        description=f"{'Caption' if task == CAPTIONING else 'Translate'} with this ONNX export "
        "(onnxruntime alone). Give the "
        f"{inputs} as arguments, or --input FILE (one a line; '-' for standard input). "
        "Outputs are written one a line, in input order; --output and --alignments "
        "files are written under a temporary name and renamed at the end, so an error "
        "leaves none.",
    )
    parser.add_argument("inputs", nargs="*", help=f"{inputs} to {'caption' if task == CAPTIONING else 'translate'}")
    parser.add_argument("--input", metavar="FILE", help="read one input a line ('-': standard input)")
    parser.add_argument("--output", metavar="FILE", help="write there (default: standard output)")
    parser.add_argument("--beam", type=_positive_int, help="beam width (default: the export's)")
    parser.add_argument("--length-penalty", type=_non_negative_float)
    parser.add_argument("--coverage-penalty", type=_non_negative_float)
    parser.add_argument("--beam-stop", choices=STOPPING_RULES, help="beam search's stopping rule")
    parser.add_argument(
        "--n-best", type=_positive_int, help="the K best of each input, Moses' n-best format"
    )
    parser.add_argument("--batch-size", type=_positive_int, default=32, help="decoded at once")
    if task == TRANSLATION:
        parser.add_argument(
            "--alignments", metavar="FILE", help="write each word alignment there (Pharaoh format)"
        )
    parser.add_argument("--progress", action="store_true", help="show inputs done and inputs/s")
    return parser


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1; received {text!r}")
    return value


def _non_negative_float(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0; received {text!r}")
    return value


def read_lines(path, chunk_lines):
    """Yields `(first line number, lines)` chunks of a UTF-8 text file (or
    standard input for '-'), line ends removed; a line that is not UTF-8
    raises `InputError` naming it."""
    name = "standard input" if path == STDIN else repr(path)
    stream = sys.stdin.buffer if path == STDIN else open(path, "rb")
    try:
        number, lines, first = 0, [], 1
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise InputError(
                    f"{name}: line {number} is not valid UTF-8 "
                    f"(byte 0x{raw[bad.start]:02x} at byte {bad.start + 1} of the line)"
                ) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            lines.append(line.rstrip("\r\n"))
            if len(lines) == chunk_lines:
                yield first, lines
                first, lines = number + 1, []
        if lines:
            yield first, lines
    finally:
        if path != STDIN:
            stream.close()


class _Replacing:
    """A file written under a temporary name beside `path` and renamed to
    it on success; removed on failure, so no half-written output is left."""

    def __init__(self, path):
        self.path = Path(path)
        self.temporary = self.path.with_name(f".{self.path.name}.partial")

    def __enter__(self):
        self.file = open(self.temporary, "w", encoding="utf-8", newline="\n")
        return self.file

    def __exit__(self, kind, value, traceback):
        self.file.close()
        if kind is None:
            self.temporary.replace(self.path)
        else:
            self.temporary.unlink(missing_ok=True)
        return False


class _Progress:
    """`N done, X/s` on standard error, rewritten in place."""

    def __init__(self, shown):
        import time

        self.clock = time.perf_counter
        self.start = self.clock()
        self.done = 0
        self.shown = shown

    def __call__(self, count):
        self.done += count
        if self.shown:
            rate = self.done / max(self.clock() - self.start, 1e-9)
            sys.stderr.write(f"\r{self.done} done, {rate:.1f}/s")
            sys.stderr.flush()

    def close(self):
        if self.shown and self.done:
            sys.stderr.write("\n")


def _check_arguments(args):
    if bool(args.inputs) == bool(args.input):
        raise RunnerError("give inputs as arguments or --input FILE ('-' for standard input), not both")
    if args.input and args.input != STDIN and not Path(args.input).is_file():
        raise RunnerError(f"input file {args.input!r} does not exist or is not a file")
    for flag in ("output", "alignments"):
        path = getattr(args, flag, None)
        if path is None:
            continue
        path = Path(path)
        if path.is_dir():
            raise RunnerError(f"--{flag} {str(path)!r} is a folder; name a file")
        if not path.parent.is_dir():
            raise RunnerError(f"--{flag} {str(path)!r}: folder {str(path.parent)!r} does not exist")


def _length_note(sentence, translation, limit):
    """What was done to a source longer than `limit` pieces, or None."""
    if translation.parts <= 1 and not translation.cut_parts:
        return None
    note = f"{len(sentence.split())} words, longer than the model's {limit}-piece limit"
    if translation.parts > 1:
        note += f"; split into {translation.parts} sentences"
        if translation.cut_parts:
            note += f", {translation.cut_parts} of them cut after piece {limit}"
        return note
    return note + f"; cut after piece {limit}"


def _n_best_lines(index, entries):
    return "".join(
        f"{index} ||| {h.text} ||| log_prob= {h.score:.4f} finished= {int(h.finished)} "
        f"||| {h.penalized_score:.4f}\n"
        for h in entries
    )


def serve(server, args, out, alignments, progress):
    """Decodes the inputs of `args` in requests of at most `max_batch` (and
    `--batch-size` a batch), writing each output line in input order."""
    chunk = min(server.limits["max_batch"], max(args.batch_size, 1) * 8)
    if args.inputs:
        chunks = ((1 + s, args.inputs[s : s + chunk]) for s in range(0, len(args.inputs), chunk))
    else:
        chunks = read_lines(args.input, chunk)
    options = dict(
        beam=args.beam,
        length_penalty=args.length_penalty,
        coverage_penalty=args.coverage_penalty,
        stopping=args.beam_stop,
        n_best=args.n_best or 0,
        batch_size=args.batch_size,
        progress=progress,
    )
    captioning = isinstance(server, Captioner)
    for start, lines in chunks:
        # A blank line of a file gives a blank output line, not decoded.
        rows = [r for r, line in enumerate(lines) if line.strip() or args.inputs]
        progress(len(lines) - len(rows))
        decode = server.caption if captioning else server.translate
        outputs = decode([lines[r] for r in rows], **options) if rows else []
        by_row = dict(zip(rows, outputs))
        for number, line in enumerate(lines, start=start):
            output = by_row.get(number - start)
            if output is None:
                out.write("" if args.n_best else "\n")
                if alignments:
                    alignments.write("\n")
                continue
            if not captioning:
                note = _length_note(line, output, server.max_source_length)
                if note:
                    sys.stderr.write(f"run.py: line {number}: {note}\n")
            if args.n_best:
                out.write(_n_best_lines(number - 1, output.n_best))
            else:
                out.write(output.text + "\n")
            if alignments:
                alignments.write(pharaoh_alignment(output) + "\n")
        out.flush()


def main(argv=None, folder=None):
    """`python run.py ...` (see `--help`): the folder is this file's own,
    or `folder`. Returns the exit status: 0, or 2 after a one-line error."""
    folder = Path(folder) if folder is not None else Path(__file__).resolve().parent
    try:
        task = read_manifest(folder)["task"]
        args = _parser(task).parse_args(argv)
        _check_arguments(args)
        server = load(folder)
        progress = _Progress(args.progress)
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(_Replacing(args.output)) if args.output else sys.stdout
            alignments = getattr(args, "alignments", None)
            if alignments:
                alignments = stack.enter_context(_Replacing(alignments))
            serve(server, args, out, alignments, progress)
        progress.close()
    except RunnerError as error:
        sys.stderr.write(f"run.py: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("run.py: interrupted; no output file was written\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
