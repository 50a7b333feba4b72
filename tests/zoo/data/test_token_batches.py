"""Batches by token count (`batch_tokens`), as fairseq's --max-tokens."""

import pytest

from zoo.data import synthetic_corpus


@pytest.fixture(scope="module")
def corpus():
    from zoo.data import TextTokenizer
    from zoo.data import encode_pairs

    pairs = synthetic_corpus(300, seed=4, min_length=3, max_length=30)
    source = TextTokenizer.train([s for s, _ in pairs], 300)
    target = TextTokenizer.train([t for _, t in pairs], 300)
    return encode_pairs(pairs, source, target)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("pad_to_bucket_boundary", [False, True])
def test_each_batch_holds_at_most_the_tokens_asked_and_the_epoch_every_pair(
    corpus, pad_to_bucket_boundary
):
    from zoo.data import make_translation_dataset

    dataset = make_translation_dataset(
        corpus, None, None, batch_size=1, batch_tokens=200,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )
    sizes, sources = [], []
    for inputs, target_out in dataset.as_numpy_iterator():
        source, target_in = inputs["source"], inputs["target_in"]
        assert source.size <= 200 and target_in.size <= 200 and target_out.size <= 200
        sizes.append(len(source))
        sources += [tuple(row[row > 0]) for row in source]
    assert len(sources) == len(corpus)
    assert sorted(sources) == sorted(tuple(row) for row in corpus.source.to_list())
    assert len(set(sizes)) > 2  # short sentences come more to a batch
    assert int(dataset.cardinality()) == len(sizes)


@pytest.mark.tensorflow_only
def test_batch_tokens_refuses_equal_batches(corpus):
    from zoo.data import make_translation_dataset

    with pytest.raises(ValueError, match="batch by batch_size"):
        make_translation_dataset(corpus, None, None, 1, batch_tokens=200, drop_remainder=True)


@pytest.mark.tensorflow_only
def test_a_data_parallel_training_by_tokens_is_refused_before_anything_is_written(
    tmp_path, monkeypatch
):
    from zoo.training import distributed
    from zoo.training import loop
    from zoo.training.config import TrainingError

    monkeypatch.setattr(distributed, "equal_batches_required", lambda strategy: True)
    with pytest.raises(TrainingError, match="batch by --batch-size"):
        loop.train("rnnsearch_small", tmp_path / "run", batch_tokens=100, train_size=64, valid_size=8)
    assert not (tmp_path / "run").exists()