"""The corpus itself: pairs drawn from a seeded stream, and train, validation
and test splits with no test source seen in training."""

from __future__ import annotations

import random

from zoo.data.synthetic.grammar import grow_sentence
from zoo.data.synthetic.rendering import gold_alignment
from zoo.data.synthetic.rendering import render_source
from zoo.data.synthetic.rendering import render_target


def _check_lengths(min_length, max_length):
    if not isinstance(min_length, int) or min_length < 3:
        raise ValueError(
            "min_length must be an int >= 3 (the shortest sentence, "
            f"'the dog sleeps.', has 3 words); received {min_length!r}."
        )
    if not isinstance(max_length, int) or max_length < min_length:
        raise ValueError(
            f"max_length must be an int >= min_length={min_length}; "
            f"received {max_length!r}."
        )


def _generate(rng, size, min_length, max_length, exclude=None, with_alignments=False):
    """`size` pairs; with `exclude` (a set), no source in it or repeated;
    `with_alignments`: each with its gold alignment (no draw of its own)."""
    pairs = []
    rejected = 0
    while len(pairs) < size:
        main_clauses = grow_sentence(rng, rng.randint(min_length, max_length))
        source = render_source(main_clauses)
        if exclude is not None:
            if source in exclude:
                rejected += 1
                if rejected > 1000 + 10 * size:
                    raise ValueError(
                        f"cannot draw {size} new sentences of {min_length} to "
                        f"{max_length} words: nearly all are already used; "
                        "widen the length range or ask for fewer."
                    )
                continue
            exclude.add(source)
        pair = (source, render_target(main_clauses))
        if with_alignments:
            pair += (gold_alignment(main_clauses),)
        pairs.append(pair)
    return pairs


def synthetic_corpus(size, seed=0, min_length=5, max_length=60, with_alignments=False):
    """Generate `size` sentence pairs of the synthetic corpus.

    Args:
        size: int >= 0, the number of pairs.
        seed: int (or str), the corpus seed; the same seed always gives the
            same pairs, on every platform and Python version >= 3.10.
        min_length, max_length: the range of source lengths in words (the
            final period is attached to the last word and not counted);
            lengths are drawn uniformly from it. `min_length >= 3`.
        with_alignments: bool, also give each pair's gold word alignment.
            The pairs are the same either way.

    Returns:
        A list of `(source, target)` pairs of str: lowercase words separated
        by single spaces, ending with ".". See the module docstring for the
        grammar. With `with_alignments`, `(source, target, alignment)`
        triples: `alignment` is a gold line in Pharaoh format over the
        space-separated words of both sides (the final period belongs to
        the last word), as `zoo.evaluation.alignment.parse_gold` reads it.
        Each target word has one sure link `i-j`, to the source word it
        translates (an inflected verb to its verb, a determiner to its
        determiner); the two last words, which share the period, have a
        possible link `i?j` unless they are translations of each other.

    Example:

    >>> pairs = synthetic_corpus(1000, seed=0)
    >>> source, target = pairs[0]
    >>> [(source, target, alignment)] = synthetic_corpus(
    ...     1, seed=2, min_length=4, max_length=6, with_alignments=True)
    >>> source, target
    ('a ship watches a sad road.', 'une tigik rosebe una sufud lisul.')
    >>> alignment  # "sad" (4) is "lisul" (5); "road." (5) is "sufud" (4)
    '0-0 1-1 2-2 3-3 4-5 5-4 5?5'
    """
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be an int >= 0; received {size!r}.")
    _check_lengths(min_length, max_length)
    rng = random.Random(f"zoo.data.synthetic:{seed}")
    return _generate(rng, size, min_length, max_length, with_alignments=with_alignments)


def synthetic_splits(
    train_size,
    valid_size,
    test_size,
    seed=0,
    min_length=5,
    max_length=60,
    with_alignments=False,
):
    """Train, validation and test splits of the synthetic corpus.

    Each split is drawn from its own random stream (derived from `seed` and
    the split's name), and a validation or test pair whose source sentence is
    in an earlier split (train, then validation) is drawn again, so no
    source sentence of the test set is seen in training.

    Args:
        train_size, valid_size, test_size: ints >= 0, the number of pairs.
        seed: int (or str), the corpus seed.
        min_length, max_length, with_alignments: as in `synthetic_corpus`.

    Returns:
        `{"train": [...], "valid": [...], "test": [...]}`, lists of
        `(source, target)` pairs (triples with `with_alignments`).
    """
    sizes = {"train": train_size, "valid": valid_size, "test": test_size}
    for name, size in sizes.items():
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"{name}_size must be an int >= 0; received {size!r}.")
    _check_lengths(min_length, max_length)
    splits = {}
    seen = set()
    for name, size in sizes.items():
        rng = random.Random(f"zoo.data.synthetic:{seed}:{name}")
        if name == "train":
            # Train keeps its repeats, as a natural corpus does.
            splits[name] = _generate(rng, size, min_length, max_length, None, with_alignments)
            seen |= {pair[0] for pair in splits[name]}
        else:
            splits[name] = _generate(rng, size, min_length, max_length, seen, with_alignments)
    return splits
