"""The training split as a stream: every pair once an epoch, from shards,
in a seeded order; the filter as `zoo.data.filtering`'s; an epoch's size."""

import collections
import functools
import gzip
import itertools

import numpy as np
import pytest
import tensorflow as tf

from zoo import data
from zoo.data import corpus_scan
from zoo.data import filtering
from zoo.data import streaming

pytestmark = pytest.mark.tensorflow_only  # tf.data

PAIRS = data.synthetic_corpus(90, seed=5)


@pytest.fixture(scope="module")
def tokenizers():
    return (
        data.train_tokenizer("wordpiece", [s for s, _ in PAIRS], 80),
        data.train_tokenizer("wordpiece", [t for _, t in PAIRS], 80),
    )


@pytest.fixture
def two_shards(tmp_path):
    for shard, part in enumerate((PAIRS[:50], PAIRS[50:])):
        for side, name in ((0, "src"), (1, "tgt")):
            text = "".join(f"{pair[side]}\n" for pair in part)
            (tmp_path / f"train.{shard}.{name}.gz").write_bytes(gzip.compress(text.encode()))
    return corpus_scan.scan_corpus(
        f"{tmp_path}/train.*.src.gz,{tmp_path}/train.*.tgt.gz", valid_size=10, sample_size=1000
    )


def stream(scan, tokenizers, sample=None, **options):
    return streaming.TrainingStream(
        functools.partial(streaming.corpus_pairs, scan.files, scan.train_lines),
        scan.train_pairs,
        scan.sample if sample is None else sample,
        *tokenizers,
        **{"batch_size": 8, "shuffle_buffer": 1000, "seed": 0, **options},
    )


def pairs_of(batches):
    """The (source ids, target ids) pairs of batches, in order."""
    pairs = []
    for inputs, target_out in batches.as_numpy_iterator():
        for source, target in zip(inputs["source"], target_out):
            source, target = source[source != 0], target[target != 0]
            pairs.append((tuple(source), tuple(target[:-1])))  # without [EOS]
    return pairs


def encoded(pairs, tokenizers):
    source, target = tokenizers
    return list(zip(map(tuple, source.encode([s for s, _ in pairs])),
                    map(tuple, target.encode([t for _, t in pairs]))))


@pytest.mark.parametrize("shuffle_buffer", [1000, 7])
def test_two_shards_stream_every_pair_once_an_epoch(two_shards, tokenizers, shuffle_buffer):
    expected = collections.Counter(encoded(PAIRS[: two_shards.train_pairs], tokenizers))
    assert two_shards.train_pairs == 81  # at most a tenth, 9, held out
    training = stream(two_shards, tokenizers, shuffle_buffer=shuffle_buffer)
    epochs = [pairs_of(training.epoch(epoch)) for epoch in (0, 1)]
    for seen in epochs:
        assert collections.Counter(seen) == expected
    assert epochs[0] != epochs[1], "each epoch has an order of its own"
    assert pairs_of(training.epoch(1)) == epochs[1], "an epoch's order is the seed's"
    batches = sum(1 for _ in training.epoch(0))
    assert training.size.batches == batches and not training.size.estimated
    targets = sum(int(np.count_nonzero(y)) for _, y in training.epoch(0).as_numpy_iterator())
    assert training.size.target_tokens == targets


def test_windows_keep_pairs_near_their_place_in_the_stream(two_shards, tokenizers):
    # A window shuffles only its own pairs: the first 7 of the stream come
    # out among the first batches' pairs, never after the window that follows.
    training = stream(two_shards, tokenizers, shuffle_buffer=7, batch_size=1)
    first_window = set(encoded(PAIRS[:7], tokenizers))
    assert set(pairs_of(training.epoch(0))[:7]) == first_window


def test_a_split_that_fits_one_window_is_shuffled_as_in_memory(two_shards, tokenizers):
    source, target = tokenizers
    training = stream(two_shards, tokenizers, seed=3)
    train = PAIRS[: two_shards.train_pairs]
    in_memory = data.make_translation_dataset(
        train, source, target, batch_size=8, seed=3, epochs=range(2, 3)
    )
    assert pairs_of(training.epoch(2)) == pairs_of(in_memory)


def test_an_epoch_size_from_a_smaller_sample_is_an_estimate_near_the_count(
    two_shards, tokenizers
):
    sample = two_shards.sample[::2]
    training = stream(two_shards, tokenizers, sample=sample, batch_size=4)
    counted = sum(1 for _ in training.epoch(0))
    assert training.size.estimated
    assert abs(training.size.batches - counted) <= 0.2 * counted


def test_the_stream_filter_is_the_filtering_module(two_shards):
    lengths = np.array(list(itertools.product(range(0, 12), repeat=2)))
    for limits in [(None, None, None), (9, 6, None), (None, None, 2.5), (8, 10, 3)]:
        expected = filtering.left_out_reasons(lengths[:, 0], lengths[:, 1], *limits) == ""
        kept = streaming.keeps_pair(
            tf.constant(lengths[:, 0]), tf.constant(lengths[:, 1]), *limits
        ).numpy()
        np.testing.assert_array_equal(kept, expected, str(limits))


def test_fixed_shapes_give_each_bucket_one_shape_in_every_epoch(two_shards, tokenizers):
    # What a compiled train step gets: padded to the bucket's boundary, and
    # the bucket's last batch filled with rows that hold no target token.
    expected = collections.Counter(encoded(PAIRS[: two_shards.train_pairs], tokenizers))
    training = stream(two_shards, tokenizers, pad_to_bucket_boundary=True)
    shapes = collections.defaultdict(set)
    for epoch in (0, 1):
        real = []
        for inputs, target_out in training.epoch(epoch).as_numpy_iterator():
            length = inputs["source"].shape[1]
            shapes[length].add((inputs["source"].shape, inputs["target_in"].shape, target_out.shape))
            assert length + 1 in training.boundaries
            holds_tokens = (target_out != 0).any(axis=1)
            # The filler rows come last: [UNK] a source, [BOS] a target.
            assert list(holds_tokens) == sorted(holds_tokens, reverse=True)
            np.testing.assert_array_equal(inputs["source"][~holds_tokens, 0], 1)
            np.testing.assert_array_equal(inputs["target_in"][~holds_tokens, 0], 2)
            np.testing.assert_array_equal(inputs["target_in"][~holds_tokens, 1:], 0)
            real += [
                (tuple(s[s != 0]), tuple(t[t != 0][:-1]))
                for s, t in zip(inputs["source"][holds_tokens], target_out[holds_tokens])
            ]
        assert collections.Counter(real) == expected
    assert all(len(seen) == 1 for seen in shapes.values()), shapes
    assert all(next(iter(seen))[0][0] == 8 for seen in shapes.values())
