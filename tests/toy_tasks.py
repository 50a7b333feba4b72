"""Toy translation tasks whose right alignment is known: copying (the
diagonal) and reversal (the anti-diagonal). Token ids: 0 padding, 2 BOS,
3 EOS, words from 4."""

import keras
import numpy as np

from zoo.evaluation.alignment import alignment_error_rate
from zoo.evaluation.alignment import parse_gold
from zoo.evaluation.alignment import peak_links
from zoo.recipes.decoding import decode_to_lists
from zoo.recipes.decoding import greedy_search
from zoo.recipes.seq2seq import default_jit_compile

VOCABULARY, MAX_LENGTH = 12, 7


def toy_task(count, seed, reverse):
    """`count` sentences of 4 to MAX_LENGTH random words and their copies
    (`reverse=False`) or reversals: `(source, target_in, target_out,
    lengths)`, int32 arrays padded to MAX_LENGTH (+ 1 for the targets)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, MAX_LENGTH + 1, count)
    source = np.zeros((count, MAX_LENGTH), "int32")
    target_in = np.zeros((count, MAX_LENGTH + 1), "int32")
    target_out = np.zeros((count, MAX_LENGTH + 1), "int32")
    for i, n in enumerate(lengths):
        words = rng.integers(4, VOCABULARY, n)
        target = words[::-1] if reverse else words
        source[i, :n] = words
        target_in[i, 0], target_in[i, 1 : n + 1] = 2, target
        target_out[i, :n], target_out[i, n] = target, 3
    return source, target_in, target_out, lengths


def gold_alignment(n, reverse):
    """The task's gold word alignment of an `n`-word sentence, Pharaoh text."""
    return " ".join(f"{n - 1 - j if reverse else j}-{j}" for j in range(n))


def train_and_score(model, reverse, epochs=6, seed=0):
    """Trains `model` on 2000 sentences of the task as the recipes train
    (Adam, clipped), decodes 50 new ones greedily, and returns `(exact,
    aer, attention [50, L, S], lengths)`: the share decoded exactly (EOS
    included) and the alignment error rate of the attention's peaks."""
    source, target_in, target_out, _ = toy_task(2000, seed=seed, reverse=reverse)
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
        batch_size=50, epochs=epochs, verbose=0,
    )
    test_source, _, test_target, lengths = toy_task(50, seed=seed + 1, reverse=reverse)
    result = greedy_search(model, test_source, max_length=MAX_LENGTH + 2)
    decoded = decode_to_lists(result, include_eos=True)
    expected = [list(row[: n + 1]) for row, n in zip(test_target, lengths)]
    exact = float(np.mean([d == e for d, e in zip(decoded, expected)]))
    attention = keras.ops.convert_to_numpy(result.attention)
    golds = [parse_gold(gold_alignment(n, reverse)) for n in lengths]
    links = [
        peak_links(attention[i, :n, :n], list(range(n)), list(range(n)))
        for i, n in enumerate(lengths)
    ]
    return exact, alignment_error_rate(links, golds).aer, attention, lengths
