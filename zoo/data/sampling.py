"""A seeded sample of bounded size from a stream of examples: what a run's
vocabularies are learned from (`TrainingConfig.vocabulary_sample`).

Pure Python (standard library only). Reservoir sampling reads the stream
once and holds only the sample, so the memory a vocabulary's training text
takes is bounded by the sample's size, not by the corpus's.
"""

import math
import random


class Reservoir:
    """A seeded sample of at most `size` items offered one at a time.

    Algorithm L (Li, 1994): the first `size` items fill the reservoir, then
    a random number of items is skipped before each one that replaces a
    random slot, with the same distribution as Algorithm R's one draw per
    item but a few draws per kept item: offering the items of a corpus of
    millions costs a comparison each.

    Args:
        size: int >= 1, the most items kept.
        seed: int, the random choices' seed.
    """

    def __init__(self, size, seed=0):
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"size must be an int >= 1; received {size!r}.")
        self.size = size
        self._rng = random.Random(seed)
        self._kept = []  # (position, item)
        self._weight = 1.0
        self._next = size  # the position of the next item kept past the first `size`

    def offer(self, position, item):
        """Offers the item at `position`, counting from 0 without gaps."""
        if position < self.size:
            self._kept.append((position, item))
            if position == self.size - 1:
                self._weight = self._draw_weight()
                self._next = position + self._skip() + 1
        elif position == self._next:
            self._kept[self._rng.randrange(self.size)] = (position, item)
            self._weight *= self._draw_weight()
            self._next = position + self._skip() + 1

    def items(self):
        """The items kept, in the order they were offered."""
        return [item for _, item in sorted(self._kept, key=lambda entry: entry[0])]

    def _uniform(self):
        return 1.0 - self._rng.random()  # in (0, 1], so that its log is finite

    def _draw_weight(self):
        return math.exp(math.log(self._uniform()) / self.size)

    def _skip(self):
        if self._weight >= 1.0:
            return 0
        return math.floor(math.log(self._uniform()) / math.log1p(-self._weight))


def reservoir_sample(items, size, seed=0):
    """At most `size` of `items`, each equally likely, in their order
    (`Reservoir`, which reads an iterator: `random.sample` would need the
    whole sequence in memory).

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
    reservoir = Reservoir(size, seed)
    for position, item in enumerate(items):
        reservoir.offer(position, item)
    return reservoir.items()
