"""Word alignments from attention, in Pharaoh format (`0-0 1-2 ...`).

Pharaoh format is what fast_align, GIZA++ (through Moses' symmetrizer) and
OpenNMT write: one line per sentence pair, space-separated `i-j` links
between source word `i` and target word `j`, both 0-based. A model attends
over subword pieces, so its piece alignment is mapped to words here:
`piece_words` tells which word each piece belongs to, for both conventions
of the zoo's tokenizers, and `word_alignment` links each target word's
pieces to the source word of their attention peak.

Pure Python and NumPy: no tensorflow, jax or torch.
"""

import numpy as np

from zoo.recipes.contract import SPECIAL_TOKENS
from zoo.recipes.contract import UNK_TOKEN

# WordPiece (zoo.data.tokenizer) marks a piece that continues a word.
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


def word_alignment(attention, source_pieces, target_pieces, non_words=NON_WORD_PIECES):
    """Source-target word links from a piece attention matrix.

    Each target piece that belongs to a word is linked to the source piece
    its attention peaks on (the argmax over the source pieces that belong to
    words), and the link is mapped to the words of both pieces.

    Args:
        attention: float array `[len(target_pieces), len(source_pieces)]`.
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
    attention = np.asarray(attention, dtype="float64")
    expected = (len(target_pieces), len(source_pieces))
    if attention.shape != expected:
        raise ValueError(
            f"`attention` must have shape [target pieces, source pieces] = {expected}. "
            f"Received shape {attention.shape}."
        )
    source_words = piece_words(source_pieces, non_words)
    target_words = piece_words(target_pieces, non_words)
    usable = np.array([word is not None for word in source_words], dtype=bool)
    if not usable.any():
        return []
    # Special source pieces (EOS) take attention too; they are no word to link to.
    masked = np.where(usable[None, :], attention, -np.inf)
    links = set()
    for target_piece, target_word in enumerate(target_words):
        if target_word is None:
            continue
        links.add((source_words[int(np.argmax(masked[target_piece]))], target_word))
    return sorted(links)


def format_pharaoh(links):
    """`[(0, 0), (1, 2)]` -> `"0-0 1-2"` (an empty string for no links)."""
    return " ".join(f"{source}-{target}" for source, target in links)


def parse_pharaoh(line):
    """`"0-0 1-2"` -> `[(0, 0), (1, 2)]`: the inverse of `format_pharaoh`.

    Accepts the `i?j` possible links that some gold alignments write with
    `?` instead of `-` (returned as links like any other).
    """
    links = []
    for item in line.split():
        source, _, target = item.replace("?", "-").partition("-")
        links.append((int(source), int(target)))
    return links
