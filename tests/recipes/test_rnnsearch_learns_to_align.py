"""A small RNNsearch learns to reverse: exact greedy decoding, anti-diagonal
alignment (an alignment error rate near 0)."""

import numpy as np
from toy_tasks import VOCABULARY
from toy_tasks import train_and_score

from zoo.recipes.rnnsearch import RNNSearch


def test_rnnsearch_learns_to_reverse_and_its_attention_aligns():
    model = RNNSearch(
        VOCABULARY, VOCABULARY, embedding_dim=16, hidden_dim=32, attention_units=32,
        maxout_units=16,
    )
    exact, aer, attention, lengths = train_and_score(model, reverse=True)
    assert exact >= 0.95, f"exact-match decoding on only {exact:.0%} of sentences"
    peaks_on_antidiagonal = [
        np.mean(np.argmax(attention[i, :n, :n], axis=-1) == np.arange(n)[::-1])
        for i, n in enumerate(lengths)
    ]
    assert np.mean(peaks_on_antidiagonal) >= 0.9
    # The same as an alignment error rate: gold i-(n-1-i), each token a word.
    assert aer <= 0.1
