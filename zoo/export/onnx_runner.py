"""Translate and caption from an ONNX export (`zoo.export.onnx_export`) with onnxruntime.

The model runs in onnxruntime only: `OnnxModel` loads the folder's two
graphs and offers the recipes' contract (`encode`, `decode_step`, the
special ids) over NumPy arrays. Greedy search is a NumPy loop over the
decoder-step graph (`greedy_search`); beam search is the very
`zoo.recipes.decoding.beam_search` with `OnnxModel` standing in for the
Keras model (compiled by `tf.function` around the onnxruntime calls on the
TensorFlow backend, see `onnx_search`), so the GNMT penalties and the
n-best list are the ones the Keras model gets. `OnnxTranslator` and
`OnnxCaptioner` are the `Translator` and `Captioner` of the Python API with
this model inside: batching, padding, step limits and detokenization are
theirs.

Tokenization reuses the run's tokenizers (`zoo.data.TextTokenizer` or
`zoo.data.SentencePieceTokenizer`, from the files) and image files are read by
`zoo.data.load_image`, both TensorFlow-based; neither the recipes' code nor
their weights are needed.

Example:

>>> from zoo.export import onnx_runner
>>> translator = onnx_runner.load("exports/rnnsearch_small")  # doctest: +SKIP
>>> translator.translate(["the dog sees a cat."])[0].text  # doctest: +SKIP
"""

import json
from pathlib import Path

import keras
import numpy as np
import onnxruntime

from zoo.export import onnx_format
from zoo.inference.captioner import Captioner
from zoo.errors import ZooUserError
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import task_for
from zoo.tasks.loading import load_tokenizers
from zoo.recipes import contract
from zoo.recipes import decoding
from zoo.inference.translator import Translator
from zoo.inference.search_cache import compiled_search


class OnnxFolderError(ZooUserError):
    """An export folder that is missing, incomplete or not `zoo.export.onnx_export`'s."""


class OnnxModel:
    """An exported model's encode / decode_step, run by onnxruntime.

    Args:
        folder: a folder written by `zoo.export.onnx_export.export_onnx`.
        providers: onnxruntime execution providers (default: CPU).
        session_options: optional `onnxruntime.SessionOptions` for both
            graphs (threads, optimisation level); default:
            `default_session_options()`.

    Attributes:
        manifest: the folder's manifest dict.
        pad_id, bos_id, eos_id, max_target_length, constant_state_keys,
        attention_state_key: the declarations of a recipe model
            (`zoo.recipes.contract.SequenceGenerator`), from the manifest.
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
        """S, as a recipe's `attention_width`: axis 1 of the declared entry."""
        return contract.attention_width(self, state)

    def encode(self, source):
        """Source `[B, S]` int32 ids (or images `[B, H, W, 3]`) -> state dict."""
        source = np.asarray(source, self._source["dtype"])
        values = self.encoder.run(self._state_names, {self._source["name"]: source})
        return dict(zip(self._state_names, values))

    def decode_step(self, previous_tokens, state, step):
        """One target step, as a recipe's `decode_step`.

        Returns:
            `(logits [B, V], state, attention [B, S])` as NumPy arrays.
        """
        feeds = {name: np.asarray(state[name]) for name in self._state_names}
        feeds["previous_tokens"] = np.asarray(previous_tokens, "int32")
        feeds["step"] = np.asarray(step, "int32")
        logits, attention, *carried = self.decoder.run(self._step_outputs, feeds)
        return logits, {**state, **dict(zip(self._carried, carried))}, attention


def default_session_options():
    """onnxruntime's defaults, but intra-op threads that sleep when idle.

    A decoding step is many small ops driven from a Python loop, and
    onnxruntime's worker threads spin between ops by default, taking the
    cores from that loop (and from anything else on the machine).
    """
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def read_manifest(folder):
    """The manifest of an export folder, checked: a one-line error otherwise."""
    folder = Path(folder)
    path = folder / onnx_format.MANIFEST
    if not path.is_file():
        raise OnnxFolderError(
            f"{str(folder)!r} is not an ONNX export: no {onnx_format.MANIFEST} "
            "(write one with `zoo.export.onnx_export.export_onnx(RUN_DIR, OUT)`)"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise OnnxFolderError(f"cannot read {path}: {error}") from None
    if manifest.get("format") != onnx_format.MANIFEST_FORMAT or manifest.get(
        "version"
    ) != onnx_format.MANIFEST_VERSION:
        raise OnnxFolderError(
            f"{path} is not a version-{onnx_format.MANIFEST_VERSION} "
            f"{onnx_format.MANIFEST_FORMAT} manifest; re-export the run"
        )
    graphs = [graph["file"] for graph in manifest["graphs"].values()]
    files = graphs + list(manifest["vocabularies"].values())
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise OnnxFolderError(
            f"export folder {str(folder)!r} is incomplete: missing {', '.join(missing)}"
        )
    return manifest


def greedy_search(model, source, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.greedy_search` over NumPy arrays.

    The same search step for step: the argmax of the running total of
    float32 log-probabilities, PAD fed back after EOS, the same step limit
    (`decoding.max_decoding_steps`), and a stop when every example has ended.

    Args:
        model: an `OnnxModel` (or any object with the contract that takes
            and returns NumPy arrays).
        source: int32 `[B, S]` token ids (or images `[B, H, W, 3]`).
        max_length, max_length_ratio, max_length_offset: as in
            `decoding.greedy_search`.

    Returns:
        A `decoding.DecodeResult` of NumPy arrays (the beam fields None).
    """
    source = np.asarray(source)
    batch = source.shape[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    tokens = np.full((batch,), model.bos_id, "int32")
    logits, state, attention = model.decode_step(tokens, state, 0)
    limit = decoding.max_decoding_steps(
        model, source_width, max_length, max_length_ratio, max_length_offset
    )
    hypotheses = np.zeros((batch, limit), "int32")
    alignment = np.zeros((batch, limit, source_width), "float32")
    scores = np.zeros((batch,), "float32")
    lengths = np.zeros((batch,), "int32")
    finished = np.zeros((batch,), bool)
    step = 0
    while True:
        totals = scores[:, None] + _log_softmax(logits.astype("float32"))
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
    return decoding.DecodeResult(
        tokens=hypotheses,
        lengths=lengths,
        scores=scores,
        attention=alignment,
        finished=finished,
        num_steps=np.int32(step),
    )


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def onnx_search(
    model, beam, length_penalty, coverage_penalty=0.0, max_length=None, stopping="early"
):
    """Greedy (`beam=1`, NumPy) or beam search (`decoding.beam_search`) of an
    `OnnxModel`, as a function of the source batch: the counterpart of
    `zoo.inference.search_cache.compiled_search`.

    On the TensorFlow backend the beam search is compiled by `tf.function`
    around the onnxruntime calls (`_GraphStepModel`), since run eagerly its
    keras.ops bookkeeping costs far more than the model's own steps. On
    other backends it runs eagerly.
    """
    if beam == 1:
        return lambda source: greedy_search(model, source, max_length=max_length)
    if keras.backend.backend() == "tensorflow":
        model = _GraphStepModel(model)
    return compiled_search(model, beam, length_penalty, coverage_penalty, max_length, stopping)


# onnxruntime's type names -> NumPy dtypes, for the graphs' inputs and outputs.
_ONNX_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(bool)": "bool",
}


class _GraphStepModel:
    """An `OnnxModel` whose `encode` and `decode_step` are `tf.numpy_function`
    nodes, so that a search written in keras.ops traces into one TensorFlow
    graph around the onnxruntime calls (TensorFlow backend only)."""

    def __init__(self, model):
        self.model = model
        self.pad_id, self.bos_id, self.eos_id = model.pad_id, model.bos_id, model.eos_id
        self.max_target_length = model.max_target_length
        self.constant_state_keys = model.constant_state_keys
        self.attention_state_key = model.attention_state_key
        self._encoder_outputs = _signature(model.encoder.get_outputs())
        self._step_outputs = _signature(model.decoder.get_outputs())

    def attention_width(self, state):
        return contract.attention_width(self, state)

    def encode(self, source):
        import tensorflow as tf

        names = self.model.manifest["state"]
        values = tf.numpy_function(
            lambda source: list(self.model.encode(source).values()),
            [source],
            [self._encoder_outputs[name][0] for name in names],
            stateful=False,
        )
        return {name: _with_shape(v, self._encoder_outputs[name]) for name, v in zip(names, values)}

    def decode_step(self, previous_tokens, state, step):
        import tensorflow as tf

        names = self.model.manifest["state"]
        outputs = self.model.manifest["graphs"]["decoder_step"]["outputs"]

        def run(previous_tokens, step, *values):
            logits, new_state, attention = self.model.decode_step(
                previous_tokens, dict(zip(names, values)), step
            )
            carried = [new_state[name] for name in self.model.manifest["carried_state"]]
            return [logits, attention, *carried]

        values = tf.numpy_function(
            run,
            [previous_tokens, step] + [state[name] for name in names],
            [self._step_outputs[name][0] for name in outputs],
            stateful=False,
        )
        logits, attention, *carried = (
            _with_shape(v, self._step_outputs[name]) for name, v in zip(outputs, values)
        )
        # Carried entries keep their input's shape, which the while loop
        # checks.
        carried = {
            name: tf.ensure_shape(value, state[name].shape)
            for name, value in zip(self.model.manifest["carried_state"], carried)
        }
        return logits, {**state, **carried}, attention


def _signature(values):
    """{name: (dtype, shape with None for symbolic axes)} of graph values."""
    return {
        value.name: (
            _ONNX_TYPES[value.type],
            [axis if isinstance(axis, int) else None for axis in value.shape],
        )
        for value in values
    }


def _with_shape(tensor, signature):
    tensor.set_shape(signature[1])
    return tensor


class OnnxTranslator(Translator):
    """A `Translator` whose model is an `OnnxModel` (see `load`)."""

    make_search = staticmethod(onnx_search)


class OnnxCaptioner(Captioner):
    """A `Captioner` whose model is an `OnnxModel` (see `load`)."""

    make_search = staticmethod(onnx_search)


# Each task's ONNX inference wrapper.
RUNNERS = {TRANSLATION: OnnxTranslator, CAPTIONING: OnnxCaptioner}


def load(folder, providers=None, session_options=None):
    """An export folder as an `OnnxTranslator` or an `OnnxCaptioner`.

    Args:
        folder: a folder written by `zoo.export.onnx_export.export_onnx`.
        providers, session_options: see `OnnxModel`.

    Returns:
        `OnnxTranslator` for a translation export, `OnnxCaptioner` for a
        captioning one; `translate` / `caption` / `evaluate` as in the
        Python API.
    """
    model = OnnxModel(folder, providers, session_options)
    manifest = model.manifest
    vocabularies = load_tokenizers(model.folder, manifest["vocabularies"])
    task = task_for(manifest)
    return task.open(model, vocabularies, manifest["config"], wrapper=RUNNERS[task])
