"""Translation data: corpora, tokenizers and tf.data pipelines.

- `zoo.data.synthetic`: an embedded synthetic parallel corpus with
  reordering and long-distance agreement (pure Python).
- `zoo.data.readers`: readers for aligned text files (WMT, Moses, Multi30k)
  and tab-separated pairs (Tatoeba, Anki), with one-line errors (pure
  Python).
- `zoo.data.wordpiece_tokenizer`: WordPiece tokenization with keras-nlp (TensorFlow).
- `zoo.data.sentencepiece_tokenizer`: SentencePiece tokenization that keeps
  case, trained with `sentencepiece`, run with keras-hub (TensorFlow).
- `zoo.data.tokenizers`: a tokenizer by name, or from its file
  (`train_tokenizer`, `load_tokenizer`).
- `zoo.data.corpus_scan`: the one pass over a training corpus's files
  (shards and globs too) that checks, counts, holds out the validation
  pairs and samples the rest, keeping nothing else (pure Python).
- `zoo.data.streaming`: the training split as a `tf.data` stream,
  tokenized, filtered and shuffled in seeded windows (TensorFlow).
- `zoo.data.pipeline`: padded, length-bucketed `tf.data` batches
  (TensorFlow).
- `zoo.data.filtering`: which training pairs are left out (a blank side,
  too long, too uneven) and the counts a run reports (NumPy).
- `zoo.data.sampling`: the seeded, bounded sample of the training pairs the
  vocabularies are learned from (pure Python).
- `zoo.data.captions`: an embedded synthetic image-captioning set of
  coloured shapes (Python and NumPy).
- `zoo.data.caption_readers`: readers for Flickr8k/30k and COCO captions
  (pure Python).
- `zoo.data.caption_pipeline`: `tf.data` batches of images and captions
  (TensorFlow).

The TensorFlow names are imported on first use, so `from zoo.data import
synthetic_corpus` does not load TensorFlow.

Example:

>>> from zoo import data
>>> pairs = data.synthetic_splits(10000, 500, 500)
>>> sources = [s for s, _ in pairs["train"]]
>>> targets = [t for _, t in pairs["train"]]
>>> source_tokenizer = data.TextTokenizer.train(sources, 1000)
>>> target_tokenizer = data.TextTokenizer.train(targets, 1000)
>>> train = data.make_translation_dataset(
...     pairs["train"], source_tokenizer, target_tokenizer, batch_size=64
... )
"""

import importlib

from zoo.data.caption_readers import CaptionCorpus
from zoo.data.caption_readers import CaptionCorpusError
from zoo.data.caption_readers import CaptionImage
from zoo.data.caption_readers import ImageError
from zoo.data.caption_readers import read_captions
from zoo.data.caption_readers import read_coco
from zoo.data.caption_readers import read_flickr
from zoo.data.captions import COLOURS
from zoo.data.captions import SHAPES
from zoo.data.captions import SIZES
from zoo.data.captions import CaptionExample
from zoo.data.captions import SceneObject
from zoo.data.captions import synthetic_caption_splits
from zoo.data.captions import synthetic_captions
from zoo.data.readers import CorpusError
from zoo.data.readers import ParallelCorpus
from zoo.data.readers import read_corpus
from zoo.data.readers import read_parallel_text
from zoo.data.readers import read_tsv
from zoo.data.synthetic import TARGET_LEXICON
from zoo.data.synthetic import TargetLexicon
from zoo.data.synthetic import synthetic_corpus
from zoo.data.synthetic import synthetic_splits

# Names from the TensorFlow modules, loaded on first access (PEP 562).
_LAZY = {
    "BOS_ID": "zoo.recipes.contract",
    "EOS_ID": "zoo.recipes.contract",
    "PAD_ID": "zoo.recipes.contract",
    "UNK_ID": "zoo.recipes.contract",
    "RESERVED_TOKENS": "zoo.data.wordpiece_tokenizer",
    "TextTokenizer": "zoo.data.wordpiece_tokenizer",
    "SentencePieceTokenizer": "zoo.data.sentencepiece_tokenizer",
    "train_tokenizer": "zoo.data.tokenizers",
    "load_tokenizer": "zoo.data.tokenizers",
    "EncodedPairs": "zoo.data.pipeline",
    "encode_pairs": "zoo.data.pipeline",
    "make_translation_dataset": "zoo.data.pipeline",
    "find_unreadable_images": "zoo.data.caption_pipeline",
    "load_image": "zoo.data.caption_pipeline",
    "make_caption_dataset": "zoo.data.caption_pipeline",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo.data' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "CorpusError",
    "ParallelCorpus",
    "read_corpus",
    "read_parallel_text",
    "read_tsv",
    "TARGET_LEXICON",
    "TargetLexicon",
    "synthetic_corpus",
    "synthetic_splits",
    "CaptionCorpus",
    "CaptionCorpusError",
    "CaptionImage",
    "ImageError",
    "read_captions",
    "read_coco",
    "read_flickr",
    "COLOURS",
    "SHAPES",
    "SIZES",
    "CaptionExample",
    "SceneObject",
    "synthetic_caption_splits",
    "synthetic_captions",
    *_LAZY,
]
