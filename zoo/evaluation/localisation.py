"""Attention localisation for Show, Attend and Tell: whether the attention
map of a word that names an object of a synthetic scene falls on that
object's box.

Pure Python and NumPy: no tensorflow, jax or torch, so it runs with every
Keras backend.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# The nouns and size adjectives of the synthetic scenes
# (`zoo.data.captions.SceneObject.shape` and `.size`).
SHAPE_WORDS = frozenset({"circle", "square", "triangle"})
SIZE_WORDS = frozenset({"small", "large"})
# Words read as colour adjectives, besides the colours of the scene's own
# objects: without a fixed list, "a green circle" in a scene whose only
# circle is red would not see "green" as a colour and would wrongly resolve
# to the red circle.
COLOUR_WORDS = frozenset({
    "black", "blue", "brown", "cyan", "gray", "green", "grey", "magenta",
    "orange", "pink", "purple", "red", "white", "yellow",
})
# Words before a shape noun that may qualify it ("a large red circle").
_ADJECTIVE_WINDOW = 2


@dataclasses.dataclass(frozen=True)
class WordLocalisation:
    """Where the decoder looked when it produced one object word.

    Attributes:
        position: int, the word's index in the caption (and in its attention
            maps).
        word: str, the shape noun, lower-cased.
        object_index: int or None, the index in the scene's objects of the
            object the word names; None when no object of the scene matches.
        candidates: int, how many objects matched the word and its
            adjectives (0: unmatched; more than 1: resolved by attention).
        mass_in_box: float or None, the share of the word's attention mass
            inside the object's box, in [0, 1]; None when unmatched.
        peak_in_box: bool or None, whether the centre of the map's highest
            cell lies inside the box; None when unmatched.
    """

    position: int
    word: str
    object_index: int | None
    candidates: int
    mass_in_box: float | None
    peak_in_box: bool | None


def word_localisation(
    words, attention_maps, objects, image_size, colour_words=COLOUR_WORDS
):
    """Whether each object word of one caption attended to its object's box.

    A word names an object when it is a shape noun (`SHAPE_WORDS`). It
    resolves to the scene's objects of that shape whose colour and size match
    the colour and size adjectives among the two words just before it (no
    adjective of a kind: any colour, or any size). If one object matches, the
    word names it; if several do ("a circle" in a scene with two circles),
    the word names the one whose box holds the most attention mass (the
    first such object on a tie), i.e. the decoder gets the benefit of the
    doubt; if none does, the word names something not in the image and is
    reported with `object_index=None`.

    For a named object, the map `[h, w]` (row i is the image's i-th band from
    the top) is spread uniformly over the image: cell (i, j) covers
    `y in [i*H/h, (i+1)*H/h)` and `x in [j*W/w, (j+1)*W/w)`, and the mass
    in the box is each cell's mass times the fraction of its area inside the
    box (exact, also when H is not a multiple of h). The peak is the centre
    of the highest cell (the first one on a tie).

    Args:
        words: sequence of str, the generated caption, one word per step.
        attention_maps: array-like `[len(words), h, w]`, each step's
            attention weights over the feature grid (non-negative; a map
            need not sum to 1, shares are taken of its total).
        objects: sequence of scene objects with attributes `shape`, `colour`,
            `size` and `box = (x_min, y_min, x_max, y_max)` in pixels, the
            max exclusive (e.g. `zoo.data.captions.SceneObject`).
        image_size: int or `(height, width)`, the image's size in pixels.
        colour_words: set of str, words read as colour adjectives, besides the
            colours of `objects`.

    Returns:
        list of `WordLocalisation`, one per shape noun in the caption, in
        caption order.

    Raises:
        ValueError: the maps are not `[len(words), h, w]`, hold negative,
            non-finite or all-zero values, the image size is not positive, or
            a box is not inside the image.

    Example:

    >>> records = word_localisation(["a", "red", "circle"], maps, scene.objects,
    ...                             image_size=64)   # doctest: +SKIP
    >>> records[0].mass_in_box, records[0].peak_in_box   # doctest: +SKIP
    (0.83, True)
    """
    words = [str(word).lower() for word in words]
    height, width = _image_size(image_size)
    maps = _check_attention_maps(attention_maps, len(words))
    boxes = [_check_box(obj.box, index, height, width) for index, obj in enumerate(objects)]
    colour_vocabulary = {c.lower() for c in colour_words} | {
        str(obj.colour).lower() for obj in objects
    }

    records = []
    for position, word in enumerate(words):
        if word not in SHAPE_WORDS:
            continue
        candidates = _matching_objects(
            words, position, objects, colour_vocabulary
        )
        if not candidates:
            records.append(WordLocalisation(position, word, None, 0, None, None))
            continue
        attention = maps[position]
        masses = [_mass_in_box(attention, boxes[k], height, width) for k in candidates]
        best = int(np.argmax(masses))
        records.append(
            WordLocalisation(
                position=position,
                word=word,
                object_index=candidates[best],
                candidates=len(candidates),
                mass_in_box=masses[best],
                peak_in_box=_peak_in_box(attention, boxes[candidates[best]], height, width),
            )
        )
    return records


def attention_localisation(
    captions_words, attention_maps_list, objects_list, image_size,
    colour_words=COLOUR_WORDS,
):
    """Attention localisation of a corpus of generated captions.

    Runs `word_localisation` on every caption and averages over all the
    matched object words of the corpus (each word counts once, so long
    captions weigh more). Words naming an object that is not in their image
    are counted apart and left out of both shares.

    Args:
        captions_words: sequence of captions, each a sequence of str.
        attention_maps_list: sequence of array-likes, caption k's maps
            `[len(captions_words[k]), h, w]`.
        objects_list: sequence of each image's scene objects.
        image_size: int or `(height, width)`, shared by all images.
        colour_words: as in `word_localisation`.

    Returns:
        dict: `"object_words"` (int, matched object words), `"mean_mass_in_box"`
        (float, their mean share of attention inside the box, or None when
        there are none), `"peak_in_box"` (float, the fraction of them whose
        peak is inside the box, or None), `"unmatched_words"` (int, shape
        nouns that match no object of their image).

    Raises:
        ValueError: the three lists differ in length, or as
            `word_localisation` (the message names the caption).

    Example:

    >>> attention_localisation(words, maps, objects, image_size=64)  # doctest: +SKIP
    {'object_words': 212, 'mean_mass_in_box': 0.61, 'peak_in_box': 0.78,
     'unmatched_words': 9}
    """
    counts = {len(captions_words), len(attention_maps_list), len(objects_list)}
    if len(counts) != 1:
        raise ValueError(
            "Expected one attention map stack and one object list per caption; "
            f"received {len(captions_words)} captions, {len(attention_maps_list)} "
            f"map stacks and {len(objects_list)} object lists."
        )
    matched, unmatched = [], 0
    for index, (words, maps, objects) in enumerate(
        zip(captions_words, attention_maps_list, objects_list)
    ):
        try:
            records = word_localisation(words, maps, objects, image_size, colour_words)
        except ValueError as error:
            raise ValueError(f"Caption {index}: {error}") from None
        matched += [r for r in records if r.object_index is not None]
        unmatched += sum(r.object_index is None for r in records)
    return {
        "object_words": len(matched),
        "mean_mass_in_box": (
            float(np.mean([r.mass_in_box for r in matched])) if matched else None
        ),
        "peak_in_box": (
            float(np.mean([r.peak_in_box for r in matched])) if matched else None
        ),
        "unmatched_words": unmatched,
    }


def _image_size(image_size):
    size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    if len(size) != 2 or not all(isinstance(s, int) and s > 0 for s in size):
        raise ValueError(
            f"image_size must be a positive int or (height, width); received {image_size!r}."
        )
    return size


def _check_attention_maps(attention_maps, n_words):
    maps = np.asarray(attention_maps, dtype=np.float64)
    if maps.ndim != 3 or maps.shape[0] != n_words or 0 in maps.shape[1:]:
        raise ValueError(
            f"attention_maps must have shape [len(words), h, w] = [{n_words}, h, w]; "
            f"received shape {list(maps.shape)}."
        )
    if not np.all(np.isfinite(maps)) or np.any(maps < 0):
        raise ValueError("attention_maps must be finite and non-negative.")
    if np.any(maps.sum(axis=(1, 2)) <= 0):
        raise ValueError("Every attention map must have a positive total mass.")
    return maps


def _check_box(box, index, height, width):
    x_min, y_min, x_max, y_max = (float(v) for v in box)
    if not (0 <= x_min < x_max <= width and 0 <= y_min < y_max <= height):
        raise ValueError(
            f"Object {index}'s box (x_min, y_min, x_max, y_max) = {tuple(box)} is "
            f"empty or not inside the {height}x{width} image."
        )
    return x_min, y_min, x_max, y_max


def _matching_objects(words, position, objects, colour_vocabulary):
    before = words[max(0, position - _ADJECTIVE_WINDOW):position]
    colours = {w for w in before if w in colour_vocabulary}
    sizes = {w for w in before if w in SIZE_WORDS}
    return [
        index
        for index, obj in enumerate(objects)
        if str(obj.shape).lower() == words[position]
        and (not colours or str(obj.colour).lower() in colours)
        and (not sizes or str(obj.size).lower() in sizes)
    ]


def _cell_overlaps(n_cells, extent, low, high):
    """The fraction of each of `n_cells` equal cells tiling [0, extent) in [low, high)."""
    edges = np.arange(n_cells + 1) * (extent / n_cells)
    overlap = np.minimum(edges[1:], high) - np.maximum(edges[:-1], low)
    return np.clip(overlap, 0.0, None) / (extent / n_cells)


def _mass_in_box(attention, box, height, width):
    x_min, y_min, x_max, y_max = box
    rows = _cell_overlaps(attention.shape[0], height, y_min, y_max)
    columns = _cell_overlaps(attention.shape[1], width, x_min, x_max)
    return float(rows @ attention @ columns / attention.sum())


def _peak_in_box(attention, box, height, width):
    x_min, y_min, x_max, y_max = box
    row, column = np.unravel_index(np.argmax(attention), attention.shape)
    centre_y = (row + 0.5) * height / attention.shape[0]
    centre_x = (column + 0.5) * width / attention.shape[1]
    return bool(y_min <= centre_y < y_max and x_min <= centre_x < x_max)
