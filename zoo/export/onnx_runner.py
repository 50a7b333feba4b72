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

# Imported here rather than at the top, so that this section stays whole.
import io  # noqa: E402
import os  # noqa: E402
import unicodedata  # noqa: E402

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
    kept = []
    for token_id in ids.tolist():
        if token_id == _EOS_ID:
            break
        if token_id not in (_PAD_ID, _BOS_ID):
            _check_id(token_id, vocabulary_size)
            kept.append(int(token_id))
    return kept


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
