"""Word alignments from attention, in Pharaoh format (`0-0 1-2 ...`).

Pharaoh format is what fast_align, GIZA++ (through Moses' symmetrizer) and
OpenNMT write: one line per sentence pair, space-separated `i-j` links
between source word `i` and target word `j`, both 0-based. A model attends
over subword pieces, so its piece alignment is mapped to words here:
`piece_words` tells which word each piece belongs to, for both conventions
of the zoo's tokenizers, and `word_alignment` links each target word's
pieces to the source word of their attention peak.

How right the links are is scored against a gold alignment by the
alignment error rate of Och and Ney (2003), `alignment_error_rate`. Gold
lines are read by `parse_gold` in the convention of the RWTH and WPT gold
sets: `i-j` is a sure link and `i?j` a possible one (a link annotators
allow but do not require); every sure link is also possible. A gold file
with only `i-j` links has possible links = sure links.

Pure Python and NumPy: no tensorflow, jax or torch.
"""

import dataclasses
import re

import numpy as np

from zoo.recipes.contract import SPECIAL_TOKENS
from zoo.recipes.contract import UNK_TOKEN

# WordPiece (zoo.data.wordpiece_tokenizer) marks a piece that continues a word.
WORDPIECE_CONTINUATION = "##"
# SentencePiece marks a piece that begins a word (U+2581, "lower one eighth block").
SENTENCEPIECE_WORD_START = "\u2581"

# Pieces that are no word of the sentence: padding, BOS, EOS (and their
# SentencePiece spellings). "[UNK]" is kept: it stands for a whole unknown word.
NON_WORD_PIECES = frozenset(
    [token for token in SPECIAL_TOKENS if token != UNK_TOKEN] + ["<pad>", "<s>", "</s>"]
)


def piece_words(pieces, non_words=NON_WORD_PIECES):
    """The index of the word each piece belongs to.

    Two conventions are read, told apart by the pieces themselves: if any
    piece starts with "▁" the pieces are SentencePiece's, where "▁" begins a
    word and any other piece continues the one before; otherwise they are
    WordPiece's, where "##" continues a word and any other piece begins one.
    A continuation piece at the start begins word 0.

    Args:
        pieces: a list of str pieces, as the tokenizer produced them.
        non_words: the pieces that belong to no word (special tokens); they
            get None and do not count as words.

    Returns:
        A list as long as `pieces`: an int word index, or None.

    Example:

    >>> piece_words(["the", "sun", "##ny", "day", "[EOS]"])
    [0, 1, 1, 2, None]
    >>> piece_words(["\u2581the", "\u2581sun", "ny", "\u2581day", "</s>"])
    [0, 1, 1, 2, None]
    """
    sentencepiece = any(piece.startswith(SENTENCEPIECE_WORD_START) for piece in pieces)
    words = []
    current = -1
    for piece in pieces:
        if piece in non_words:
            words.append(None)
            continue
        if sentencepiece:
            begins = piece.startswith(SENTENCEPIECE_WORD_START)
        else:
            begins = not piece.startswith(WORDPIECE_CONTINUATION)
        if begins or current < 0:
            current += 1
        words.append(current)
    return words


class BlockAlignment:
    """A block-diagonal attention matrix, kept as its blocks.

    The alignment of a source translated in parts (a line split at sentence
    ends): each part's target pieces attend only to its own source pieces,
    so the matrix is zero off its blocks, and keeping the blocks alone makes
    its memory grow with the line, not with its square. `np.asarray` gives
    the dense matrix, for a plot of a short line.

    Args:
        blocks: the parts' float arrays `[target pieces, source pieces]`, in
            order along the diagonal.
    """

    def __init__(self, blocks):
        self.blocks = [np.asarray(block) for block in blocks]

    @property
    def shape(self):
        return tuple(int(sum(block.shape[axis] for block in self.blocks)) for axis in (0, 1))

    @property
    def nbytes(self):
        return sum(block.nbytes for block in self.blocks)

    def any(self):
        """Whether any weight is non-zero, as `np.ndarray.any`, without the
        dense matrix."""
        return any(block.any() for block in self.blocks)

    def placed(self):
        """Yields `(first row, first column, block)` along the diagonal."""
        row = column = 0
        for block in self.blocks:
            yield row, column, block
            row, column = row + block.shape[0], column + block.shape[1]

    def __array__(self, dtype=None, copy=None):
        dense = np.zeros(self.shape, dtype or np.result_type(*self.blocks, np.float32))
        for row, column, block in self.placed():
            dense[row : row + block.shape[0], column : column + block.shape[1]] = block
        return dense


def word_alignment(attention, source_pieces, target_pieces, non_words=NON_WORD_PIECES):
    """Source-target word links from a piece attention matrix.

    Each target piece that belongs to a word is linked to the source piece
    its attention peaks on (the argmax over the source pieces that belong to
    words), and the link is mapped to the words of both pieces.

    Args:
        attention: float array `[len(target_pieces), len(source_pieces)]`,
            or a `BlockAlignment` of that shape (linked block by block).
        source_pieces, target_pieces: lists of str pieces.
        non_words: see `piece_words`.

    Returns:
        A sorted list of distinct `(source_word, target_word)` int pairs.

    Example:

    >>> attention = np.array([[0.1, 0.9, 0.0], [0.3, 0.2, 0.5], [0.0, 0.0, 1.0]])
    >>> word_alignment(attention, ["a", "b", "[EOS]"], ["x", "y", "[EOS]"])
    [(0, 1), (1, 0)]

    ("y" peaks on the source EOS, which is no word: its link is to "a".)
    """
    if not isinstance(attention, BlockAlignment):
        attention = np.asarray(attention, dtype="float64")
    expected = (len(target_pieces), len(source_pieces))
    if attention.shape != expected:
        raise ValueError(
            f"`attention` must have shape [target pieces, source pieces] = {expected}. "
            f"Received shape {attention.shape}."
        )
    source_words = piece_words(source_pieces, non_words)
    target_words = piece_words(target_pieces, non_words)
    if not isinstance(attention, BlockAlignment):
        return peak_links(attention, source_words, target_words)
    # Attention is never negative, so a row's peak lies in its own block
    # whenever the row attends to a word at all: block by block is exact.
    links = set()
    for row, column, block in attention.placed():
        rows, columns = block.shape
        links.update(
            peak_links(block, source_words[column : column + columns], target_words[row : row + rows])
        )
    return sorted(links)


def peak_links(attention, source_words, target_words):
    """Word links from a piece attention matrix, given each piece's word.

    Each target piece with a word is linked to the word of the source piece
    its attention peaks on, among the source pieces with a word. A target
    piece whose attention over those pieces is all zero (a model without
    attention, such as RNNencdec) links nothing.

    Args:
        attention: float array `[len(target_words), len(source_words)]`.
        source_words, target_words: the word index (int) of each piece, or
            None for a piece that is no word (see `piece_words`).

    Returns:
        A sorted list of distinct `(source_word, target_word)` int pairs.
    """
    attention = np.asarray(attention, dtype="float64")
    usable = np.array([word is not None for word in source_words], dtype=bool)
    if not usable.any():
        return []
    # Special source pieces (EOS) take attention too; they are no word to link to.
    masked = np.where(usable[None, :], attention, -np.inf)
    attended = np.where(usable[None, :], attention, 0.0).any(axis=1)
    links = set()
    for target_piece, target_word in enumerate(target_words):
        if target_word is None or not attended[target_piece]:
            continue
        links.add((source_words[int(np.argmax(masked[target_piece]))], target_word))
    return sorted(links)


def format_pharaoh(links):
    """`[(0, 0), (1, 2)]` -> `"0-0 1-2"` (an empty string for no links)."""
    return " ".join(f"{source}-{target}" for source, target in links)


# One Pharaoh link: source index, "-" (sure) or "?" (possible), target index.
_LINK = re.compile(r"(\d+)([-?])(\d+)")


def _parse_links(line):
    """`(source, target, kind)` of each link of a Pharaoh line; a ValueError
    naming the first item that is not `i-j` or `i?j`."""
    links = []
    for item in line.split():
        match = _LINK.fullmatch(item)
        if match is None:
            raise ValueError(
                f"{item!r} is not a Pharaoh link 'i-j' (sure) or 'i?j' (possible), "
                "i and j 0-based word indices"
            )
        links.append((int(match[1]), int(match[3]), match[2]))
    return links


def parse_pharaoh(line):
    """`"0-0 1-2"` -> `[(0, 0), (1, 2)]`: the inverse of `format_pharaoh`.

    Accepts the `i?j` possible links that some gold alignments write with
    `?` instead of `-` (returned as links like any other); `parse_gold`
    tells them apart. A ValueError names an item that is no link.
    """
    return [(source, target) for source, target, _ in _parse_links(line)]


@dataclasses.dataclass(frozen=True)
class GoldAlignment:
    """The gold alignment of one sentence pair.

    Attributes:
        sure: frozenset of `(source_word, target_word)` links, S.
        possible: frozenset of links, P; it holds every sure link (S ⊆ P).
    """

    sure: frozenset
    possible: frozenset

    @property
    def in_order(self):
        """Whether the sure links never cross: read in target order, their
        source words never go back, so a monotonic alignment can follow
        them. A word linked to several on the other side counts as in order
        when the links of each target word are read from left to right.

        >>> parse_gold("0-0 1-1 1-2").in_order, parse_gold("0-1 1-0").in_order
        (True, False)
        """
        sources = [source for source, _ in sorted(self.sure, key=lambda link: link[::-1])]
        return all(a <= b for a, b in zip(sources, sources[1:]))


def parse_gold(line):
    """A gold Pharaoh line -> `GoldAlignment`: `i-j` sure, `i?j` possible.

    Example:

    >>> gold = parse_gold("0-0 1?2 1-1")
    >>> sorted(gold.sure), sorted(gold.possible)
    ([(0, 0), (1, 1)], [(0, 0), (1, 1), (1, 2)])
    """
    links = _parse_links(line)
    sure = frozenset((i, j) for i, j, kind in links if kind == "-")
    return GoldAlignment(sure, sure | {(i, j) for i, j, _ in links})


def read_gold(lines, name="gold alignments"):
    """`GoldAlignment`s of Pharaoh lines (an iterable of str, e.g. a file
    open for reading); a bad line raises a one-line ValueError naming
    `name` and the line number."""
    golds = []
    for number, line in enumerate(lines, start=1):
        try:
            golds.append(parse_gold(line))
        except ValueError as error:
            raise ValueError(f"{name}: line {number}: {error}") from None
    return golds


@dataclasses.dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level scores of an alignment A against gold S ⊆ P.

    Attributes:
        aer: `1 - (|A∩S| + |A∩P|) / (|A| + |S|)` (0 when A and S are empty).
        precision: `|A∩P| / |A|` (0 when A is empty).
        recall: `|A∩S| / |S|` (0 when S is empty).
        links, sure, possible: |A|, |S| and |P|, summed over the sentences.
    """

    aer: float
    precision: float
    recall: float
    links: int
    sure: int
    possible: int


def alignment_error_rate(alignments, golds):
    """Och and Ney's (2003) alignment error rate, with precision and recall.

    The counts |A|, |S|, |P|, |A∩S| and |A∩P| are summed over the corpus
    before the ratios are taken, as the gold-standard evaluations do.

    Args:
        alignments: one list of `(source_word, target_word)` links per
            sentence pair (A).
        golds: one `GoldAlignment` per sentence pair.

    Returns:
        An `AlignmentScores`.

    Example:

    >>> gold = parse_gold("0-0 1-1 2?1")
    >>> scores = alignment_error_rate([[(0, 0), (2, 1)]], [gold])
    >>> round(scores.aer, 4), scores.precision, scores.recall
    (0.25, 1.0, 0.5)
    """
    alignments, golds = list(alignments), list(golds)
    if len(alignments) != len(golds):
        raise ValueError(
            f"{len(alignments)} alignments for {len(golds)} gold alignments: "
            "one each per sentence pair"
        )
    links = sure = possible = hit_sure = hit_possible = 0
    for alignment, gold in zip(alignments, golds):
        alignment = set(alignment)
        links += len(alignment)
        sure += len(gold.sure)
        possible += len(gold.possible)
        hit_sure += len(alignment & gold.sure)
        hit_possible += len(alignment & gold.possible)
    return AlignmentScores(
        aer=1.0 - (hit_sure + hit_possible) / (links + sure) if links + sure else 0.0,
        precision=hit_possible / links if links else 0.0,
        recall=hit_sure / sure if sure else 0.0,
        links=links,
        sure=sure,
        possible=possible,
    )
