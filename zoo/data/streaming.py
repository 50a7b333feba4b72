"""The training split as a stream: tokenized, filtered, shuffled in bounded
windows and bucketed inside `tf.data`, one epoch at a time.

TensorFlow only by nature (`tf.data`). What is in memory is independent of
the corpus's size: a shuffle window of `shuffle_buffer` pairs, the batches
being filled, and the sample the vocabularies learned from.

An epoch is one pass over the training pairs, in file order:

1. the lines of each shard pair (`tf.data.TextLineDataset`, gzip where
   the name ends in .gz) up to the training split's end
   (`zoo.data.corpus_scan` found it), in blocks of 1,024;
2. each block stripped and tokenized with the run's tokenizers;
3. filtered as `zoo.data.filtering` filters (a blank side, too long, too
   uneven);
4. shuffled window by window: the i-th window of `shuffle_buffer` lines
   (rounded up to whole blocks) in a stateless shuffle seeded with
   `(seed, epoch)` (folded with i past the first window). So epoch e's order depends on nothing but the seed
   and e: a resumed run rebuilds the epoch it stopped in and skips the
   batches it did, and ends with the weights of an uninterrupted run. A
   split no larger than one window is shuffled exactly as
   `zoo.data.pipeline.epoch_batches` shuffles it in memory, so such a
   corpus (Multi30k) trains on the same batches as when it was read whole;
5. bucketed by length and padded (`zoo.data.pipeline.bucketed_batches`).

How many batches an epoch makes is needed before training (the learning
rate's schedule spans them), and a pass over a large corpus to count them
would cost as much as an epoch of reading. The count, the default bucket
boundaries and the filter's counts come from the vocabulary's sample
instead: exact when the sample is the whole split (`vocabulary_sample` is
at least the split's pairs), else scaled from it and flagged as estimated.
Training does not depend on the count being exact: each epoch is a `fit`
of its own that ends where the stream ends.

Under "multi-worker", every worker reads the stream and keeps its share of
each global batch (tf.distribute's DATA sharding): the workers must take
the same number of steps, and shards read by separate workers would bucket
into different numbers of batches.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import tensorflow as tf

from zoo.data import pipeline

# Sentences tokenized per call inside the stream.
TOKENIZE_BATCH = 1024
# Dropped where it starts a line, as the corpus pass drops it.
BYTE_ORDER_MARK = "\ufeff"


@dataclasses.dataclass(frozen=True)
class EpochSize:
    """How big an epoch of the stream is.

    Attributes:
        batches: int, the batches of an epoch.
        target_tokens: int, the target tokens (EOS included) they hold.
        left_out: {reason: pairs} the filter leaves out, for each of
            `zoo.data.filtering.REASONS`.
        estimated: bool, whether the figures are scaled from a sample
            rather than counted on the whole split.
    """

    batches: int
    target_tokens: int
    left_out: dict
    estimated: bool


def corpus_pairs(files, train_lines):
    """A `tf.data.Dataset` of the `(source, target)` string lines of the
    shard pairs `files` (`zoo.data.corpus_scan.corpus_files`), up to the
    end of the training split (`CorpusScan.train_lines`); blank pairs are
    left in, for the stream's filter."""
    shards = [_shard_pairs(source, target) for source, target in files]
    pairs = functools.reduce(lambda first, second: first.concatenate(second), shards)
    return pairs.take(train_lines)


def memory_pairs(pairs):
    """`corpus_pairs` of pairs in memory (a list of `(source, target)` str)."""
    sources = tf.constant([str(source) for source, _ in pairs], tf.string, shape=[len(pairs)])
    targets = tf.constant([str(target) for _, target in pairs], tf.string, shape=[len(pairs)])
    return tf.data.Dataset.from_tensor_slices((sources, targets))


def _lines(path):
    return tf.data.TextLineDataset(path, compression_type="GZIP" if path.endswith(".gz") else "")


def _shard_pairs(source_path, target_path):
    if target_path is None:
        # A tab-separated file: the scan checked that every line that is not
        # blank has both columns.
        def columns(line):
            parts = tf.strings.split(line, "\t")
            padded = tf.concat([parts, tf.constant(["", ""])], 0)
            return padded[0], padded[1]

        return _lines(source_path).map(columns)
    return tf.data.Dataset.zip((_lines(source_path), _lines(target_path)))


def _stripped(text):
    """As the scan strips a line: a byte order mark that starts it, then
    ASCII white space."""
    return tf.strings.strip(tf.strings.regex_replace(text, f"^{BYTE_ORDER_MARK}", ""))


def keeps_pair(source_length, target_length, max_source_length, max_target_length, ratio):
    """`zoo.data.filtering.left_out_reasons(...) == ""` for one pair, in
    TensorFlow ops for the stream (a test holds the two equal)."""
    source = tf.cast(source_length, tf.int64)
    target = tf.cast(target_length, tf.int64)
    keep = tf.logical_and(source > 0, target > 0)
    if max_source_length is not None:
        keep = tf.logical_and(keep, source <= max_source_length)
    if max_target_length is not None:
        keep = tf.logical_and(keep, target <= max_target_length)
    if ratio is not None:
        longer = tf.cast(tf.maximum(source, target), tf.float64)
        shorter = tf.cast(tf.minimum(source, target), tf.float64)
        keep = tf.logical_and(keep, longer <= ratio * shorter)
    return keep


class TrainingStream:
    """A training split's batches, epoch by epoch, from a stream of pairs.

    Args:
        pairs: function of no arguments returning a `tf.data.Dataset` of
            `(source, target)` string pairs, the split in order
            (`corpus_pairs` or `memory_pairs`).
        train_pairs: int, how many pairs it holds.
        sample: list of `(source, target)` str, a seeded sample of them
            (the whole split when it is no larger than the sample).
        source_tokenizer, target_tokenizer: the run's `TextTokenizer`s.
        batch_size, batch_tokens, drop_remainder, pad_to_bucket_boundary:
            as for `zoo.data.make_translation_dataset`; with
            `pad_to_bucket_boundary`, each bucket's last batch is also
            filled up to the bucket's size (`pipeline.bucketed_batches`'
            `fill_batches`), so that every epoch has the same few shapes.
        max_source_length, max_target_length, max_length_ratio: as for
            `zoo.data.encode_pairs`.
        shuffle: bool, shuffle each epoch.
        shuffle_buffer: int >= 1, the pairs of a shuffle window.
        seed: int, the shuffle's seed.
    """

    def __init__(
        self,
        pairs,
        train_pairs,
        sample,
        source_tokenizer,
        target_tokenizer,
        *,
        batch_size,
        shuffle_buffer,
        seed=0,
        shuffle=True,
        batch_tokens=None,
        max_source_length=None,
        max_target_length=None,
        max_length_ratio=None,
        drop_remainder=False,
        pad_to_bucket_boundary=False,
    ):
        if not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
            raise ValueError(f"shuffle_buffer must be an int >= 1; received {shuffle_buffer!r}.")
        self._pairs = pairs
        self._tokenizers = (source_tokenizer, target_tokenizer)
        self._limits = (
            max_source_length,
            # The limit is on target_in, which has a BOS before the tokens.
            None if max_target_length is None else max_target_length - 1,
            max_length_ratio,
        )
        self._shuffle = shuffle
        self._shuffle_buffer = shuffle_buffer
        self._seed = seed
        self._drop_remainder = drop_remainder
        self._pad = pad_to_bucket_boundary
        encoded = pipeline.encode_pairs(
            sample,
            source_tokenizer,
            target_tokenizer,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
            max_length_ratio=max_length_ratio,
        )
        self.boundaries = pipeline.default_boundaries(encoded, past_longest=pad_to_bucket_boundary)
        self.batch_sizes = pipeline.bucket_batch_sizes(
            self.boundaries, pipeline.longest_pair(encoded), batch_size, batch_tokens
        )
        self.size = _epoch_size(
            encoded, train_pairs, len(sample), self.boundaries, self.batch_sizes, drop_remainder
        )

    def epoch(self, epoch):
        """The batches of epoch `epoch` (an int): a `tf.data.Dataset` of
        `({"source": [B, S], "target_in": [B, T]}, target_out [B, T])`."""
        # Every step up to the shuffle works on blocks of lines, vectorized:
        # a tf.data op an element costs more than tokenizing it.
        block = min(TOKENIZE_BATCH, self._shuffle_buffer)
        rows = self._pairs().batch(block).map(self._encoded, num_parallel_calls=tf.data.AUTOTUNE)
        if self._shuffle:
            blocks = -(-self._shuffle_buffer // block)
            rows = _window_shuffled(rows, blocks, self._seed, epoch)
        else:
            rows = rows.unbatch()
        batches = pipeline.bucketed_batches(
            rows, self.boundaries, self.batch_sizes, self._drop_remainder, self._pad,
            fill_batches=self._pad,
        )
        if not self.size.estimated:
            batches = batches.apply(tf.data.experimental.assert_cardinality(self.size.batches))
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return batches.with_options(options).prefetch(tf.data.AUTOTUNE)

    def epochs(self, epochs=None):
        """The batches of the epochs `epochs` (a `range`) back to back; None:
        epoch 0. The `TaskData.train_data` of a streamed split."""
        numbers = range(1) if epochs is None else epochs
        datasets = [self.epoch(number) for number in numbers]
        return functools.reduce(lambda first, second: first.concatenate(second), datasets)

    def _encoded(self, source, target):
        """A block of lines tokenized, the pairs the filter refuses left out:
        `(source ids, target ids)`, ragged `[pairs, None]`."""
        source_tokenizer, target_tokenizer = self._tokenizers
        source = source_tokenizer.tokenize(_stripped(source))
        target = target_tokenizer.tokenize(_stripped(target))
        source_lengths, target_lengths = source.row_lengths(), target.row_lengths()
        # A blank line has no tokens: the filter's "blank" leaves it out.
        keep = keeps_pair(source_lengths, target_lengths, *self._limits)
        if self._pad:
            # A pair longer than the sample's longest has no bucket whose
            # boundary it can be padded to (none when the sample is whole).
            length = tf.maximum(source_lengths, target_lengths + 1)
            keep = tf.logical_and(keep, length < self.boundaries[-1])
        return tf.ragged.boolean_mask(source, keep), tf.ragged.boolean_mask(target, keep)


def _window_shuffled(blocks, window, seed, epoch):
    """The rows of `blocks` (ragged blocks of rows) shuffled `window` blocks
    at a time (see the module docstring, step 4)."""
    first_seed = tf.constant([seed, epoch], tf.int64)

    def shuffled(index, rows):
        source, target = (side.merge_dims(0, 1) for side in rows)
        window_seed = tf.where(
            index == 0,
            first_seed,
            tf.random.experimental.stateless_fold_in(first_seed, index),
        )
        order = tf.random.experimental.stateless_shuffle(
            tf.range(source.nrows(out_type=tf.int64), dtype=tf.int64), seed=window_seed
        )
        return tf.data.Dataset.from_tensor_slices(
            (tf.gather(source, order), tf.gather(target, order))
        )

    return blocks.ragged_batch(window).enumerate().flat_map(shuffled)


def _epoch_size(encoded, train_pairs, sampled, boundaries, batch_sizes, drop_remainder):
    """The `EpochSize` of a split of `train_pairs` pairs, from the encoded
    sample of `sampled` of them: per bucket, its pairs (scaled to the
    split) make ceil (or floor, `drop_remainder`) pairs / batch size
    batches."""
    scale = train_pairs / sampled if sampled else 0.0
    source = encoded.source.row_lengths().numpy()
    target = encoded.target.row_lengths().numpy()
    lengths = np.maximum(source, target + 1)
    # bucket_by_sequence_length puts a length L in the bucket i with
    # boundaries[i - 1] <= L < boundaries[i].
    buckets = np.searchsorted(np.asarray(boundaries, np.int64), lengths, side="right")
    batches = 0
    target_tokens = 0.0
    for bucket, batch_size in enumerate(batch_sizes):
        in_bucket = buckets == bucket
        pairs = np.count_nonzero(in_bucket) * scale
        if scale != 1.0:
            pairs = round(pairs)
        pairs = int(pairs)
        full, rest = divmod(pairs, batch_size)
        batches += full + (0 if drop_remainder or not rest else 1)
        batched = pairs - (rest if drop_remainder else 0)
        tokens = np.sum(target[in_bucket] + 1) * scale
        target_tokens += tokens * (batched / pairs if pairs else 0.0)
    left_out = {
        reason: int(round(count * scale)) for reason, count in encoded.left_out.items()
    }
    return EpochSize(batches, int(round(target_tokens)), left_out, sampled != train_pairs)
