"""SentencePiece tokenization for translation, learned from the training data.

TensorFlow only by nature: the `sentencepiece` package trains the model
(unigram by default, or BPE), and keras-hub's `SentencePieceTokenizer`
(tensorflow-text's SentencePiece op underneath) runs it inside `tf.data` and
inside an exported SavedModel, whose graph holds the model as a constant.

Unlike WordPiece, SentencePiece keeps case and spacing: the text is
normalized (Unicode NFKC, the "nmt_nfkc" rule: white space runs become one
space, none at either end) and split into pieces that carry their leading
space as "▁", so `decode(encode(s)) == normalize(s) == s` for ordinary text
whose characters the model knows: "Ein Mädchen läuft über die Straße."
comes back as written. A character the model never saw reads "[UNK]".

The reserved pieces have the recipes' contract's ids
(`zoo.recipes.contract.SPECIAL_TOKENS`): `[PAD]`=0, `[UNK]`=1, `[BOS]`=2,
`[EOS]`=3.
"""

from __future__ import annotations

import hashlib
import io
import os

import keras_hub
import sentencepiece
import tensorflow as tf

from zoo.data.tokenizer_base import GraphTokenizer
from zoo.data.tokenizer_base import kept_ids
from zoo.data.tokenizer_base import training_sentences
from zoo.recipes.contract import SPECIAL_TOKENS

MODEL_TYPES = ("unigram", "bpe")

# The piece SentencePiece marks a word's leading space with.
SPACE_MARK = "\u2581"

# The trainer's settings that are ours, not its defaults: the contract's
# special ids and pieces; every character of the corpus kept (European
# languages have few, and a rare accented letter must not become [UNK]);
# a corpus too small for the asked size gives a smaller vocabulary instead
# of an error; and one thread over all sentences in their order, so that
# two trainings of the same data write the same model.
_TRAINER_SETTINGS = dict(
    pad_id=0,
    unk_id=1,
    bos_id=2,
    eos_id=3,
    pad_piece=SPECIAL_TOKENS[0],
    unk_piece=SPECIAL_TOKENS[1],
    bos_piece=SPECIAL_TOKENS[2],
    eos_piece=SPECIAL_TOKENS[3],
    unk_surface=SPECIAL_TOKENS[1],
    character_coverage=1.0,
    hard_vocab_limit=False,
    num_threads=1,
    input_sentence_size=0,
    shuffle_input_sentence=False,
    normalization_rule_name="nmt_nfkc",
    minloglevel=2,
)


class SentencePieceTokenizer(GraphTokenizer):
    """A SentencePiece tokenizer for one language (or both) of a corpus.

    The same interface as `zoo.data.TextTokenizer`: learn it with
    `SentencePieceTokenizer.train`, save it with the run (`save`: the
    SentencePiece model file, `.model`, which `spm_encode` reads too) and
    restore it with `SentencePieceTokenizer.load`. It never lowercases.

    Args:
        proto: bytes, a serialized SentencePiece model whose first four
            pieces are `["[PAD]", "[UNK]", "[BOS]", "[EOS]"]`.

    Example:

    >>> tokenizer = SentencePieceTokenizer.train(["Ein Mädchen läuft."] * 20, 30)
    >>> tokenizer.decode(tokenizer.encode(["Ein Mädchen läuft."])[0])
    'Ein Mädchen läuft.'
    >>> dataset = dataset.map(tokenizer.tokenize)  # doctest: +SKIP
    """

    def __init__(self, proto):
        if not isinstance(proto, bytes):
            raise TypeError(
                f"proto must be the bytes of a SentencePiece model; received "
                f"{type(proto).__name__}."
            )
        try:
            processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        except (RuntimeError, OSError) as error:
            raise ValueError(f"not a SentencePiece model: {error}") from None
        vocabulary = [processor.id_to_piece(i) for i in range(processor.vocab_size())]
        if tuple(vocabulary[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(
                f"the SentencePiece model's first pieces must be {list(SPECIAL_TOKENS)}; "
                f"received {vocabulary[: len(SPECIAL_TOKENS)]}."
            )
        super().__init__(vocabulary)
        self._proto = proto
        self._processor = processor

    # --- construction and storage ------------------------------------------

    @classmethod
    def train(cls, sentences, vocabulary_size, model_type="unigram"):
        """Learn a SentencePiece model from training sentences, in memory.

        Args:
            sentences: iterable of str, the training sentences (of one
                language, or of both for a shared vocabulary).
            vocabulary_size: int > 4, the most pieces, reserved ones
                included; a small corpus gives fewer.
            model_type: "unigram" (Kudo, 2018) or "bpe" (Sennrich et al.,
                2016).

        Returns:
            A `SentencePieceTokenizer`.
        """
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {MODEL_TYPES}; received {model_type!r}.")
        sentences = training_sentences(sentences, vocabulary_size)
        model = io.BytesIO()
        # The trainer's random choices come from this generator.
        sentencepiece.set_random_generator_seed(0)
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
                vocab_size=vocabulary_size,
                model_type=model_type,
                **_TRAINER_SETTINGS,
            )
        except RuntimeError as error:
            # e.g. fewer pieces asked for than the corpus has characters.
            message = str(error).rpartition("] ")[2]
            raise ValueError(
                f"cannot train a SentencePiece model of {vocabulary_size} pieces: {message}"
            ) from None
        return cls(model.getvalue())

    @classmethod
    def load(cls, path):
        """Load a tokenizer saved with `save` (a SentencePiece `.model` file)."""
        with open(path, "rb") as file:
            proto = file.read()
        try:
            return cls(proto)
        except ValueError as error:
            raise ValueError(f"{os.fspath(path)}: {error}") from None

    def save(self, path):
        """Write the SentencePiece model to `path`."""
        with open(path, "wb") as file:
            file.write(self._proto)

    # --- vocabulary ----------------------------------------------------------

    @property
    def lowercase(self):
        """False: SentencePiece keeps case."""
        return False

    @property
    def proto(self):
        """The serialized SentencePiece model (bytes)."""
        return self._proto

    # --- text to ids and back ---------------------------------------------

    def _graph_layer(self):
        # tensorflow-text's SentencePiece model lives in a resource owned by
        # the kernel that made it: made eagerly, it would be destroyed the
        # next time TensorFlow clears its eager kernels (every
        # `tf.random.set_seed`, which `keras.utils.set_random_seed` calls), so
        # each traced graph makes keras-hub's layer, and so its own resource.
        # A SavedModel's restored functions share the resources of ops of the
        # same node name, so the name says which model it is.
        with tf.name_scope(f"sentencepiece_{hashlib.sha1(self._proto).hexdigest()[:12]}"):
            return keras_hub.tokenizers.SentencePieceTokenizer(proto=self._proto, dtype="int32")

    def _tokenize_graph(self, text):
        return self._graph_layer().tokenize(text)

    def decode(self, ids):
        """Text of one sequence of ids.

        Stops at the first `[EOS]`, drops `[PAD]` and `[BOS]`; an unknown
        character reads "[UNK]".

        Args:
            ids: a 1-D sequence of ints (list, NumPy array or tensor).

        Returns:
            A str.
        """
        return self._processor.decode(self.decoded_ids(ids))

    def _detokenize_graph(self, ids):
        return self._graph_layer().detokenize(kept_ids(ids))

    def _normalize_all(self, texts):
        # SentencePiece's own normalization (NFKC, white space), its space
        # marks made spaces again.
        return [self._processor.normalize(t).replace(SPACE_MARK, " ").strip() for t in texts]

    def __repr__(self):
        return f"SentencePieceTokenizer(vocabulary_size={self.vocabulary_size})"
