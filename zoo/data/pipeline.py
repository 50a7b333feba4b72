"""tf.data pipelines for translation: tokenized, length-bucketed, padded batches.

TensorFlow only by nature (`tf.data`); the batches it yields feed
`keras.Model.fit` on every Keras backend.

The sentences are tokenized once, up front, in batches (about half a second
for Multi30k's 29k pairs), and kept in the pipeline as ragged int32 rows;
each epoch shuffles them (seeded), groups sentences of similar length
(`tf.data.Dataset.bucket_by_sequence_length`), pads each batch to its own
longest row with `[PAD]` = 0, and prefetches.

Each element is `({"source": [B, S], "target_in": [B, T]}, target_out [B, T])`,
all int32, where for a target sentence with ids `y1 ... yn`:

    target_in  = [BOS] y1 ... yn        (what the decoder reads)
    target_out = y1 ... yn [EOS]        (what it must predict)

The source has neither BOS nor EOS.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import tensorflow as tf

from zoo.data import filtering
from zoo.recipes.contract import BOS_ID
from zoo.recipes.contract import EOS_ID
from zoo.recipes.contract import PAD_ID
from zoo.recipes.contract import UNK_ID

# The default buckets are this many tokens wide, up to the longest pair.
DEFAULT_BUCKET_WIDTH = 8

_CHUNK = 8192

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class EncodedPairs:
    """Tokenized sentence pairs, ready for `tf.data`.

    Attributes:
        source: int32 `tf.RaggedTensor` `[N, None]`, source ids.
        target: int32 `tf.RaggedTensor` `[N, None]`, target ids, without BOS
            or EOS.
        left_out: {reason: how many input pairs it left out}, for each of
            `zoo.data.filtering.REASONS` (a side with no tokens, too long,
            too uneven).
    """

    source: tf.RaggedTensor
    target: tf.RaggedTensor
    left_out: dict

    def __len__(self):
        return int(self.source.nrows())

    @property
    def dropped(self):
        """How many input pairs were left out, for any reason."""
        return sum(self.left_out.values())


def _tokenize_all(tokenizer, sentences):
    if not sentences:
        return tf.ragged.constant([], dtype=tf.int32, ragged_rank=1)
    chunks = [
        tokenizer.tokenize(tf.constant(sentences[i : i + _CHUNK], dtype=tf.string))
        for i in range(0, len(sentences), _CHUNK)
    ]
    return tf.concat(chunks, axis=0)


def _check_length(name, value):
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be None or an int >= 1; received {value!r}.")


def encode_pairs(
    pairs,
    source_tokenizer,
    target_tokenizer,
    max_source_length=None,
    max_target_length=None,
    max_length_ratio=None,
):
    """Tokenize sentence pairs and drop those the model should not learn from.

    Args:
        pairs: sequence of `(source, target)` str pairs.
        source_tokenizer, target_tokenizer: `TextTokenizer`s.
        max_source_length: optional int, the most source tokens.
        max_target_length: optional int, the most steps of `target_in` and
            `target_out`, that is target tokens + 1 (for BOS or EOS).
        max_length_ratio: optional number >= 1: drop a pair whose longer
            side has more than this many times the tokens of the shorter.

    Returns:
        An `EncodedPairs`. A pair is dropped when either side has no tokens
        (a blank sentence), is longer than a limit, or the sides' lengths
        are too uneven (`zoo.data.filtering`); the count is logged at INFO
        level, and `left_out` has it by reason.
    """
    _check_length("max_source_length", max_source_length)
    _check_length("max_target_length", max_target_length)
    filtering.check_ratio(max_length_ratio)
    pairs = list(pairs)
    source = _tokenize_all(source_tokenizer, [str(s) for s, _ in pairs])
    target = _tokenize_all(target_tokenizer, [str(t) for _, t in pairs])
    reasons = filtering.left_out_reasons(
        source.row_lengths().numpy(),
        target.row_lengths().numpy(),
        max_source_length,
        # The limit is on target_in, which has a BOS before the tokens.
        None if max_target_length is None else max_target_length - 1,
        max_length_ratio,
    )
    left_out = filtering.count_reasons(reasons)
    if any(left_out.values()):
        logger.info("encode_pairs: of %d pairs, left out %s.", len(pairs), left_out)
        keep = reasons == ""
        source = tf.ragged.boolean_mask(source, keep)
        target = tf.ragged.boolean_mask(target, keep)
    return EncodedPairs(source=source, target=target, left_out=left_out)


def default_boundaries(encoded, past_longest=False):
    """Every `DEFAULT_BUCKET_WIDTH` tokens up to the longest pair, or (for
    `pad_to_bucket_boundary`, where tf.data pads the last bucket to its upper
    boundary too) up to the first boundary past it."""
    longest = longest_pair(encoded)
    last = longest + DEFAULT_BUCKET_WIDTH if past_longest else longest
    return list(range(DEFAULT_BUCKET_WIDTH, last + 1, DEFAULT_BUCKET_WIDTH))


def bucket_batch_sizes(boundaries, longest, batch_size, batch_tokens):
    """The most pairs a batch of each bucket holds: `batch_size`, or with
    `batch_tokens`, as many as fit in that many padded tokens of the
    longer side (at least one).

    A bucket's batch is padded to at most its upper boundary minus 1 (to
    exactly that with `pad_to_bucket_boundary`), the open last bucket's to
    at most the longest pair: so the sizes are fixed per bucket, and tf.data
    keeps its few batch shapes.
    """
    if batch_tokens is None:
        return [batch_size] * (len(boundaries) + 1)
    widths = [boundary - 1 for boundary in boundaries] + [longest]
    return [max(1, batch_tokens // max(width, 1)) for width in widths]


def longest_pair(encoded):
    """The longest pair's length, `max(len(source), len(target_in))` (1
    for no pairs)."""
    if not len(encoded):
        return 1
    return int(
        max(
            encoded.source.row_lengths().numpy().max(),
            encoded.target.row_lengths().numpy().max() + 1,
        )
    )


def bucketed_batches(
    pairs, boundaries, batch_sizes, drop_remainder, pad_to_bucket_boundary, fill_batches=False
):
    """A `tf.data.Dataset` of `(source, target)` id rows (no BOS or EOS),
    made into padded batches of similar lengths: `({"source": [B, S],
    "target_in": [B, T]}, target_out [B, T])`, a pair of length `max(len(source),
    len(target_in))` in the bucket `[b_i, b_(i+1))` of `boundaries`, whose
    batches hold at most its entry of `batch_sizes`
    (`make_translation_dataset` says what the other arguments do).

    With `fill_batches` (and `pad_to_bucket_boundary`), each bucket's last,
    smaller batch is filled up to the bucket's batch size with rows that
    hold no target token (see `_filled`): every batch of a bucket then has
    one shape, in every epoch, where the last batches' sizes change from
    epoch to epoch with the shuffle, and a compiled step would compile each
    size again.
    """
    pairs = pairs.map(_add_bos_eos, num_parallel_calls=tf.data.AUTOTUNE)
    pairs = pairs.bucket_by_sequence_length(
        element_length_func=_pair_length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padding_values=(PAD_ID, PAD_ID, PAD_ID),
        drop_remainder=drop_remainder,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )
    if fill_batches and pad_to_bucket_boundary and not drop_remainder:
        pairs = pairs.map(
            functools.partial(_filled, boundaries=boundaries, batch_sizes=batch_sizes),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return pairs.map(
        lambda source, target_in, target_out: (
            {"source": source, "target_in": target_in},
            target_out,
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _filled(source, target_in, target_out, boundaries, batch_sizes):
    """A batch padded to its bucket's boundary, with rows added up to the
    bucket's batch size. An added row's target is [BOS] then padding, so
    that the loss, which counts non-pad target tokens only, and its gradient
    are those of the batch without it; its source is one [UNK], so that its
    attention has a key to attend to, as every real row's has."""
    length = tf.shape(source)[1]
    # Padded to `boundary - 1`: its bucket is the one of that boundary.
    bucket = tf.searchsorted(tf.constant(boundaries, tf.int32), [length + 1])[0]
    missing = tf.gather(tf.constant(batch_sizes, tf.int32), bucket) - tf.shape(source)[0]
    first_column = tf.one_hot(0, length, dtype=source.dtype)
    source_row = first_column * UNK_ID
    target_row = first_column * BOS_ID
    return (
        tf.concat([source, tf.tile(source_row[None], [missing, 1])], 0),
        tf.concat([target_in, tf.tile(target_row[None], [missing, 1])], 0),
        tf.concat([target_out, tf.fill([missing, length], tf.cast(PAD_ID, target_out.dtype))], 0),
    )


def _add_bos_eos(source, target):
    bos = tf.constant([BOS_ID], dtype=target.dtype)
    eos = tf.constant([EOS_ID], dtype=target.dtype)
    return source, tf.concat([bos, target], 0), tf.concat([target, eos], 0)


def _pair_length(source, target_in, target_out):
    del target_out  # as long as target_in
    return tf.maximum(tf.shape(source)[0], tf.shape(target_in)[0])


def make_translation_dataset(
    pairs,
    source_tokenizer,
    target_tokenizer,
    batch_size,
    shuffle=True,
    seed=0,
    max_source_length=None,
    max_target_length=None,
    bucket_boundaries=None,
    drop_remainder=False,
    epochs=None,
    pad_to_bucket_boundary=False,
    batch_tokens=None,
):
    """A `tf.data.Dataset` of padded, length-bucketed translation batches.

    Args:
        pairs: sequence of `(source, target)` str pairs (for example
            `ParallelCorpus.pairs` or `synthetic_corpus(...)`), or an
            `EncodedPairs` from `encode_pairs` (then the tokenizers and the
            length limits are not used again).
        source_tokenizer, target_tokenizer: `TextTokenizer`s.
        batch_size: int >= 1, the most pairs in a batch (a bucket's last
            batch of an epoch may have fewer unless `drop_remainder`).
        shuffle: bool, shuffle the pairs each epoch (before bucketing).
        seed: int, the shuffle seed: the same seed gives the same batches in
            the same order, epoch after epoch.
        max_source_length, max_target_length: optional ints; longer pairs
            are dropped (see `encode_pairs`, which logs the count at INFO
            level; `encode_pairs(...).dropped` gives it).
        bucket_boundaries: optional increasing list of ints: a pair of
            length `max(len(source), len(target_in))` goes into the bucket
            `[b_i, b_(i+1))`, and each batch holds one bucket. Default:
            every `DEFAULT_BUCKET_WIDTH` (8) tokens up to the longest pair.
            `[]` turns bucketing off (one bucket).
        drop_remainder: bool, drop each bucket's last, smaller batch.
        epochs: optional `range` of epoch numbers: the dataset then holds
            those epochs' batches back to back, each epoch in its own seeded
            order (see `epoch_batches`), for `fit(..., steps_per_epoch=...)`.
            None: one epoch, reshuffled at each iteration.
        pad_to_bucket_boundary: bool, pad the source and both targets of a
            batch to its bucket's upper boundary minus 1, instead of to the
            batch's longest row, so that the batches have a few fixed shapes:
            a compiled train step (XLA, `jit_compile=True`) compiles once per
            shape. The default boundaries then reach past the longest pair.
        batch_tokens: optional int >= 1: batch by tokens rather than by
            pairs, as fairseq's `--max-tokens` and OpenNMT's `batch_type
            tokens` do: each bucket's batch holds as many pairs as fit in
            `batch_tokens` padded tokens of its longer side (source or
            `target_in`), so a batch of short sentences holds more of them;
            `batch_size` is then not used. A pair longer than `batch_tokens`
            is a batch of its own.

    Returns:
        A `tf.data.Dataset` of `({"source": int32 [B, S], "target_in":
        int32 [B, T]}, target_out int32 [B, T])`, padded with 0 (`[PAD]`).

    Example:

    >>> pairs = synthetic_corpus(1000)
    >>> src = TextTokenizer.train([s for s, _ in pairs], 500)
    >>> tgt = TextTokenizer.train([t for _, t in pairs], 500)
    >>> dataset = make_translation_dataset(pairs, src, tgt, batch_size=32)
    >>> model.fit(dataset, epochs=10)  # doctest: +SKIP
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1; received {batch_size!r}.")
    _check_length("batch_tokens", batch_tokens)
    if batch_tokens is not None and drop_remainder:
        # Batches of several sizes need not split evenly over the devices.
        raise ValueError(
            "batch_tokens makes batches of several sizes, which drop_remainder's equal "
            "batches (--strategy data-parallel) can't split over devices; batch by batch_size"
        )
    if isinstance(pairs, EncodedPairs):
        if max_source_length is not None or max_target_length is not None:
            raise ValueError(
                "pairs is already encoded: pass max_source_length and "
                "max_target_length to encode_pairs instead."
            )
        encoded = pairs
    else:
        encoded = encode_pairs(
            pairs,
            source_tokenizer,
            target_tokenizer,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
        )
    if bucket_boundaries is None:
        bucket_boundaries = default_boundaries(encoded, past_longest=pad_to_bucket_boundary)
    bucket_boundaries = [int(b) for b in bucket_boundaries]
    if any(b < 1 for b in bucket_boundaries) or any(
        a >= b for a, b in zip(bucket_boundaries, bucket_boundaries[1:])
    ):
        raise ValueError(
            "bucket_boundaries must be increasing ints >= 1; "
            f"received {bucket_boundaries}."
        )

    batch_sizes = bucket_batch_sizes(
        bucket_boundaries, longest_pair(encoded), batch_size, batch_tokens
    )

    batch_epoch = functools.partial(
        bucketed_batches,
        boundaries=bucket_boundaries,
        batch_sizes=batch_sizes,
        drop_remainder=drop_remainder,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )

    rows = (encoded.source, encoded.target)
    # Bucketing hides the number of batches from tf.data, and Keras' progress
    # bar then shows "Unknown" for the first epoch. The number is the same in
    # every epoch (each length bucket holds the same sentences, only their
    # order changes), so count it once, on the in-memory data.
    batches = int(
        batch_epoch(tf.data.Dataset.from_tensor_slices(rows)).reduce(
            0, lambda count, _: count + 1
        )
    )
    dataset = epoch_batches(rows, batch_epoch, batches, shuffle, seed, epochs)
    return dataset.prefetch(tf.data.AUTOTUNE)


def epoch_batches(rows, batch_epoch, batches_per_epoch, shuffle, seed, epochs=None):
    """The batches of one epoch or of several, in a seeded order.

    Args:
        rows: tuple of tensors (dense or ragged) with one row per example.
        batch_epoch: function from a `tf.data.Dataset` of one epoch's rows,
            in order, to that epoch's batches.
        batches_per_epoch: int, how many batches `batch_epoch` makes of the
            rows (the same in every order).
        shuffle: bool, shuffle the rows of each epoch.
        seed: int, the shuffle seed.
        epochs: None for one epoch that `Dataset.shuffle` reshuffles at each
            iteration; or a `range` of epoch numbers, held back to back.
            Epoch e is then read in a stateless shuffle seeded with
            `(seed, e)`, which depends on nothing else: a resumed training
            rebuilds the very batches of the epoch it resumes (and can skip
            to a step inside it) without replaying the epochs before, which
            a reshuffling `Dataset.shuffle` can't (its k-th order is reached
            only by iterating it k times).

    Returns:
        A `tf.data.Dataset` of known cardinality.
    """
    if epochs is None:
        dataset = tf.data.Dataset.from_tensor_slices(rows)
        if shuffle:
            dataset = dataset.shuffle(
                max(_row_count(rows), 1), seed=seed, reshuffle_each_iteration=True
            )
        dataset = batch_epoch(dataset)
        epochs = range(1)
    else:
        size = _row_count(rows)

        def one_epoch(epoch):
            order = tf.range(size, dtype=tf.int64)
            if shuffle:
                order = tf.random.experimental.stateless_shuffle(
                    order, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
                )
            ordered = tuple(tf.gather(tensor, order) for tensor in rows)
            return batch_epoch(tf.data.Dataset.from_tensor_slices(ordered))

        numbers = tf.constant(list(epochs), dtype=tf.int64)
        dataset = tf.data.Dataset.from_tensor_slices(numbers).flat_map(one_epoch)
    return dataset.apply(
        tf.data.experimental.assert_cardinality(batches_per_epoch * len(epochs))
    )


def _row_count(rows):
    first = rows[0]
    return int(first.nrows()) if isinstance(first, tf.RaggedTensor) else int(first.shape[0])
