"""The script that makes a large corpus from a small one (issue 48's cost
measurement): every written pair is a pair of the small corpus, the shards
hold the pairs asked for, the seed decides the draw, and bad requests get a
one-line error."""

import gzip

import pytest

from zoo.bench import scale_corpus

pytestmark = pytest.mark.backend_independent

PAIRS = [(f"source {index}", f"target {index}") for index in range(7)]


@pytest.fixture
def small_corpus(tmp_path):
    paths = tmp_path / "train.en", tmp_path / "train.de.gz"
    paths[0].write_text("".join(source + "\n" for source, _ in PAIRS))
    with gzip.open(paths[1], "wt") as file:
        file.writelines(target + "\n" for _, target in PAIRS)
    return paths


def read_shards(written):
    pairs = []
    for source_path, target_path in written:
        with gzip.open(source_path, "rt") as sources, gzip.open(target_path, "rt") as targets:
            pairs += [(s.rstrip("\n"), t.rstrip("\n")) for s, t in zip(sources, targets)]
    return pairs


def test_the_shards_hold_the_pairs_asked_for_drawn_from_the_small_corpus(small_corpus, tmp_path):
    written = scale_corpus.write_scaled_corpus(*small_corpus, tmp_path / "out", 50, 3, seed=1)
    assert [path.name for path in written[2]] == ["part-002.en.gz", "part-002.de.gz"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        path.name for pair in written for path in pair
    )
    pairs = read_shards(written)
    assert len(pairs) == 50 and set(pairs) <= set(PAIRS)
    assert len(set(pairs)) > 1


def test_the_seed_decides_the_draw(small_corpus, tmp_path):
    def draw(seed, folder):
        return read_shards(scale_corpus.write_scaled_corpus(*small_corpus, tmp_path / folder, 40, 2, seed))

    assert draw(0, "a") == draw(0, "b")
    assert draw(0, "a") != draw(1, "c")


def test_shards_are_as_equal_as_can_be():
    assert scale_corpus.shard_sizes(10, 3) == [4, 3, 3]
    assert scale_corpus.shard_sizes(3, 3) == [1, 1, 1]


@pytest.mark.parametrize(
    "arguments, words",
    [
        (["--pairs", "0"], "expected a positive integer, got '0'"),
        (["--pairs", "2", "--shards", "3"], "--shards 3 is more than --pairs 2"),
        (["--pairs", "2", "--seed", "-1"], "expected an integer >= 0, got '-1'"),
    ],
)
def test_bad_requests_get_one_line(small_corpus, tmp_path, capsys, arguments, words):
    data = ",".join(map(str, small_corpus))
    with pytest.raises(SystemExit):
        scale_corpus.main([data, str(tmp_path / "out"), *arguments])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert words in error
    assert not (tmp_path / "out").exists()


def test_a_missing_file_is_named_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        scale_corpus.main([f"{tmp_path}/no.en,{tmp_path}/no.de", str(tmp_path / "out"), "--pairs", "30"])
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}/no.en: no such file."
    assert not (tmp_path / "out").exists()
