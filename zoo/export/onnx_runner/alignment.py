"""A split sentence's alignment kept as its blocks, and word alignments in
Pharaoh format."""

import numpy as np

from .layout import SPECIAL_TOKENS


class BlockAlignment:
    """`zoo.evaluation.alignment.BlockAlignment`: a block-diagonal alignment
    kept as its blocks (the parts' own), so that its memory grows with the
    line, not with its square; `np.asarray` makes it dense."""

    def __init__(self, blocks):
        self.blocks = [np.asarray(block) for block in blocks]

    @property
    def shape(self):
        return tuple(int(sum(block.shape[axis] for block in self.blocks)) for axis in (0, 1))

    @property
    def nbytes(self):
        return sum(block.nbytes for block in self.blocks)

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


# --- word alignments -------------------------------------------------------------
# `zoo.evaluation.alignment.word_alignment`: each target word's pieces linked
# to the source word of their attention peak, in Pharaoh format.

_NON_WORD_PIECES = frozenset([t for t in SPECIAL_TOKENS if t != "[UNK]"] + ["<pad>", "<s>", "</s>"])
_SENTENCEPIECE_WORD_START = "\u2581"


def piece_words(pieces):
    """The index of the word each piece belongs to (None for a special
    piece): "▁" begins a SentencePiece word, "##" continues a WordPiece one."""
    sentencepiece = any(p.startswith(_SENTENCEPIECE_WORD_START) for p in pieces)
    words, current = [], -1
    for piece in pieces:
        if piece in _NON_WORD_PIECES:
            words.append(None)
            continue
        begins = piece.startswith(_SENTENCEPIECE_WORD_START) if sentencepiece else not piece.startswith("##")
        if begins or current < 0:
            current += 1
        words.append(current)
    return words


def pharaoh_alignment(translation):
    """The word alignment of a `Translation`: `"0-0 1-2 ..."` (source-target)."""
    source_words = piece_words(translation.source_pieces)
    target_words = piece_words(translation.target_pieces)
    attention = translation.alignment
    if not isinstance(attention, BlockAlignment):
        links = _peak_links(attention, source_words, target_words)
    else:
        # Attention is never negative, so a row's peak lies in its own block
        # whenever the row attends to a word at all: block by block is exact.
        links = set()
        for row, column, block in attention.placed():
            rows, columns = block.shape
            links |= _peak_links(
                block, source_words[column : column + columns], target_words[row : row + rows]
            )
    return " ".join(f"{s}-{t}" for s, t in sorted(links))


def _peak_links(attention, source_words, target_words):
    """`zoo.evaluation.alignment.peak_links`, as a set of links."""
    usable = np.array([w is not None for w in source_words], bool)
    if not usable.any():
        return set()
    attention = np.asarray(attention, "float64")
    masked = np.where(usable[None, :], attention, -np.inf)
    attended = np.where(usable[None, :], attention, 0.0).any(axis=1)
    links = set()
    for piece, word in enumerate(target_words):
        if word is not None and attended[piece]:
            links.add((source_words[int(np.argmax(masked[piece]))], word))
    return links
