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

A pair is blank when a side is empty once ASCII white space is stripped
(`bytes.strip`): the same test as the stream's (`tf.strings.strip`), so
that both count the same pairs.
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
from zoo.data.sampling import Reservoir

# A byte order mark starting a line is dropped, as the stream drops it.
BYTE_ORDER_MARK = "\ufeff".encode()
# Lines read and checked at a time.
BLOCK_LINES = 65536


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
        train_lines: int, the corpus's lines (pairs, blank ones included)
            up to the end of the training split.
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
    train_lines: int
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
    # The validation pairs are known only at the end: the reservoir holds
    # room for them, and what is left of it is cut to the sample's size.
    reservoir = Reservoir(sample_size + valid_size, seed)
    tail = collections.deque(maxlen=valid_size)
    after_train = []  # the pairs from the train_size-th on, when it is set
    sampled_below = train_size if train_size is not None else float("inf")
    read = blank = position = 0
    # One loop over every pair of the corpus, on bytes: what it does a pair
    # is what the pass costs.
    for source, target in _pairs(files):
        read += 1
        source = source.removeprefix(BYTE_ORDER_MARK).strip()
        target = target.removeprefix(BYTE_ORDER_MARK).strip()
        if not source or not target:
            blank += 1
            continue
        pair = (source, target)
        # With the line it starts at (counting from 0), where the training
        # lines end if it is the first pair held out.
        tail.append((read - 1, pair))
        if sampled_below <= position < sampled_below + valid_size + 1:
            after_train.append((read - 1, pair))
        if position < sampled_below:
            reservoir.offer(position, (position, pair))
        position += 1
    valid_count = min(valid_size, position // 10)
    if train_size and position >= train_size + valid_count:
        train_pairs, held_out = train_size, after_train[: valid_count + 1]
    else:
        train_pairs = position - valid_count
        held_out = list(tail)[len(tail) - valid_count :] if valid_count else []
    train_lines = held_out[0][0] if held_out else read
    valid = [pair for _, pair in held_out[:valid_count]]
    sample = [pair for index, pair in reservoir.items() if index < train_pairs]
    if len(sample) > sample_size:
        kept = random.Random(seed).sample(range(len(sample)), sample_size)
        sample = [sample[index] for index in sorted(kept)]
    return CorpusScan(
        files, read, blank, train_pairs, train_lines, _decoded(valid), _decoded(sample)
    )


def _decoded(pairs):
    return [(source.decode(), target.decode()) for source, target in pairs]


def _pairs(files):
    """Every `(source, target)` line pair of the shards in order, as bytes
    (checked UTF-8) without the newline."""
    for source_path, target_path in files:
        if target_path is None:
            yield from _tsv_pairs(source_path)
        else:
            yield from _aligned_pairs(source_path, target_path)


def _aligned_pairs(source_path, target_path):
    sources, targets = _blocks(source_path), _blocks(target_path)
    counts = [0, 0]
    for source_block, target_block in itertools.zip_longest(sources, targets, fillvalue=[]):
        counts[0] += len(source_block)
        counts[1] += len(target_block)
        if counts[0] != counts[1]:
            counts[0] += sum(len(block) for block in sources)
            counts[1] += sum(len(block) for block in targets)
            raise CorpusError(
                f"{source_path} has {counts[0]} lines but {target_path} has "
                f"{counts[1]}; aligned files need one sentence a line in both."
            )
        yield from zip(source_block, target_block)


def _tsv_pairs(path):
    number = 0
    for block in _blocks(path):
        for number, line in enumerate(block, start=number + 1):
            if not line.strip():
                yield b"", b""
                continue
            columns = line.split(b"\t", 2)
            if len(columns) < 2:
                raise CorpusError(
                    f"{path}:{number}: no tab; a tab-separated corpus has "
                    "'source<TAB>target' a line (for two aligned files, give 'SOURCE,TARGET')."
                )
            yield columns[0], columns[1]


def _blocks(path):
    """The lines of a file (gzip where the name ends in .gz), in blocks of
    `BLOCK_LINES`, as bytes without the newline, each block checked to be
    UTF-8. Only "\\n" ends a line, as in `tf.data.TextLineDataset`."""
    opener = gzip.open if path.endswith(".gz") else open
    number = 0
    try:
        with opener(path, "rb") as file:
            while block := list(itertools.islice(file, BLOCK_LINES)):
                _check_utf8(path, number, block)
                number += len(block)
                yield [line.removesuffix(b"\n") for line in block]
    except (OSError, EOFError, zlib.error) as error:
        raise CorpusError(f"{path}: cannot be read after line {number} ({error}).") from None
    if number == 0:
        raise CorpusError(f"{path}: the file is empty.")


def _check_utf8(path, lines_before, block):
    """A `CorpusError` naming the file and line of the block's first line
    that is not UTF-8 (one decoding of the whole block when all are)."""
    try:
        b"".join(block).decode("utf-8")
        return
    except UnicodeDecodeError:
        pass
    for number, raw in enumerate(block, start=lines_before + 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"{path}:{number}: not valid UTF-8 "
                f"(byte {raw[error.start]:#04x}, byte {error.start + 1} of the line)."
            ) from None
