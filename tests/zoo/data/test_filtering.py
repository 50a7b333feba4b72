"""Which training pairs are left out (blank, too long, too uneven) and the
counts a run reports of them."""

import pytest

from zoo.data import filtering


def test_each_pair_counts_under_the_first_reason_that_applies():
    reasons = filtering.left_out_reasons(
        [3, 0, 30, 30, 2, 4, 1],
        [4, 5, 0, 3, 12, 4, 9],
        max_source_length=20,
        max_target_length=20,
        max_length_ratio=3,
    )
    assert reasons.tolist() == ["", "blank", "blank", "too_long", "length_ratio", "", "length_ratio"]
    assert filtering.count_reasons(reasons) == {"blank": 2, "too_long": 1, "length_ratio": 2}


def test_no_ratio_keeps_uneven_pairs():
    reasons = filtering.left_out_reasons([1, 2], [40, 2], max_length_ratio=None)
    assert reasons.tolist() == ["", ""]


@pytest.mark.parametrize("ratio", [0.5, -1, "9", True])
def test_a_ratio_below_one_is_refused(ratio):
    with pytest.raises(ValueError, match="max_length_ratio must be None or a number >= 1"):
        filtering.left_out_reasons([1], [1], max_length_ratio=ratio)


WORDS = "cat dog sun red big sea old new".split()


def sentence(length, start=0):
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(length))


@pytest.fixture
def dirty_corpus(tmp_path):
    """A tab-separated corpus of 26 lines: 20 good pairs, 3 with a blank
    side, 2 too long (one of them uneven too) and 1 too uneven."""
    good = [(sentence(3 + i % 4, i), sentence(4 + i % 3, i + 1)) for i in range(20)]
    bad = [
        ("", sentence(4)),
        (sentence(4), " "),
        ("", ""),
        (sentence(25), sentence(24)),
        (sentence(25), sentence(3)),
        (sentence(2), sentence(12)),
    ]
    # The bad lines in the middle: the validation pair is the last line.
    lines = good[:10] + bad + good[10:]
    path = tmp_path / "dirty.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in lines), encoding="utf-8")
    return path


@pytest.mark.tensorflow_only
def test_training_data_reports_what_it_left_out(dirty_corpus, tmp_path):
    from zoo.tasks.translation import TRANSLATION
    from zoo.training.config import TrainingConfig

    training = TRANSLATION.settled(
        TrainingConfig(
            data=str(dirty_corpus),
            tokenizer="wordpiece",
            vocabulary_size=100,
            valid_size=1,
            max_length=21,  # 20 target tokens and the EOS
            max_length_ratio=3,
        )
    )
    splits = TRANSLATION.load_splits(training)
    examples = TRANSLATION.prepare_data(training, splits, tmp_path).examples
    assert examples == {
        "train_pairs": 22,
        "valid_pairs": 1,
        "test_pairs": 0,
        "pairs_read": 26,
        "train_pairs_kept": 19,
        "pairs_left_out_blank": 3,
        "pairs_left_out_too_long": 2,
        "pairs_left_out_length_ratio": 1,
    }
