"""The WordPiece and SentencePiece tokenizers, without TensorFlow."""

import os
import unicodedata
from pathlib import Path

import numpy as np

from .layout import SPECIAL_TOKENS
from .layout import MissingPackageError
from .layout import VocabularyError


# `zoo.data.TextTokenizer` (WordPiece) and `zoo.data.SentencePieceTokenizer`
# without TensorFlow: each has encode(list of str) -> lists of ids,
# decode(ids) -> str, id_to_token(id) -> str, ids_to_tokens(ids) -> list of str.

# A vocabulary's kind by its file's suffix (`zoo.runs.VOCABULARY_SUFFIXES`).
VOCABULARY_SUFFIXES = {"wordpiece": ".vocab", "sentencepiece": ".model"}

# The contract's ids of SPECIAL_TOKENS that `decode` reads.
_PAD_ID, _UNK_ID, _BOS_ID, _EOS_ID = range(len(SPECIAL_TOKENS))

# WordPiece (`zoo.data.wordpiece_tokenizer`): continuation pieces start with this, and
# tensorflow-text's FastWordpieceTokenizer spells a word of more UTF-8 bytes
# than this as "[UNK]".
SUFFIX_INDICATOR = "##"
MAX_BYTES_PER_WORD = 100

# How `decode` spaces punctuation (`zoo.data.wordpiece_tokenizer._join_words`).
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
