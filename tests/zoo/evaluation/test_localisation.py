"""zoo.evaluation.localisation: where the decoder looked, against the objects' boxes.

Pure Python and NumPy, so the suite runs it once, not per backend.
"""

import dataclasses

import numpy as np
import pytest

from zoo.evaluation.localisation import WordLocalisation
from zoo.evaluation.localisation import attention_localisation
from zoo.evaluation.localisation import word_localisation

pytestmark = pytest.mark.backend_independent


@dataclasses.dataclass(frozen=True)
class SceneObject:
    """The attributes of `zoo.data.captions.SceneObject` that localisation reads."""

    shape: str
    colour: str
    size: str
    box: tuple


IMAGE_SIZE = 64  # a 4 x 4 grid: each cell is 16 x 16 pixels
RED_CIRCLE = SceneObject("circle", "red", "small", (0, 0, 16, 16))  # cell (0, 0)
BLUE_CIRCLE = SceneObject("circle", "blue", "large", (32, 32, 64, 64))  # cells (2-3, 2-3)
GREEN_SQUARE = SceneObject("square", "green", "large", (16, 0, 48, 32))  # cells (0-1, 1-2)


def _one_hot(row, column, grid=4):
    attention = np.zeros((grid, grid))
    attention[row, column] = 1.0
    return attention


def _maps(words, focus):
    """One map per word: uniform, except `focus[position]` replaces it."""
    maps = np.full((len(words), 4, 4), 1 / 16)
    for position, attention in focus.items():
        maps[position] = attention
    return maps


def test_all_mass_in_the_box():
    words = "a red circle".split()
    records = word_localisation(
        words, _maps(words, {2: _one_hot(0, 0)}), [RED_CIRCLE, BLUE_CIRCLE], IMAGE_SIZE
    )
    assert records == [
        WordLocalisation(position=2, word="circle", object_index=0, candidates=1,
                         mass_in_box=1.0, peak_in_box=True)
    ]


def test_mass_split_in_known_fractions():
    # Half the mass on the red circle's cell, a quarter on the cell right of
    # it, a quarter on the blue circle: 0.5 inside, and the peak inside.
    attention = np.zeros((4, 4))
    attention[0, 0], attention[0, 1], attention[3, 3] = 0.5, 0.25, 0.25
    [record] = word_localisation(
        ["circle"], attention[None], [RED_CIRCLE], IMAGE_SIZE
    )
    assert record.mass_in_box == pytest.approx(0.5)
    assert record.peak_in_box
    # Uniform attention: the box's share of the image's area, 16*16 / 64*64.
    [record] = word_localisation(
        ["circle"], np.full((1, 4, 4), 1 / 16), [RED_CIRCLE], IMAGE_SIZE
    )
    assert record.mass_in_box == pytest.approx(1 / 16)


def test_cells_are_spread_over_the_pixels_they_cover():
    # 3 x 3 grid on a 64-pixel image: cells are 64/3 pixels wide, so a box
    # ending at x = y = 16 covers 16 / (64/3) = 3/4 of cell (0, 0) along
    # each axis; rows are y: a map peaked at row 0, column 2 is top-right.
    attention = np.zeros((1, 3, 3))
    attention[0, 0, 0] = 1.0
    [record] = word_localisation(["circle"], attention, [RED_CIRCLE], IMAGE_SIZE)
    assert record.mass_in_box == pytest.approx(0.75 * 0.75)
    # Peak cell centre (32/3, 32/3) is inside [0, 16).
    assert record.peak_in_box
    top_right = SceneObject("circle", "red", "small", (43, 0, 64, 21))
    attention = np.zeros((1, 3, 3))
    attention[0, 0, 2] = 1.0
    [record] = word_localisation(["circle"], attention, [top_right], (64, 64))
    assert record.peak_in_box
    # Non-square image, given as (height, width): the same box is in the
    # bottom row of a 2 x 1 grid over a 40-high, 64-wide image.
    bottom = SceneObject("square", "red", "small", (0, 20, 64, 40))
    [record] = word_localisation(
        ["square"], np.array([[[0.25], [0.75]]]), [bottom], (40, 64)
    )
    assert record.mass_in_box == pytest.approx(0.75) and record.peak_in_box


def test_adjectives_pick_the_object():
    words = "a large blue circle and a red circle".split()
    # "blue circle" looks at the red circle's cell: a miss, not re-resolved.
    maps = _maps(words, {3: _one_hot(0, 0), 7: _one_hot(0, 0)})
    records = word_localisation(words, maps, [RED_CIRCLE, BLUE_CIRCLE], IMAGE_SIZE)
    assert [(r.position, r.object_index, r.candidates) for r in records] == [
        (3, 1, 1), (7, 0, 1)
    ]
    assert records[0].mass_in_box == 0.0 and not records[0].peak_in_box
    assert records[1].mass_in_box == 1.0 and records[1].peak_in_box


def test_ambiguous_word_takes_the_object_with_most_attention():
    # "a circle" matches both circles: it names the one the decoder looked at.
    words = "a circle".split()
    for cell, expected in [((0, 0), 0), ((3, 3), 1)]:
        [record] = word_localisation(
            words, _maps(words, {1: _one_hot(*cell)}), [RED_CIRCLE, BLUE_CIRCLE],
            IMAGE_SIZE,
        )
        assert record.object_index == expected and record.candidates == 2
        assert record.mass_in_box == 1.0


def test_words_naming_absent_objects_are_counted_apart():
    # A green circle, a triangle and a small square are not in the scene.
    words = "a green circle near a triangle and a small square".split()
    maps = _maps(words, {})
    records = word_localisation(words, maps, [RED_CIRCLE, GREEN_SQUARE], IMAGE_SIZE)
    assert [(r.word, r.object_index, r.candidates, r.mass_in_box, r.peak_in_box)
            for r in records] == [
        ("circle", None, 0, None, None),
        ("triangle", None, 0, None, None),
        ("square", None, 0, None, None),
    ]


def test_corpus_aggregate():
    first = "a red circle and a green square".split()
    second = "a blue triangle".split()
    square_half = np.zeros((4, 4))
    square_half[0, 1], square_half[3, 0] = 0.5, 0.5  # half in the square's box
    maps_first = _maps(first, {2: _one_hot(0, 0), 6: square_half})
    result = attention_localisation(
        [first, second],
        [maps_first, _maps(second, {})],
        [[RED_CIRCLE, GREEN_SQUARE], [RED_CIRCLE]],
        IMAGE_SIZE,
    )
    # Two matched words (masses 1.0 and 0.5; the square's map has a tie
    # between its two cells and np.argmax takes the first, inside the box),
    # one unmatched triangle.
    assert result == {
        "object_words": 2,
        "mean_mass_in_box": pytest.approx(0.75),
        "peak_in_box": 1.0,
        "unmatched_words": 1,
    }
    empty = attention_localisation([second], [_maps(second, {})], [[]], IMAGE_SIZE)
    assert empty == {"object_words": 0, "mean_mass_in_box": None,
                     "peak_in_box": None, "unmatched_words": 1}


@pytest.mark.parametrize(
    "maps, objects, image_size, match",
    [
        (np.ones((2, 4, 4)), [RED_CIRCLE], 64, r"\[3, h, w\]; received shape \[2, 4, 4\]"),
        (np.ones((3, 16)), [RED_CIRCLE], 64, r"received shape \[3, 16\]"),
        (-np.ones((3, 4, 4)), [RED_CIRCLE], 64, "non-negative"),
        (np.zeros((3, 4, 4)), [RED_CIRCLE], 64, "positive total mass"),
        (np.ones((3, 4, 4)), [RED_CIRCLE], (64, 0), "image_size must be"),
        (np.ones((3, 4, 4)), [BLUE_CIRCLE], 48, r"Object 0's box .* 48x48 image"),
    ],
)
def test_invalid_inputs_raise(maps, objects, image_size, match):
    with pytest.raises(ValueError, match=match):
        word_localisation("a red circle".split(), maps, objects, image_size)


def test_corpus_errors_name_the_caption():
    words = ["circle"]
    with pytest.raises(ValueError, match="1 captions, 2 map stacks and 1 object lists"):
        attention_localisation([words], [np.ones((1, 2, 2))] * 2, [[]], 64)
    with pytest.raises(ValueError, match=r"^Caption 1: attention_maps must have shape"):
        attention_localisation(
            [words, words], [np.ones((1, 2, 2)), np.ones((2, 2, 2))], [[], []], 64
        )
