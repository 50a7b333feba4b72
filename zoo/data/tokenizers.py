"""The tokenizers a run's vocabularies can be, by name and by file.

TensorFlow only by nature (both tokenizers run in tf.data). The names and
file suffixes are `zoo.runs.TOKENIZERS` and `zoo.runs.VOCABULARY_SUFFIXES`:
"wordpiece" (`TextTokenizer`, a `.vocab` file) and "sentencepiece"
(`SentencePieceTokenizer`, a `.model` file).
"""

from pathlib import Path

from zoo import runs
from zoo.data.sentencepiece_tokenizer import SentencePieceTokenizer
from zoo.data.wordpiece_tokenizer import TextTokenizer

TOKENIZER_CLASSES = {"wordpiece": TextTokenizer, "sentencepiece": SentencePieceTokenizer}


def train_tokenizer(kind, sentences, vocabulary_size):
    """A tokenizer of `kind` ("wordpiece" or "sentencepiece") learned from
    `sentences` (a list of str), with at most `vocabulary_size` tokens."""
    if kind not in TOKENIZER_CLASSES:
        raise ValueError(f"tokenizer must be one of {runs.TOKENIZERS}; received {kind!r}.")
    return TOKENIZER_CLASSES[kind].train(sentences, vocabulary_size)


def load_tokenizer(path):
    """The tokenizer saved at `path`, its kind read from the file's suffix."""
    path = Path(path)
    for kind, suffix in runs.VOCABULARY_SUFFIXES.items():
        if path.suffix == suffix:
            return TOKENIZER_CLASSES[kind].load(path)
    raise ValueError(
        f"{path}: not a vocabulary file (expected a name ending in "
        f"{' or '.join(runs.VOCABULARY_SUFFIXES.values())})."
    )
