"""`zoo bench`: speed measured side by side, reported as ratios.

    zoo bench [layers|decode|train|export|all] [--backend B] [--size S]
              [--repeats N] [--warmup N] [--min-time SECONDS] [--out results.json]
    zoo bench decode --run DIR [--data SOURCE,REFERENCE] [--limit N] [--beam K]
              [--length-penalty A] [--out result.json]

Every case is a pair, ours and a reference (Keras' own layer, or the other of
two choices of ours), timed in the same run: after `--warmup` untimed calls,
the two are called in turn, at least `--repeats` times each (a quick case
until its calls fill `--min-time` seconds), so that the drift of a shared,
noisy machine falls on both alike. A case reports the median time and the
interquartile range of each side and the ratio of the medians (ours /
reference: below 1 means ours is faster). Absolute times are only context;
the ratios are the claims.

Every call's outputs are converted to numpy before the clock stops, so the
asynchronous backends (JAX dispatch, TensorFlow's eager executor) are timed
to completion. Functions are compiled where the backend can (`tf.function`,
`jax.jit`; torch runs eagerly), as `zoo.inference.search_choice.compile_inference` does
for decoding, and the table says which.

The suites, one module each:
- `layers`: forward and forward+backward at a few sizes: our
  MultiHeadAttention against `keras.layers.MultiHeadAttention`,
  LuongAttention(dot) against `keras.layers.Attention`, LocalAttention
  against global LuongAttention with the same score (the price of the
  window), AdditiveAttention alone (no Keras layer computes it).
- `decoding` (`zoo bench decode`): AdditiveAttention decoding steps with the
  keys projected once against projected at every step, in one compiled loop
  and one compiled step per call; beam search against greedy search per
  sentence on rnnsearch_small, with greedy search over as many copies of
  each sentence as the beam is wide as the floor of a batched beam; one
  MultiHeadAttention decoding step with the key/value cache against
  recomputing the whole prefix, at a few decoded lengths. With `--run DIR`
  (`trained_decoding`) it times a trained run instead: greedy, beam K with
  the exact stopping bound and beam K with early stopping over a test set,
  each with its wall time, sentences/s, steps run and BLEU.
- `training` (`zoo bench train`): `train_on_batch` of each translation recipe
  (and of captioning when its preset exists) in target tokens (images) per
  second; on TensorFlow with XLA (`jit_compile=True`) against without, what
  one more batch shape costs each (XLA compiles once per shape) against how
  many steps the preset trains per shape, and whether the preset's default
  `jit_compile` is the faster choice over its training.
- `export`: per-sentence latency of the SavedModel and onnxruntime serving
  paths against the Keras Python API (TensorFlow only).

The results (JSON with `--out`, see `report`) record the backend, the
library versions and the machine with the numbers, and the command that
produced them.

Importing this package imports no Keras, so that the `zoo` parser stays quick.
"""

from zoo.bench.command import BACKENDS
from zoo.bench.command import SUITES
from zoo.bench.command import add_parser
from zoo.bench.command import command
from zoo.bench.command import main
from zoo.bench.command import run

__all__ = ["BACKENDS", "SUITES", "add_parser", "command", "main", "run"]
