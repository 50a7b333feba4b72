"""WordPiece tokenization for translation, learned from the training data.

TensorFlow only by nature: it wraps keras-nlp's `WordPieceTokenizer` and
`compute_word_piece_vocabulary` (tensorflow-text underneath), so that
tokenization runs inside `tf.data` and inside an exported SavedModel.

Text goes through three steps, the same in training, encoding and
`normalize`:

1. Unicode NFKC normalization (composed umlauts; a no-break space becomes a
   space) and, for a lowercase vocabulary, `tf.strings.lower` with UTF-8
   semantics. keras-nlp's own `lowercase=True` is not used: it case-folds,
   which turns "ß" into "ss". `strip_accents` is off, so ä ö ü ß é survive.
2. keras-nlp's pre-tokenization: split on white space, and every
   punctuation character becomes a word of its own.
3. WordPiece: each word becomes the longest vocabulary pieces, later pieces
   prefixed with "##"; a word that cannot be spelled maps to "[UNK]".

`decode` inverts this: it joins "##" pieces into words, then joins words with
spaces except around punctuation that attaches (see `_join_words`: no space
before `. , ; : ! ? ) ] } %` and closing quotes, none after `( [ {` and the
German opening quote, none on either side of `- ' / ’`). So, for text whose
words are all in the vocabulary, `decode(encode(s)) == normalize(s)`, and
for ordinary text `normalize(s)` is `s` lowercased: "A man, in a t-shirt."
comes back as "a man, in a t-shirt.".
`detokenize` is `decode` in TensorFlow graph ops, for a batch (it is what
an exported SavedModel runs); every rule above is expressed there.

The reserved tokens come first, so their ids are fixed, those of the
recipes' contract (`zoo.recipes.contract.SPECIAL_TOKENS`):
`[PAD]`=0, `[UNK]`=1, `[BOS]`=2, `[EOS]`=3.
"""

from __future__ import annotations

import os

import keras_nlp
import tensorflow as tf
import tensorflow_text as tf_text

# keras-nlp's WordPieceTokenizer applies exactly this split before WordPiece;
# `normalize` uses it too, so that it matches `tokenize` by construction.
from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize

from zoo.data.tokenizer_base import GraphTokenizer
from zoo.data.tokenizer_base import instance_function
from zoo.data.tokenizer_base import kept_ids
from zoo.data.tokenizer_base import training_sentences
from zoo.recipes.contract import SPECIAL_TOKENS
from zoo.recipes.contract import UNK_TOKEN

# `zoo.data`'s name of the recipes' contract's special tokens.
RESERVED_TOKENS = SPECIAL_TOKENS

SUFFIX_INDICATOR = "##"

# How `decode` spaces punctuation (each is one word after pre-tokenization).
_ATTACH_LEFT = frozenset(".,;:!?)]}%“”")  # no space before
_ATTACH_RIGHT = frozenset("([{„")  # no space after
_ATTACH_BOTH = frozenset("-'/’")  # neither: t-shirt, man's, and/or

# Settings shared by vocabulary learning and tokenization.
_SPLIT_SETTINGS = dict(
    lowercase=False, strip_accents=False, split=True, split_on_cjk=True
)


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


def _is_one_of(strings, choices):
    """Whether each string of a tensor is one of `choices` (a set of str)."""
    return tf.reduce_any(
        tf.equal(tf.expand_dims(strings, -1), tf.constant(sorted(choices))), axis=-1
    )


def _normalize_tensor(text, lowercase):
    text = tf_text.normalize_utf8(text, "NFKC")
    if lowercase:
        text = tf.strings.lower(text, encoding="utf-8")
    return text


def _is_cased(vocabulary):
    return any(
        char.isupper() for token in vocabulary[len(SPECIAL_TOKENS) :] for char in token
    )


class TextTokenizer(GraphTokenizer):
    """A WordPiece tokenizer for one language of a translation corpus.

    Learn it from the training sentences with `TextTokenizer.train`, save it
    with the run (`save`: a plain vocabulary file, one token a line) and
    restore it with `TextTokenizer.load`. The vocabulary alone defines the
    tokenizer: it lowercases its input exactly when the vocabulary has no
    uppercase letter (true of every vocabulary trained with
    `lowercase=True`), so a loaded tokenizer behaves like the saved one.

    Args:
        vocabulary: list of str tokens, starting with
            `["[PAD]", "[UNK]", "[BOS]", "[EOS]"]`; continuation pieces start
            with "##".

    Example:

    >>> tokenizer = TextTokenizer.train(["Ein Mädchen läuft."], 100)
    >>> ids = tokenizer.encode(["Ein Mädchen läuft."])[0]
    >>> tokenizer.decode(ids)
    'ein mädchen läuft.'
    >>> dataset = dataset.map(tokenizer.tokenize)  # doctest: +SKIP
    """

    def __init__(self, vocabulary):
        vocabulary = [str(token) for token in vocabulary]
        if tuple(vocabulary[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(
                f"the vocabulary must start with {list(SPECIAL_TOKENS)}; "
                f"received {vocabulary[: len(SPECIAL_TOKENS)]}."
            )
        bad = [t for t in vocabulary if not t or t != t.strip() or "\n" in t]
        if bad:
            raise ValueError(
                f"vocabulary tokens must be non-empty without surrounding white "
                f"space; received {bad[:3]!r}."
            )
        if len(set(vocabulary)) != len(vocabulary):
            seen = set()
            repeated = [t for t in vocabulary if t in seen or seen.add(t)]
            raise ValueError(f"the vocabulary repeats tokens: {repeated[:5]!r}.")
        super().__init__(vocabulary)
        self._lowercase = not _is_cased(vocabulary)
        self._wordpiece = keras_nlp.tokenizers.WordPieceTokenizer(
            vocabulary=vocabulary,
            suffix_indicator=SUFFIX_INDICATOR,
            oov_token=UNK_TOKEN,
            dtype="int32",
            **_SPLIT_SETTINGS,
        )
        # Traced once for a batch of any size, as `tokenize` is: inside a
        # tf.function keras-nlp takes its tensorflow-text path (eagerly it
        # would run pure Python).
        self._pretokenize_batch = instance_function(
            self._pretokenize_graph, tf.TensorSpec([None], tf.string)
        )

    # --- construction and storage ------------------------------------------

    @classmethod
    def train(cls, sentences, vocabulary_size, lowercase=True):
        """Learn a WordPiece vocabulary from training sentences.

        Uses keras-nlp's `compute_word_piece_vocabulary` (the tensorflow-text
        learner). It keeps pieces seen at least 10 times, so a small corpus
        gives fewer than `vocabulary_size` tokens. Learning is slow pure
        Python, slowest when `vocabulary_size` is more than the corpus
        gives: save the result with the run and `load` it.

        Args:
            sentences: iterable of str, the training sentences of one
                language.
            vocabulary_size: int >= 5, the most tokens, reserved ones
                included.
            lowercase: bool, lowercase the text (in training and after).

        Returns:
            A `TextTokenizer`.
        """
        sentences = training_sentences(sentences, vocabulary_size)
        normalize = tf.function(
            lambda text: _normalize_tensor(text, lowercase),
            input_signature=[tf.TensorSpec([None], tf.string)],
        )
        data = tf.data.Dataset.from_tensor_slices(sentences).batch(1024).map(normalize)
        vocabulary = keras_nlp.tokenizers.compute_word_piece_vocabulary(
            data,
            vocabulary_size,
            suffix_indicator=SUFFIX_INDICATOR,
            reserved_tokens=list(SPECIAL_TOKENS),
            **_SPLIT_SETTINGS,
        )
        return cls(vocabulary)

    @classmethod
    def load(cls, path):
        """Load a tokenizer saved with `save` (a vocabulary file, one token a line)."""
        with open(path, encoding="utf-8", newline="") as file:
            tokens = file.read().split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        try:
            return cls(tokens)
        except ValueError as error:
            raise ValueError(f"{os.fspath(path)}: {error}") from None

    def save(self, path):
        """Write the vocabulary to `path`, UTF-8, one token a line."""
        with open(path, "w", encoding="utf-8", newline="") as file:
            file.write("".join(token + "\n" for token in self._vocabulary))

    # --- vocabulary ----------------------------------------------------------

    @property
    def lowercase(self):
        """Whether input is lowercased: the vocabulary has no uppercase letter."""
        return self._lowercase

    @property
    def wordpiece(self):
        """The keras-nlp `WordPieceTokenizer` layer inside.

        It does not normalize: `tokenize` applies NFKC and lowercasing
        first, so export `tokenize` itself; called inside a `tf.function`
        of a `tf.Module`, it is saved in a SavedModel as is (its WordPiece
        model is a graph constant) and needs no Python to run.
        """
        return self._wordpiece

    # --- text to ids ------------------------------------------------------

    def _tokenize_graph(self, text):
        return self._wordpiece.tokenize(_normalize_tensor(text, self._lowercase))

    def _pretokenize_graph(self, text):
        return pretokenize(_normalize_tensor(text, self._lowercase), **_SPLIT_SETTINGS)

    # --- ids to text ----------------------------------------------------------

    def decode(self, ids):
        """Text of one sequence of ids.

        Stops at the first `[EOS]`, drops `[PAD]` and `[BOS]`, joins "##"
        pieces into words and words into text (see the module docstring);
        an unknown word reads "[UNK]".

        Args:
            ids: a 1-D sequence of ints (list, NumPy array or tensor).

        Returns:
            A str.
        """
        words = []
        for token_id in self.decoded_ids(ids):
            token = self.id_to_token(token_id)
            piece = token[len(SUFFIX_INDICATOR) :]
            if token.startswith(SUFFIX_INDICATOR) and piece:
                if words:
                    words[-1] += piece
                else:
                    words.append(piece)
            else:
                words.append(token)
        return _join_words(words)

    def _detokenize_graph(self, ids):
        # `decode`'s loop, as masks over the tokens of each row.
        tokens = tf.gather(tf.constant(self._vocabulary, tf.string), kept_ids(ids))
        flat = tokens.flat_values
        first = tf.equal(
            tf.range(tf.size(flat, out_type=tf.int64)),
            tf.gather(tokens.row_splits, tokens.value_rowids()),
        )
        # A "##" piece joins the word before it; at the start of a row there
        # is none, and decode makes it a word of its own, "##" dropped.
        marked = tf.strings.regex_full_match(flat, SUFFIX_INDICATOR + ".+")
        suffix = tf.logical_and(marked, tf.logical_not(first))
        pieces = tf.where(
            marked, tf.strings.regex_replace(flat, "^" + SUFFIX_INDICATOR, ""), flat
        )
        starts_word = tf.logical_not(suffix)
        # Punctuation is one character, so a word that is punctuation is a
        # word of one piece: one not followed by a "##" piece.
        one_piece = tf.logical_and(
            starts_word, tf.logical_not(tf.concat([suffix, [False]], axis=0)[1:])
        )
        attaches_left = tf.logical_and(
            one_piece, _is_one_of(pieces, _ATTACH_LEFT | _ATTACH_BOTH)
        )
        attaches_right = tf.logical_and(
            one_piece, _is_one_of(pieces, _ATTACH_RIGHT | _ATTACH_BOTH)
        )
        after_attaching = tf.concat([[True], attaches_right], axis=0)[:-1]
        space = tf.logical_not(
            tf.reduce_any(
                tf.stack([first, suffix, after_attaching, attaches_left]), axis=0
            )
        )
        spaced = tf.where(space, tf.strings.join([" ", pieces]), pieces)
        return tf.strings.reduce_join(tokens.with_flat_values(spaced), axis=1)

    def _normalize_all(self, texts):
        words = self._pretokenize_batch(tf.constant(texts, dtype=tf.string)).to_list()
        return [_join_words(w.decode("utf-8") for w in row) for row in words]

    def __repr__(self):
        return (
            f"TextTokenizer(vocabulary_size={self.vocabulary_size}, "
            f"lowercase={self.lowercase})"
        )
