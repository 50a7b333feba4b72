"""Translation tasks whose right alignment is known: copying (the diagonal)
and reversal (the anti-diagonal), and the embedded synthetic corpus with its
gold links (reordering). Token ids: 0 padding, 2 BOS, 3 EOS, words from 4."""

import keras
import numpy as np

from zoo.data.synthetic import synthetic_corpus
from zoo.evaluation.alignment import alignment_error_rate
from zoo.evaluation.alignment import parse_gold
from zoo.evaluation.alignment import peak_links
from zoo.recipes.decoding import decode_to_lists
from zoo.recipes.decoding import greedy_search
from zoo.training.jit_compile import default_jit_compile

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


def synthetic_task(count, seed, max_length):
    """`count` pairs of the embedded synthetic corpus (reordering and
    agreement, sentences of 5 to `max_length` words) as word ids:
    `(source, target_in, target_out, golds, sizes)`, the arrays padded to
    their longest row, `golds` each pair's `GoldAlignment` and `sizes` the
    source and target vocabulary sizes. Word ids are given in the corpus's
    order of first appearance, so two calls with the same seed agree."""
    pairs = synthetic_corpus(count, seed=seed, max_length=max_length, with_alignments=True)
    sources = [source.split() for source, _, _ in pairs]
    targets = [target.split() for _, target, _ in pairs]
    source_ids = _word_ids(sources)
    target_ids = _word_ids(targets)
    width = max(map(len, sources))
    steps = max(map(len, targets)) + 1
    source = np.zeros((count, width), "int32")
    target_in = np.zeros((count, steps), "int32")
    target_out = np.zeros((count, steps), "int32")
    for i, (words, translation) in enumerate(zip(sources, targets)):
        ids = [target_ids[word] for word in translation]
        source[i, : len(words)] = [source_ids[word] for word in words]
        target_in[i, 0], target_in[i, 1 : len(ids) + 1] = 2, ids
        target_out[i, : len(ids)], target_out[i, len(ids)] = ids, 3
    golds = [parse_gold(alignment) for _, _, alignment in pairs]
    sizes = (len(source_ids) + 4, len(target_ids) + 4)
    return source, target_in, target_out, golds, sizes


def _word_ids(sentences):
    ids = {}
    for words in sentences:
        for word in words:
            ids.setdefault(word, len(ids) + 4)
    return ids


def train_and_align(model, task, train_size, test_size, epochs, batch_size=64):
    """Trains `model` on the first `train_size` pairs of a `synthetic_task`
    as the recipes train (Adam 1e-2, clipped), decodes its last `test_size`
    greedily and returns `(aer, top_share)`: the alignment error rate of the attention's
    peaks against the gold links, and the largest share of the peaks that
    any one source position takes (near 1 when the attention has settled on
    one word, whatever the step)."""
    source, target_in, target_out, golds, _ = task
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
        jit_compile=default_jit_compile(),
    )
    model.fit(
        {"source": source[:train_size], "target_in": target_in[:train_size]},
        target_out[:train_size], batch_size=batch_size, epochs=epochs, verbose=0,
    )
    test_source = source[-test_size:]
    result = greedy_search(model, test_source)
    decoded = decode_to_lists(result)
    attention = keras.ops.convert_to_numpy(result.attention)
    links, positions = [], []
    for i, tokens in enumerate(decoded):
        width = int(np.sum(test_source[i] > 0))
        peaks = attention[i, : len(tokens), :width]
        links.append(peak_links(peaks, list(range(width)), list(range(len(tokens)))))
        positions.extend(np.argmax(peaks, axis=-1))
    top_share = np.bincount(positions).max() / max(len(positions), 1)
    return alignment_error_rate(links, golds[-test_size:]).aer, float(top_share)
