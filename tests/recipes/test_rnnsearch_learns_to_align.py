"""A small RNNsearch learns to reverse: exact greedy decoding, anti-diagonal
alignment (an alignment error rate near 0)."""

import keras
import numpy as np
from layer_checks import to_numpy

from zoo.evaluation.alignment import alignment_error_rate
from zoo.evaluation.alignment import parse_gold
from zoo.evaluation.alignment import peak_links
from zoo.recipes.decoding import decode_to_lists
from zoo.recipes.decoding import greedy_search
from zoo.recipes.rnnsearch import RNNSearch
from zoo.recipes.seq2seq import default_jit_compile

VOCABULARY, MAX_LENGTH = 12, 7


def reversal_task(count, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, MAX_LENGTH + 1, count)
    source = np.zeros((count, MAX_LENGTH), "int32")
    target_in = np.zeros((count, MAX_LENGTH + 1), "int32")
    target_out = np.zeros((count, MAX_LENGTH + 1), "int32")
    for i, n in enumerate(lengths):
        words = rng.integers(4, VOCABULARY, n)
        source[i, :n] = words
        target_in[i, 0], target_in[i, 1 : n + 1] = 2, words[::-1]
        target_out[i, :n], target_out[i, n] = words[::-1], 3
    return source, target_in, target_out, lengths


def test_rnnsearch_learns_to_reverse_and_its_attention_aligns():
    source, target_in, target_out, _ = reversal_task(2000, seed=0)
    model = RNNSearch(
        VOCABULARY, VOCABULARY, embedding_dim=16, hidden_dim=32, attention_units=32,
        maxout_units=16,
    )
    model.compile(
        # Clipped, as the recipes train: unclipped, Adam at 1e-2 can blow the
        # loss back up after it has converged, where a thread count or a
        # seed puts a large gradient.
        optimizer=keras.optimizers.Adam(1e-2, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
        jit_compile=default_jit_compile(),
    )
    model.fit(
        {"source": source, "target_in": target_in}, target_out,
        batch_size=50, epochs=6, verbose=0,
    )
    test_source, _, test_target, lengths = reversal_task(50, seed=1)
    result = greedy_search(model, test_source, max_length=MAX_LENGTH + 2)
    decoded = decode_to_lists(result, include_eos=True)
    expected = [list(row[: n + 1]) for row, n in zip(test_target, lengths)]
    exact = np.mean([d == e for d, e in zip(decoded, expected)])
    assert exact >= 0.95, f"exact-match decoding on only {exact:.0%} of sentences"
    attention = to_numpy(result.attention)
    peaks_on_antidiagonal = [
        np.mean(np.argmax(attention[i, :n, :n], axis=-1) == np.arange(n)[::-1])
        for i, n in enumerate(lengths)
    ]
    assert np.mean(peaks_on_antidiagonal) >= 0.9
    # The same as an alignment error rate: gold i-(n-1-i), each token a word.
    golds = [parse_gold(" ".join(f"{n - 1 - j}-{j}" for j in range(n))) for n in lengths]
    links = [
        peak_links(attention[i, :n, :n], list(range(n)), list(range(n)))
        for i, n in enumerate(lengths)
    ]
    assert alignment_error_rate(links, golds).aer <= 0.1
