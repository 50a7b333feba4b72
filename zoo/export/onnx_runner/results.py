"""What a translation or a caption request returns: `Translation`,
`Caption` and their n-best `Hypothesis` entries."""

from dataclasses import dataclass

import numpy as np


@dataclass
class Hypothesis:
    """One entry of an n-best list: `text`, `score` (log P(Y|X)),
    `penalized_score` (what the beam ranked it by) and `finished` (False for
    an unfinished hypothesis that fills the list; `beam_finished`)."""

    text: str
    score: float
    penalized_score: float
    finished: bool = True


@dataclass
class Translation:
    """One translated sentence, as `zoo.inference.translator.Translation`.

    Attributes:
        text: the detokenized translation.
        source_pieces, target_pieces: the pieces read and produced (EOS
            included when produced).
        alignment: float array `[len(target_pieces), len(source_pieces)]`,
            the attention of each produced piece over the source pieces.
        score: log P(Y | X).
        n_best: the `Hypothesis` list, best first, when asked for.
        parts: how many sentences an over-long source was translated as
            (with more than 1, `alignment` is a `BlockAlignment`).
        cut_parts: how many of those parts were still too long, and cut.
    """

    text: str
    source_pieces: list
    target_pieces: list
    alignment: np.ndarray
    score: float
    n_best: list = None
    parts: int = 1
    cut_parts: int = 0


@dataclass
class Caption:
    """One image's caption, as `zoo.inference.captioner.Caption`.

    Attributes:
        text: the detokenized caption.
        words: the pieces produced (EOS included when produced).
        attention: float array `[len(words), H, W]` over the feature grid.
        score: log P(Y | X).
        n_best: the `Hypothesis` list, best first, when asked for.
    """

    text: str
    words: list
    attention: np.ndarray
    score: float
    n_best: list = None
