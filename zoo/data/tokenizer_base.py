"""What every translation tokenizer of a run shares, whatever its subwords.

TensorFlow only by nature: tokenization and detokenization are traced
`tf.function`s, so that they run inside `tf.data` and inside an exported
SavedModel. `zoo.data.wordpiece_tokenizer.TextTokenizer` (WordPiece) and
`zoo.data.sentencepiece_tokenizer.SentencePieceTokenizer` subclass
`GraphTokenizer`, which holds the vocabulary, the id look-ups, the checks of
the inputs and the batching; a subclass gives the graph ops of its subword
model (`_tokenize_graph`, `_detokenize_graph`) and `decode`.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from zoo.recipes.contract import BOS_ID
from zoo.recipes.contract import EOS_ID
from zoo.recipes.contract import PAD_ID
from zoo.recipes.contract import SPECIAL_TOKENS

# Sentences tokenized per call in `encode` (bounds the memory of one call).
ENCODE_CHUNK = 8192


def kept_ids(ids):
    """The ids `decode` reads of each row of `ids` `[batch, length]`, as a
    ragged tensor: those before the first `[EOS]`, without `[PAD]` or `[BOS]`."""
    kept = tf.logical_and(
        tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0),
        tf.logical_and(tf.not_equal(ids, PAD_ID), tf.not_equal(ids, BOS_ID)),
    )
    return tf.ragged.boolean_mask(ids, kept)


def kept_id_list(ids):
    """`kept_ids` of one Python sequence of ids: a list of int."""
    kept = []
    for token_id in ids:
        if token_id == EOS_ID:
            break
        if token_id not in (PAD_ID, BOS_ID):
            kept.append(token_id)
    return kept


def training_sentences(sentences, vocabulary_size):
    """The sentences a tokenizer learns from, as a list of str, once
    `vocabulary_size` and the text are checked (ValueErrors otherwise)."""
    reserved = len(SPECIAL_TOKENS)
    if not isinstance(vocabulary_size, int) or vocabulary_size <= reserved:
        raise ValueError(
            f"vocabulary_size must be an int > {reserved} (the reserved "
            f"tokens); received {vocabulary_size!r}."
        )
    sentences = [str(sentence) for sentence in sentences]
    if not any(sentence.strip() for sentence in sentences):
        raise ValueError("cannot train a tokenizer on no text: no sentences.")
    return sentences


def instance_function(method, *input_signature):
    """`tf.function(method, input_signature)`, for a method of one tokenizer.

    TensorFlow's retracing warning counts traces per code object, so that
    several tokenizers (a run loads its own twice), each tracing its own
    function once, would read as one function traced again and again; a
    `functools.partial` has no code object, so each tokenizer's function is
    counted alone, and a true retrace of one still warns.
    """
    return tf.function(
        functools.partial(method.__func__, method.__self__), input_signature=list(input_signature)
    )


class GraphTokenizer:
    """The shared part of a run's tokenizers (see the module docstring).

    Args:
        vocabulary: list of str tokens in id order, starting with the
            recipes' contract's `["[PAD]", "[UNK]", "[BOS]", "[EOS]"]`.
    """

    def __init__(self, vocabulary):
        self._vocabulary = list(vocabulary)
        self._token_to_id = {token: i for i, token in enumerate(self._vocabulary)}
        # Traced once for a batch of any size.
        self._tokenize_batch = instance_function(
            self._tokenize_graph, tf.TensorSpec([None], tf.string)
        )
        self._detokenize_batch = instance_function(
            self._detokenize_graph, tf.TensorSpec([None, None], tf.int32)
        )

    def _tokenize_graph(self, text):
        raise NotImplementedError

    def _detokenize_graph(self, ids):
        raise NotImplementedError

    def decode(self, ids):
        raise NotImplementedError

    def _normalize_all(self, texts):
        raise NotImplementedError

    # --- vocabulary ----------------------------------------------------------

    @property
    def vocabulary_size(self):
        """The number of tokens, reserved tokens included (an int)."""
        return len(self._vocabulary)

    @property
    def vocabulary(self):
        """The tokens, a list of str in id order (a copy)."""
        return list(self._vocabulary)

    def id_to_token(self, token_id):
        """The token (str) of an id; a ValueError outside the vocabulary."""
        token_id = int(token_id)
        if not 0 <= token_id < len(self._vocabulary):
            raise ValueError(
                f"token id {token_id} is outside the vocabulary "
                f"[0, {len(self._vocabulary) - 1}]."
            )
        return self._vocabulary[token_id]

    def decoded_ids(self, ids):
        """The ids of one sequence that `decode` reads (`kept_id_list`).

        Args:
            ids: a 1-D sequence of ints (list, NumPy array or tensor).

        Returns:
            A list of int; a ValueError for anything but one sequence of
            ids of the vocabulary.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(
                f"decode takes one sequence of ids; received shape {ids.shape}."
            )
        kept = kept_id_list(ids.tolist())
        for token_id in kept:
            self.id_to_token(token_id)  # a ValueError outside the vocabulary
        return kept

    def token_to_id(self, token):
        """The id (int) of a token; a ValueError if it is not in the vocabulary."""
        if token not in self._token_to_id:
            raise ValueError(f"token {token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    # --- text to ids and back ---------------------------------------------

    def tokenize(self, text):
        """Token ids of a string tensor, for `tf.data` (no BOS or EOS).

        Args:
            text: a tf string tensor (or str, or list of str): a scalar or a
                vector of sentences.

        Returns:
            int32 ids: a 1-D `tf.Tensor` for a scalar, a `tf.RaggedTensor`
            `[batch, None]` for a vector.
        """
        text = tf.convert_to_tensor(text, dtype=tf.string)
        if text.shape.rank == 0:
            return self._tokenize_batch(tf.expand_dims(text, 0))[0]
        if text.shape.rank != 1:
            raise ValueError(
                f"tokenize takes a scalar or a vector of strings; received "
                f"shape {text.shape}."
            )
        return self._tokenize_batch(text)

    def encode(self, sentences):
        """Token ids of each sentence, as Python lists (no BOS or EOS).

        Args:
            sentences: a list of str.

        Returns:
            A list of lists of int, one per sentence.
        """
        if isinstance(sentences, str):
            raise TypeError("encode takes a list of str; wrap one sentence in a list.")
        sentences = list(sentences)
        ids = []
        for start in range(0, len(sentences), ENCODE_CHUNK):
            chunk = sentences[start : start + ENCODE_CHUNK]
            ids += self._tokenize_batch(tf.constant(chunk, tf.string)).to_list()
        return ids

    def normalize(self, text):
        """The form `decode(encode(...))` gives text, whatever the vocabulary.

        Useful to prepare references the way the model sees them. Words out
        of the vocabulary are kept (they would decode as "[UNK]"). WordPiece
        lowercases (for a lowercase vocabulary) and respaces punctuation;
        SentencePiece only applies Unicode NFKC and collapses white space.

        Args:
            text: a str, or a list of str.

        Returns:
            A str, or a list of str.
        """
        if isinstance(text, str):
            return self._normalize_all([text])[0]
        texts = list(text)
        return self._normalize_all(texts) if texts else []

    def detokenize(self, ids):
        """Text of a batch of id sequences, in TensorFlow graph ops.

        Row by row it is exactly `decode` (it stops at the first `[EOS]` and
        drops `[PAD]` and `[BOS]`), written with TensorFlow ops so that it
        runs inside a `tf.function` or an exported SavedModel.

        Args:
            ids: int32 `[batch, length]` token ids (a tensor or array).

        Returns:
            A string `tf.Tensor` `[batch]`.
        """
        ids = tf.convert_to_tensor(ids, tf.int32)
        if ids.shape.rank != 2:
            raise ValueError(
                f"detokenize takes a batch of id sequences [batch, length]; "
                f"received shape {ids.shape}."
            )
        return self._detokenize_batch(ids)
