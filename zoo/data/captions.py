"""An embedded synthetic image-captioning set, generated in code from a seed.

Pure Python and NumPy (no TensorFlow), so it runs with every Keras backend
and needs no files and no download. It is the captioning counterpart of
`zoo.data.synthetic`: small enough that a Show, Attend and Tell model learns
it in minutes, yet every caption word that names an object has one place in
the image where the model should look, so the attention maps can be scored.

The images
----------
RGB uint8, `image_size` x `image_size` (64 by default, 64 to 128), a light
grey background with slight pixel noise (+-6 per channel), holding 1 to 3
filled shapes:

- shape: circle, square or triangle (pointing up);
- colour: red, green, blue, yellow or purple;
- size: "small" (12-16 px wide at 64x64) or "large" (24-28 px), scaled with
  `image_size` (about 40% of the objects are large: three large ones
  seldom fit). The smallest object spans 12 px, more than the 8 px cells of
  an 8x8 feature grid, so some cell centre always falls inside its box.

Each object fills a square box `(x_min, y_min, x_max, y_max)` (exclusive
ends) that its pixels touch on all four sides. Boxes keep 2 px from the
image border and 3 px from each other (scaled), so objects never overlap or
touch. No two objects of an image share both shape and colour, so the
colour and the shape noun in a caption name exactly one object.

Positions are drawn so that the relations the captions state are clear:
with two objects, one is either clearly above or clearly to the left of the
other (the horizontal and vertical offsets of their centres differ by at
least 6 px); with three, their centres are at least 6 px apart from left to
right.

The captions
------------
Lowercase words separated by single spaces, without punctuation, so that
a WordPiece tokenizer's `decode(encode(caption))` gives the caption back
and BLEU needs no tokenization of its own. Every caption names every
object as `[size] colour shape`, for example "large red circle" or "red
circle". With `A` the first object in reading order (the upper one of two
objects one above the other, else the left one; the leftmost of three) the
candidates are::

    1 object:  a A | a single A | a A on its own
    2 objects: a A above a B | a B below a A
               (or: to the left of | to the right of)
               a A and a B | a B and a A
    3 objects: a A and a B and a C | a C and a B and a A
               a A to the left of a B and a C
               a C to the right of a A and a B

each with and without the size words (6 candidates for one object, 8 for
two or three). The first candidate with sizes is the canonical caption and
always comes first; the other references are drawn from the rest. Example::

    a large red circle above a small blue square        (canonical)
    a blue square below a red circle
    a red circle and a blue square
    a small blue square and a large red circle
    a small blue square below a large red circle
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

SHAPES = ("circle", "square", "triangle")
COLOURS = ("red", "green", "blue", "yellow", "purple")
SIZES = ("small", "large")

COLOUR_RGB = {
    "red": (210, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 70, 210),
    "yellow": (225, 200, 30),
    "purple": (140, 60, 180),
}
BACKGROUND_RGB = (225, 225, 225)
NOISE = 6  # the most a pixel channel differs from its drawn colour

MIN_IMAGE_SIZE = 64
MAX_IMAGE_SIZE = 128
MAX_OBJECTS = 3

# Pixel sizes at 64x64, scaled with image_size.
_SIDE_RANGE = {"small": (12, 16), "large": (24, 28)}
_BORDER = 2  # from a box to the image border
_GAP = 3  # between two boxes
_CLEAR_OFFSET = 6  # how much clearer one direction of a relation must be

# Candidate captions of a scene: 6 for one object, 8 for two or three.
MAX_CAPTION_FORMS = 8
MAX_CAPTIONS_PER_IMAGE = 6

# Positions tried for one set of sizes before the sizes are drawn again
# (three large objects rarely fit with a clear left-to-right order).
_PLACEMENT_TRIES = 30


@dataclasses.dataclass(frozen=True)
class SceneObject:
    """One shape in a synthetic image.

    Attributes:
        shape: "circle", "square" or "triangle".
        colour: one of `COLOURS`.
        size: "small" or "large".
        box: `(x_min, y_min, x_max, y_max)` in pixels, `x_max` and `y_max`
            exclusive; the object's pixels touch all four sides.
    """

    shape: str
    colour: str
    size: str
    box: tuple

    def phrase(self, with_size=True):
        """The words that name the object: "large red circle" or "red circle"."""
        if with_size:
            return f"{self.size} {self.colour} {self.shape}"
        return f"{self.colour} {self.shape}"

    @property
    def centre(self):
        """`(x, y)` of the box centre, in pixels (floats)."""
        x_min, y_min, x_max, y_max = self.box
        return (x_min + x_max) / 2, (y_min + y_max) / 2


@dataclasses.dataclass
class CaptionExample:
    """One synthetic image with its reference captions.

    Attributes:
        image: uint8 array `[H, W, 3]`.
        captions: list of str, distinct reference captions; the first is the
            canonical one (see the module docstring).
        objects: tuple of `SceneObject`, in reading order (the order of the
            canonical caption).
        image_id: str, unique within a split (for example "train-000042").
    """

    image: np.ndarray
    captions: list
    objects: tuple
    image_id: str


# --- layout -----------------------------------------------------------------

# Every (shape, colour) pair, shape-major: kind k is SHAPES[k // len(COLOURS)]
# in COLOURS[k % len(COLOURS)].
_KINDS = tuple((shape, colour) for shape in SHAPES for colour in COLOURS)
_PAIRS = ((0, 1), (0, 2), (1, 2))


def _scaled(pixels, image_size):
    return round(pixels * image_size / MIN_IMAGE_SIZE)


def _draw_layouts(rng, counts, image_size):
    """Kinds, sizes and boxes of `len(counts)` scenes, all drawn at once.

    Scene i uses its first `counts[i]` slots. Each round tries
    `_PLACEMENT_TRIES` random positions for every scene still without a
    layout and keeps the first that is valid (boxes apart, relations clear);
    scenes where none is valid draw new sizes in the next round.

    Returns:
        `(kinds, sizes, boxes)`: int arrays `[N, 3]` (indices into `_KINDS`),
        `[N, 3]` (indices into `SIZES`) and `[N, 3, 4]` (x_min, y_min,
        x_max, y_max).
    """
    n = len(counts)
    border, gap = _scaled(_BORDER, image_size), _scaled(_GAP, image_size)
    clear_offset = _scaled(_CLEAR_OFFSET, image_size)
    low, high = (
        np.array([_scaled(_SIDE_RANGE[size][end], image_size) for size in SIZES])
        for end in (0, 1)
    )
    # The first 3 of a random permutation: distinct (shape, colour) pairs.
    kinds = np.argsort(rng.random((n, len(_KINDS))), axis=1)[:, :MAX_OBJECTS]
    present = np.arange(MAX_OBJECTS) < counts[:, None]
    sizes = np.zeros((n, MAX_OBJECTS), dtype=np.int64)
    boxes = np.zeros((n, MAX_OBJECTS, 4), dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        size = rng.integers(0, len(SIZES), (pending.size, MAX_OBJECTS))
        side = rng.integers(low[size], high[size] + 1)
        positions = image_size - 2 * border - side + 1
        grid = (pending.size, _PLACEMENT_TRIES, MAX_OBJECTS, 2)
        start = border + (rng.random(grid) * positions[:, None, :, None]).astype(
            np.int64
        )
        end = start + side[:, None, :, None]
        valid = np.ones(grid[:2], dtype=bool)
        for i, j in _PAIRS:
            apart = (end[:, :, i] + gap <= start[:, :, j]) | (
                end[:, :, j] + gap <= start[:, :, i]
            )
            both = present[pending, i] & present[pending, j]
            valid &= apart.any(-1) | ~both[:, None]
        centre = (start + end) / 2
        distance = np.abs(centre[:, :, 1] - centre[:, :, 0])  # objects 0 and 1
        clear_two = np.abs(distance[..., 0] - distance[..., 1]) >= clear_offset
        x_order = np.sort(centre[..., 0], axis=-1)
        clear_three = (np.diff(x_order, axis=-1) >= clear_offset).all(-1)
        count = counts[pending][:, None]
        valid &= np.where(count == 2, clear_two, True)
        valid &= np.where(count == 3, clear_three, True)
        found = valid.any(1)
        chosen = valid.argmax(1)[found]
        placed = pending[found]
        sizes[placed] = size[found]
        boxes[placed] = np.concatenate(
            [start[found, chosen], end[found, chosen]], axis=-1
        ).reshape(-1, MAX_OBJECTS, 4)
        pending = pending[~found]
    return kinds, sizes, boxes


def _reading_order(objects):
    """Objects in the order captions name them (see the module docstring)."""
    if len(objects) == 2:
        (ax, ay), (bx, by) = objects[0].centre, objects[1].centre
        axis = 1 if abs(by - ay) > abs(bx - ax) else 0  # one above the other: by y
        return tuple(sorted(objects, key=lambda obj: obj.centre[axis]))
    return tuple(sorted(objects, key=lambda obj: obj.centre[0]))


def _scene_objects(kinds, sizes, boxes, count):
    objects = []
    for kind, size, box in zip(kinds[:count], sizes[:count], boxes[:count]):
        shape, colour = _KINDS[kind]
        objects.append(SceneObject(shape, colour, SIZES[size], tuple(box.tolist())))
    return _reading_order(objects)


# --- drawing ----------------------------------------------------------------


def _shape_mask(shape, side):
    """A `[side, side]` bool mask of a shape filling its square box.

    Tested at pixel centres; every mask touches all four sides of its box,
    so the box of an object is tight.
    """
    centre = np.arange(side) + 0.5
    x, y = centre[None, :], centre[:, None]
    half = side / 2
    if shape == "circle":
        return (x - half) ** 2 + (y - half) ** 2 <= half**2
    if shape == "square":
        return np.ones((side, side), dtype=bool)
    # Apex at the top middle, base along the bottom row.
    return 2 * np.abs(x - half) <= y + 0.5


def _draw(images, kinds, boxes, present):
    """Paint every present object into `images`, one (shape, side) group at a time."""
    scene, slot = np.nonzero(present)
    kind = kinds[scene, slot]
    shape = kind // len(COLOURS)
    palette = np.array([COLOUR_RGB[colour] for colour in COLOURS], dtype=np.uint8)
    colour = palette[kind % len(COLOURS)]
    x_min, y_min, x_max, _ = boxes[scene, slot].T
    side = x_max - x_min
    for shape_index, side_value in set(zip(shape.tolist(), side.tolist())):
        group = (shape == shape_index) & (side == side_value)
        rows, columns = np.nonzero(_shape_mask(SHAPES[shape_index], side_value))
        images[
            scene[group][:, None],
            y_min[group][:, None] + rows,
            x_min[group][:, None] + columns,
        ] = colour[group][:, None]


def _add_noise(rng, images):
    # Every drawn channel value (background and palette) lies in [30, 225],
    # so uint8 arithmetic cannot wrap and needs no clipping; chunks bound
    # the noise buffer.
    for start in range(0, len(images), 1024):
        chunk = images[start : start + 1024]
        chunk += rng.integers(0, 2 * NOISE + 1, chunk.shape, dtype=np.uint8)
        chunk -= NOISE


# --- captions ---------------------------------------------------------------


def _caption_forms(objects, with_size):
    """The captions of a scene with or without sizes, canonical form first."""
    names = [f"a {obj.phrase(with_size)}" for obj in objects]
    if len(names) == 1:
        (a,) = names
        return [a, f"a single {objects[0].phrase(with_size)}", f"{a} on its own"]
    if len(names) == 2:
        a, b = names
        (ax, ay), (bx, by) = objects[0].centre, objects[1].centre
        if abs(by - ay) > abs(bx - ax):
            relation, inverse = "above", "below"
        else:
            relation, inverse = "to the left of", "to the right of"
        return [
            f"{a} {relation} {b}",
            f"{b} {inverse} {a}",
            f"{a} and {b}",
            f"{b} and {a}",
        ]
    a, b, c = names
    return [
        f"{a} and {b} and {c}",
        f"{c} and {b} and {a}",
        f"{a} to the left of {b} and {c}",
        f"{c} to the right of {a} and {b}",
    ]


def _pick_captions(objects, order, captions_per_image):
    """The canonical caption, then others in the random `order` given."""
    candidates = _caption_forms(objects, True) + _caption_forms(objects, False)
    others = [candidates[1 + i] for i in order if i < len(candidates) - 1]
    return [candidates[0]] + others[: captions_per_image - 1]


# --- generation -------------------------------------------------------------


def _rng(key):
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _generate(key, size, image_size, captions_per_image, prefix, exclude=None):
    """`size` examples from the random stream named by `key`.

    With `exclude` (a set of object tuples), a scene in it is drawn again and
    every new scene is added to it, so no scene repeats across the calls
    that share the set.
    """
    rng = _rng(key)
    counts = rng.integers(1, MAX_OBJECTS + 1, size)
    kinds, sizes, boxes = _draw_layouts(rng, counts, image_size)
    scenes = [None] * size
    redraw = list(range(size))
    while redraw:
        again = []
        for index in redraw:
            scenes[index] = _scene_objects(
                kinds[index], sizes[index], boxes[index], counts[index]
            )
            if exclude is not None and scenes[index] in exclude:
                again.append(index)
            elif exclude is not None:
                exclude.add(scenes[index])
        if again:
            kinds[again], sizes[again], boxes[again] = _draw_layouts(
                rng, counts[again], image_size
            )
        redraw = again
    images = np.empty((size, image_size, image_size, 3), dtype=np.uint8)
    images[...] = BACKGROUND_RGB
    _draw(images, kinds, boxes, np.arange(MAX_OBJECTS) < counts[:, None])
    _add_noise(rng, images)
    orders = np.argsort(rng.random((size, MAX_CAPTION_FORMS - 1)), axis=1).tolist()
    return [
        CaptionExample(
            image=images[index],
            captions=_pick_captions(scenes[index], orders[index], captions_per_image),
            objects=scenes[index],
            image_id=f"{prefix}-{index:06d}",
        )
        for index in range(size)
    ]


def _check_image_size(image_size):
    if not isinstance(image_size, int) or not (
        MIN_IMAGE_SIZE <= image_size <= MAX_IMAGE_SIZE
    ):
        raise ValueError(
            f"image_size must be an int in [{MIN_IMAGE_SIZE}, {MAX_IMAGE_SIZE}]; "
            f"received {image_size!r}."
        )


def synthetic_captions(size, seed=0, image_size=64, captions_per_image=5):
    """Generate `size` synthetic images with their reference captions.

    Args:
        size: int >= 0, the number of images.
        seed: int (or str); the same seed always gives the same images and
            captions (NumPy's PCG64 generator, seeded from a hash of it).
        image_size: int in [64, 128], the height and width in pixels.
        captions_per_image: int in [1, 6], the number of distinct reference
            captions of each image (the first is the canonical caption).

    Returns:
        A list of `CaptionExample`. Their images are views of one
        `[size, image_size, image_size, 3]` uint8 array.

    Example:

    >>> examples = synthetic_captions(1000, seed=0)
    >>> examples[0].image.shape
    (64, 64, 3)
    >>> caption = examples[0].captions[0]  # e.g. "a small red circle"
    """
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be an int >= 0; received {size!r}.")
    _check_image_size(image_size)
    if not isinstance(captions_per_image, int) or not (
        1 <= captions_per_image <= MAX_CAPTIONS_PER_IMAGE
    ):
        raise ValueError(
            f"captions_per_image must be an int in [1, {MAX_CAPTIONS_PER_IMAGE}]; "
            f"received {captions_per_image!r}."
        )
    key = f"zoo.data.captions:{seed}"
    return _generate(key, size, image_size, captions_per_image, "synthetic")


def synthetic_caption_splits(train_size, valid_size, test_size, seed=0, image_size=64):
    """Train, validation and test splits of the synthetic captioning set.

    Each split is drawn from its own random stream (derived from `seed` and
    the split's name), and a scene equal to an earlier one (same shapes,
    colours, sizes and boxes, in this or an earlier split) is drawn again,
    so no validation or test image is seen in training. Each image has 5
    reference captions.

    Args:
        train_size, valid_size, test_size: ints >= 0, the number of images.
        seed: int (or str), the set's seed.
        image_size: int in [64, 128], as in `synthetic_captions`.

    Returns:
        `{"train": [...], "valid": [...], "test": [...]}`, lists of
        `CaptionExample` whose `image_id`s start with the split's name.

    Example:

    >>> splits = synthetic_caption_splits(8000, 500, 500)
    >>> len(splits["valid"])
    500
    """
    sizes = {"train": train_size, "valid": valid_size, "test": test_size}
    for name, size in sizes.items():
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"{name}_size must be an int >= 0; received {size!r}.")
    _check_image_size(image_size)
    seen = set()
    return {
        name: _generate(
            f"zoo.data.captions:{seed}:{name}", size, image_size, 5, name, seen
        )
        for name, size in sizes.items()
    }
