"""The pass over a training corpus before it is streamed: its hold-out, its
sample, its counts and its one-line errors for broken files."""

import gzip

import pytest

from zoo.data import corpus_scan
from zoo.data import read_corpus
from zoo.data.readers import CorpusError
from zoo.tasks.base import hold_out_validation
from zoo.training.config import TrainingConfig

pytestmark = pytest.mark.backend_independent  # pure Python


def write(path, lines):
    data = "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def corpus(folder, pairs, shards=1):
    """`pairs` written as `shards` gzip shard pairs; returns the glob spec."""
    size = -(-len(pairs) // shards)
    for shard in range(shards):
        part = pairs[shard * size : (shard + 1) * size]
        write(folder / f"train.{shard}.src.gz", [s for s, _ in part])
        write(folder / f"train.{shard}.tgt.gz", [t for _, t in part])
    return f"{folder}/train.*.src.gz,{folder}/train.*.tgt.gz"


PAIRS = [(f"source {i}", f"target {i}") for i in range(120)]
PAIRS[7] = ("  ", "target 7")  # blank source
PAIRS[50] = ("source 50", "\t")  # blank target


@pytest.mark.parametrize("train_size", [None, 40, 105, 500])
@pytest.mark.parametrize("valid_size", [1, 6, 30])
def test_the_hold_out_is_the_in_memory_one(tmp_path, train_size, valid_size):
    spec = corpus(tmp_path, PAIRS, shards=3)
    scan = corpus_scan.scan_corpus(
        spec, valid_size=valid_size, train_size=train_size, sample_size=1000
    )
    whole = write(tmp_path / "whole.src", [s for s, _ in PAIRS]), write(
        tmp_path / "whole.tgt", [t for _, t in PAIRS]
    )
    read = read_corpus(whole)
    config = TrainingConfig(valid_size=valid_size, train_size=train_size)
    train, valid, _ = hold_out_validation(read.pairs, config)
    assert scan.valid == valid
    assert scan.train_pairs == len(train)
    assert scan.sample == train and scan.sample_is_whole
    # The lines up to the first pair held out (or past the training pairs).
    first_out = PAIRS.index(valid[0]) if valid else (
        PAIRS.index(read.pairs[len(train)]) if len(train) < len(read.pairs) else len(PAIRS)
    )
    assert scan.train_lines == first_out
    assert (scan.pairs_read, scan.blank_lines) == (120, 2)
    assert [path.split("/")[-1] for path, _ in scan.files] == [
        "train.0.src.gz", "train.1.src.gz", "train.2.src.gz"
    ]


def test_a_sample_smaller_than_the_split_is_seeded_and_in_corpus_order(tmp_path):
    spec = corpus(tmp_path, PAIRS)
    scan = corpus_scan.scan_corpus(spec, valid_size=10, sample_size=20, seed=3)
    again = corpus_scan.scan_corpus(spec, valid_size=10, sample_size=20, seed=3)
    other = corpus_scan.scan_corpus(spec, valid_size=10, sample_size=20, seed=4)
    assert scan.sample == again.sample != other.sample
    assert len(scan.sample) == 20 and not scan.sample_is_whole
    positions = [PAIRS.index(pair) for pair in scan.sample]
    assert positions == sorted(positions)
    assert not set(scan.sample) & set(scan.valid)


def test_a_tab_separated_corpus_is_scanned_like_two_files(tmp_path):
    path = write(tmp_path / "pairs.tsv", ["a\tA\tcc-by", "", "b\tB", "c\tC"])
    scan = corpus_scan.scan_corpus(str(path), valid_size=1, sample_size=10)
    assert scan.files == [(str(path), None)]
    assert (scan.pairs_read, scan.blank_lines, scan.train_pairs) == (4, 1, 3)
    assert scan.sample == [("a", "A"), ("b", "B"), ("c", "C")]


def test_a_broken_line_deep_in_a_shard_is_named_by_file_and_line(tmp_path):
    spec = corpus(tmp_path, PAIRS, shards=2)
    lines = [t for _, t in PAIRS[60:]]
    data = "".join(f"{line}\n" for line in lines).encode()
    broken = data.replace(b"target 101\n", b"target \xff101\n")
    (tmp_path / "train.1.tgt.gz").write_bytes(gzip.compress(broken))
    with pytest.raises(CorpusError) as error:
        corpus_scan.scan_corpus(spec, valid_size=5, sample_size=10)
    assert str(error.value).startswith(f"{tmp_path}/train.1.tgt.gz:42: not valid UTF-8")


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda folder: write(folder / "train.1.tgt.gz", ["x"] * 59), ["has 60 lines", "has 59"]),
        (lambda folder: (folder / "train.1.tgt.gz").unlink(), ["2 source shards but 1 target"]),
        (lambda folder: write(folder / "train.1.tgt.gz", []), ["the file is empty"]),
        (
            lambda folder: (folder / "train.1.tgt.gz").write_bytes(b"not gzip"),
            ["train.1.tgt.gz: cannot be read"],
        ),
    ],
    ids=["uneven_shards", "missing_shard", "empty_shard", "not_gzip"],
)
def test_broken_shards_get_a_one_line_error(tmp_path, damage, words):
    spec = corpus(tmp_path, PAIRS, shards=2)
    damage(tmp_path)
    with pytest.raises(CorpusError) as error:
        corpus_scan.scan_corpus(spec, valid_size=5, sample_size=10)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_a_glob_that_matches_nothing_is_refused(tmp_path):
    with pytest.raises(CorpusError, match="no file matches"):
        corpus_scan.corpus_files(f"{tmp_path}/x.*.en,{tmp_path}/x.*.de")
