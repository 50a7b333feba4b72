"""One pass over a training corpus's files before training streams them:
its checks, its counts, its validation hold-out and its vocabulary sample.

Pure Python (standard library only). Training reads the corpus as a stream
(`zoo.data.streaming`), so nothing here keeps the corpus: the pass holds
only the held-out validation pairs and a seeded sample of the training
pairs (`zoo.data.sampling`), both bounded by settings, not by the corpus.

A corpus is named as `zoo.data.readers.read_corpus` names it, and each path
may be a glob of shards (`"train.*.en.gz,train.*.de.gz"`): the shards of a
side are read in sorted order, and the i-th source shard is aligned with
the i-th target shard.

The pass raises `CorpusError` with the file and line of the first line
that is not UTF-8, of a tab-separated line without its columns, or of two
aligned shards whose line counts differ; so a broken line deep in a corpus
stops `zoo train` before anything is written, not hours into training.

A pair is blank when a side is empty once ASCII white space is stripped:
the same test as the stream's (`tf.strings.strip`), so that both count the
same pairs.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import itertools
import gzip
import os
import random
import zlib

from zoo.data import readers
from zoo.data.readers import CorpusError
from zoo.data.sampling import reservoir_sample

# What `tf.strings.strip` strips, so that the pass and the stream agree on
# which pairs are blank.
ASCII_WHITESPACE = " \t\n\r\f\v"
BYTE_ORDER_MARK = "\ufeff"


@dataclasses.dataclass
class CorpusScan:
    """What the pass over a corpus found.

    Attributes:
        files: list of `(source_path, target_path)` shard pairs, in reading
            order; `target_path` is None for a tab-separated file.
        pairs_read: int, the corpus's lines (pairs), blank ones included.
        blank_lines: int, the pairs with a blank side, which are skipped.
        train_pairs: int, the training split's pairs: the first this many
            pairs that are not blank.
        valid: list of `(source, target)` str pairs, the held-out
            validation split (`zoo.tasks.base.hold_out_validation`'s rule).
        sample: list of `(source, target)`: at most `sample_size` training
            pairs, drawn with the seed, in corpus order; all of them when
            the split is no larger.
    """

    files: list
    pairs_read: int
    blank_lines: int
    train_pairs: int
    valid: list
    sample: list

    @property
    def sample_is_whole(self):
        """Whether `sample` is the whole training split (then what is
        measured on it is exact, not an estimate)."""
        return len(self.sample) == self.train_pairs


def corpus_files(spec):
    """The shard pairs of a corpus spec: a list of `(source, target)` paths
    (`target` None for a tab-separated file), each glob expanded in sorted
    order.

    Raises:
        CorpusError: a malformed spec, a glob that matches no file, a
            missing file, or sides with different numbers of shards.
    """
    sides = [_expand(os.fspath(path)) for path in readers.corpus_paths(spec)]
    if len(sides) == 1:
        return [(path, None) for path in sides[0]]
    sources, targets = sides
    if len(sources) != len(targets):
        raise CorpusError(
            f"{len(sources)} source shards but {len(targets)} target shards; each "
            "source shard needs the target shard of its lines"
        )
    return list(zip(sources, targets))


def _expand(pattern):
    if not glob.has_magic(pattern):
        readers.check_corpus_file(pattern)
        return [pattern]
    paths = sorted(path for path in glob.glob(pattern) if os.path.isfile(path))
    if not paths:
        raise CorpusError(f"{pattern}: no file matches.")
    return paths


def scan_corpus(spec, *, valid_size, train_size=None, sample_size, seed=0):
    """Reads a corpus once: checks it, counts it, holds out its validation
    pairs and samples its training pairs.

    Args:
        spec: a corpus spec (`corpus_files`).
        valid_size: int, the validation pairs held out: the last ones (at
            most a tenth of the pairs), or with `train_size` those after
            the first `train_size`, as `hold_out_validation` holds them out
            of a corpus in memory.
        train_size: optional int, the most training pairs.
        sample_size: int >= 1, the most training pairs sampled.
        seed: int, the sample's seed.

    Returns:
        A `CorpusScan`.

    Raises:
        CorpusError: see `corpus_files`; also a file that can't be read or
            is empty, a line that is not UTF-8, a tab-separated line with
            too few columns, or aligned shards of different lengths.
    """
    files = corpus_files(spec)
    tail = collections.deque(maxlen=max(valid_size, 1))
    after_train = []  # the pairs after the first train_size, when it is set
    positions = _positions(_pairs(files), tail, after_train, train_size, valid_size)
    counts = {"read": 0, "blank": 0}
    # The validation pairs are known only at the end: the reservoir holds
    # room for them, and what is left of it is cut to the sample's size.
    sampled = reservoir_sample(
        _counted(positions, counts, train_size), sample_size + valid_size, seed=seed
    )
    kept = counts["read"] - counts["blank"]
    valid_count = min(valid_size, kept // 10)
    if train_size and kept >= train_size + valid_count:
        train_pairs, valid = train_size, after_train[:valid_count]
    else:
        train_pairs = kept - valid_count
        valid = list(tail)[len(tail) - valid_count :] if valid_count else []
    sample = [pair for position, pair in sampled if position < train_pairs]
    if len(sample) > sample_size:
        kept = random.Random(seed).sample(range(len(sample)), sample_size)
        sample = [sample[index] for index in sorted(kept)]
    return CorpusScan(files, counts["read"], counts["blank"], train_pairs, valid, sample)


def _counted(positions, counts, train_size):
    """The `(position, pair)` items a sample may draw: the pairs before
    `train_size` (all with none), counting every pair read."""
    for position, pair in positions:
        counts["read"] += 1
        if pair is None:
            counts["blank"] += 1
        elif train_size is None or position < train_size:
            yield position, pair


def _positions(pairs, tail, after_train, train_size, valid_size):
    """`(position among the pairs that are not blank, pair)` of every pair,
    `pair` None for a blank one; keeps the last `valid_size` pairs in
    `tail` and, with `train_size`, the `valid_size` after it in
    `after_train`."""
    position = 0
    for pair in pairs:
        if pair is None:
            yield position, None
            continue
        if valid_size:
            tail.append(pair)
            if train_size is not None and train_size <= position < train_size + valid_size:
                after_train.append(pair)
        yield position, pair
        position += 1


def _pairs(files):
    """Every pair of the shards in order: `(source, target)` stripped, or
    None for a blank one."""
    for source_path, target_path in files:
        if target_path is None:
            pairs = _tsv_pairs(source_path)
        else:
            pairs = _aligned_pairs(source_path, target_path)
        for source, target in pairs:
            source = source.strip(ASCII_WHITESPACE)
            target = target.strip(ASCII_WHITESPACE)
            yield (source, target) if source and target else None


def _aligned_pairs(source_path, target_path):
    lines = itertools.zip_longest(_lines(source_path), _lines(target_path))
    counts = [0, 0]
    for source, target in lines:
        counts = [counts[0] + (source is not None), counts[1] + (target is not None)]
        if source is None or target is None:
            # The shorter file ended: count the rest of the longer for the message.
            for source, target in lines:
                counts = [counts[0] + (source is not None), counts[1] + (target is not None)]
            raise CorpusError(
                f"{source_path} has {counts[0]} lines but {target_path} has "
                f"{counts[1]}; aligned files need one sentence a line in both."
            )
        yield source, target


def _tsv_pairs(path):
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip(ASCII_WHITESPACE):
            yield "", ""
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            raise CorpusError(
                f"{path}:{number}: no tab; a tab-separated corpus has "
                "'source<TAB>target' a line (for two aligned files, give 'SOURCE,TARGET')."
            )
        yield columns[0], columns[1]


def _lines(path):
    """The decoded lines of a file (gzip where the name ends in .gz), read a
    line at a time: only "\\n" ends a line, as in `tf.data.TextLineDataset`,
    and a byte order mark that starts a line is dropped, as the stream drops it."""
    opener = gzip.open if path.endswith(".gz") else open
    number = 0
    try:
        with opener(path, "rb") as file:
            for number, raw in enumerate(file, start=1):
                yield _decoded(path, number, raw)
    except (OSError, EOFError, zlib.error) as error:
        raise CorpusError(f"{path}: cannot be read after line {number} ({error}).") from None
    if number == 0:
        raise CorpusError(f"{path}: the file is empty.")


def _decoded(path, number, raw):
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{path}:{number}: not valid UTF-8 "
            f"(byte {raw[error.start]:#04x}, byte {error.start + 1} of the line)."
        ) from None
    return line.removesuffix("\n").removeprefix(BYTE_ORDER_MARK)
