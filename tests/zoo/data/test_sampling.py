"""The seeded sample of the training pairs a run's vocabularies learn from."""

import pytest

from zoo.data.sampling import reservoir_sample


def test_a_stream_no_longer_than_the_sample_is_kept_whole_in_order():
    assert reservoir_sample(iter("abcde"), 5, seed=3) == list("abcde")


def test_a_longer_stream_gives_a_seeded_subsequence_of_the_sample_size():
    sample = reservoir_sample(iter(range(100)), 10, seed=3)
    assert len(set(sample)) == 10 and sample == sorted(sample)
    assert sample == reservoir_sample(range(100), 10, seed=3)
    assert sample != reservoir_sample(range(100), 10, seed=4)
    assert max(sample) >= 10  # not merely the first ten


@pytest.mark.parametrize("size", [0, 2.0, None])
def test_a_bad_sample_size_is_refused(size):
    with pytest.raises(ValueError, match="size must be an int >= 1"):
        reservoir_sample([1], size)


# One letter of its own to each pair's words: a vocabulary has the letters
# of the text it learned from (every character is kept).
SOURCE_LETTERS = "αβγδεζηθικλμνξοπρστυφχψω"
TARGET_LETTERS = "абвгдежзийклмнопрстуфхц"


def vocabulary_letters(tokenizer, letters):
    return {char for token in tokenizer.vocabulary for char in token if char in letters}


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("kind", ["wordpiece", "sentencepiece"])
def test_vocabularies_learn_from_the_seeded_sample_only(tmp_path, kind):
    from zoo.tasks.base import run_tokenizers
    from zoo.tasks.translation import TRANSLATION
    from zoo.training.config import TrainingConfig

    pairs = list(zip(SOURCE_LETTERS, TARGET_LETTERS))
    sentences = {
        "source": [f"{s * 3} {s}" for s, _ in pairs],
        "target": [f"{t * 2} {t * 3}" for _, t in pairs],
    }

    def learn(seed, run):
        training = TrainingConfig(
            tokenizer=kind, vocabulary_size=60, vocabulary_sample=8, seed=seed
        )
        (tmp_path / run).mkdir()
        return run_tokenizers(TRANSLATION, tmp_path / run, training, sentences)

    learned = learn(seed=1, run="first")
    sample = reservoir_sample(pairs, 8, seed=1)
    assert vocabulary_letters(learned["source"], SOURCE_LETTERS) == {s for s, _ in sample}
    assert vocabulary_letters(learned["target"], TARGET_LETTERS) == {t for _, t in sample}
    again = learn(seed=1, run="again")
    assert again["source"].vocabulary == learned["source"].vocabulary
    assert again["target"].vocabulary == learned["target"].vocabulary
    other = learn(seed=2, run="other")
    assert other["source"].vocabulary != learned["source"].vocabulary


def test_every_item_is_as_likely_to_be_kept():
    # 2,000 seeded samples of 5 of 40 items: each item is kept 250 times
    # in expectation (a standard deviation of 14.8); none strays past 5.
    counts = [0] * 40
    for seed in range(2000):
        for item in reservoir_sample(range(40), 5, seed=seed):
            counts[item] += 1
    assert all(abs(count - 250) < 5 * 14.8 for count in counts), counts
    assert sum(counts) == 2000 * 5
