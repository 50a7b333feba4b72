"""A seeded sample of bounded size from a stream of examples: what a run's
vocabularies are learned from (`TrainingConfig.vocabulary_sample`).

Pure Python (standard library only). Reservoir sampling reads the stream
once and holds only the sample, so the memory a vocabulary's training text
takes is bounded by the sample's size, not by the corpus's.
"""

import random


def reservoir_sample(items, size, seed=0):
    """At most `size` of `items`, each equally likely, in their order.

    Algorithm R (Vitter, 1985): the first `size` items fill the reservoir,
    then item i (counting from 0) replaces a random one of it with
    probability size / (i + 1). `random.sample` would need the whole
    sequence in memory; this reads an iterator.

    Args:
        items: an iterable.
        size: int >= 1, the most items kept.
        seed: int, the random choices' seed: the same seed and items give
            the same sample.

    Returns:
        A list: all of `items` when they are at most `size`, else `size` of
        them, in the order they came.

    >>> reservoir_sample(range(5), 10)
    [0, 1, 2, 3, 4]
    >>> len(reservoir_sample(range(1000), 10, seed=1))
    10
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be an int >= 1; received {size!r}.")
    rng = random.Random(seed)
    reservoir = []  # (position in items, item)
    for index, item in enumerate(items):
        if index < size:
            reservoir.append((index, item))
            continue
        slot = rng.randrange(index + 1)
        if slot < size:
            reservoir[slot] = (index, item)
    # In the items' order again: a sample of a whole corpus is the corpus.
    return [item for _, item in sorted(reservoir, key=lambda entry: entry[0])]
