"""Tests of the captioning data: synthetic set, Flickr/COCO readers, pipeline.

The synthetic set and the readers are pure Python (and NumPy) and run on
every backend; the tf.data pipeline needs TensorFlow and is marked.
"""

import collections
import json
import logging
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from zoo.data import COLOURS
from zoo.data import SHAPES
from zoo.data import SIZES
from zoo.data import CaptionCorpusError
from zoo.data import CorpusError
from zoo.data import read_captions
from zoo.data import read_coco
from zoo.data import read_flickr
from zoo.data import synthetic_caption_splits
from zoo.data import synthetic_captions
from zoo.data.captions import COLOUR_RGB
from zoo.data.captions import NOISE


@pytest.fixture(scope="module")
def examples():
    return synthetic_captions(300, seed=0)


# --- synthetic set ------------------------------------------------------------


def test_same_seed_same_set_other_seed_other_set():
    first, again = synthetic_captions(20, seed=3), synthetic_captions(20, seed=3)
    other = synthetic_captions(20, seed=4)
    assert all(np.array_equal(a.image, b.image) for a, b in zip(first, again))
    assert [(e.captions, e.objects) for e in first] == [
        (e.captions, e.objects) for e in again
    ]
    assert [e.objects for e in first] != [e.objects for e in other]


def test_every_shape_colour_size_and_count_occurs(examples):
    objects = [obj for example in examples for obj in example.objects]
    assert {obj.shape for obj in objects} == set(SHAPES)
    assert {obj.colour for obj in objects} == set(COLOURS)
    assert {obj.size for obj in objects} == set(SIZES)
    assert len(COLOURS) >= 4
    counts = collections.Counter(len(example.objects) for example in examples)
    assert set(counts) == {1, 2, 3}
    assert min(counts.values()) > 50  # roughly even


def _colour_mask(image, colour):
    difference = np.abs(image.astype(int) - COLOUR_RGB[colour])
    return difference.max(-1) <= NOISE


@pytest.mark.parametrize("image_size", [64, 96])
def test_boxes_are_tight_around_the_object_pixels(image_size):
    scale = image_size / 64
    for example in synthetic_captions(60, seed=1, image_size=image_size):
        assert example.image.shape == (image_size, image_size, 3)
        assert example.image.dtype == np.uint8
        for colour in {obj.colour for obj in example.objects}:
            # Every pixel of the colour lies in the box of an object of it.
            outside = _colour_mask(example.image, colour)
            for obj in example.objects:
                if obj.colour == colour:
                    x0, y0, x1, y1 = obj.box
                    outside[y0:y1, x0:x1] = False
            assert not outside.any()
        for obj in example.objects:
            x0, y0, x1, y1 = obj.box
            assert 0 <= x0 < x1 <= image_size and 0 <= y0 < y1 <= image_size
            inside = _colour_mask(example.image[y0:y1, x0:x1], obj.colour)
            # Tight: the shape touches all four sides of its box.
            assert inside[0].any() and inside[-1].any()
            assert inside[:, 0].any() and inside[:, -1].any()
            side = x1 - x0
            if obj.size == "small":
                assert 12 * scale <= side <= 16 * scale + 1
            else:
                assert 24 * scale - 1 <= side <= 28 * scale + 1


def test_small_objects_hold_a_cell_centre_of_an_8x8_grid(examples):
    centres = np.arange(4, 64, 8)  # 64x64 image, 8 px cells
    for obj in (o for example in examples for o in example.objects):
        x0, y0, x1, y1 = obj.box
        assert ((centres >= x0) & (centres < x1)).any()
        assert ((centres >= y0) & (centres < y1)).any()


def test_objects_do_not_overlap_and_differ_in_shape_or_colour(examples):
    for example in examples:
        objects = example.objects
        assert len({(o.shape, o.colour) for o in objects}) == len(objects)
        for i, a in enumerate(objects):
            for b in objects[i + 1 :]:
                ax0, ay0, ax1, ay1 = a.box
                bx0, by0, bx1, by1 = b.box
                assert ax1 < bx0 or bx1 < ax0 or ay1 < by0 or by1 < ay0


def test_every_caption_names_every_object_by_colour_and_shape(examples):
    for example in examples:
        assert len(example.captions) == 5
        assert len(set(example.captions)) == 5
        for caption in example.captions:
            words = caption.split(" ")
            # plain lowercase words: BLEU and the tokenizer need no rules
            assert all(word.isalpha() and word.islower() for word in words)
            named = []
            for i, word in enumerate(words):
                if word in SHAPES:
                    # colour right before the noun, size optionally before it
                    size = words[i - 2] if words[i - 2] in SIZES else None
                    matches = [
                        o
                        for o in example.objects
                        if o.shape == word
                        and o.colour == words[i - 1]
                        and size in (None, o.size)
                    ]
                    assert len(matches) == 1, (caption, example.objects)
                    named.append(matches[0])
            assert sorted(named, key=id) == sorted(example.objects, key=id)


def test_canonical_caption_states_the_true_relation(examples):
    checked = collections.Counter()
    for example in examples:
        canonical = example.captions[0]
        objects = example.objects
        assert canonical.startswith(f"a {objects[0].phrase()}")
        if len(objects) != 2:
            continue
        (ax, ay), (bx, by) = objects[0].centre, objects[1].centre
        if " above " in canonical:
            assert ay < by and abs(by - ay) > abs(bx - ax)
            checked["above"] += 1
        else:
            assert " to the left of " in canonical
            assert ax < bx and abs(bx - ax) > abs(by - ay)
            checked["left"] += 1
    assert checked["above"] > 10 and checked["left"] > 10


def test_splits_are_disjoint_and_deterministic():
    splits = synthetic_caption_splits(60, 20, 20, seed=5)
    again = synthetic_caption_splits(60, 20, 20, seed=5)
    assert {name: len(split) for name, split in splits.items()} == {
        "train": 60,
        "valid": 20,
        "test": 20,
    }
    scenes = {name: {e.objects for e in split} for name, split in splits.items()}
    assert not scenes["train"] & scenes["valid"]
    assert not scenes["train"] & scenes["test"]
    assert not scenes["valid"] & scenes["test"]
    ids = [e.image_id for split in splits.values() for e in split]
    assert len(set(ids)) == len(ids)
    assert all(e.image_id.startswith("test-") for e in splits["test"])
    for name in splits:
        assert [e.captions for e in splits[name]] == [e.captions for e in again[name]]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(size=-1), "size"),
        (dict(size=2, image_size=32), "image_size"),
        (dict(size=2, captions_per_image=7), "captions_per_image"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        synthetic_captions(**kwargs)


# --- readers ------------------------------------------------------------------


def _write_image(path, rgb, height=10, width=14):
    matplotlib.image.imsave(path, np.full((height, width, 3), rgb, dtype=np.uint8))


@pytest.fixture
def flickr(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    _write_image(images / "red.png", (255, 0, 0))
    _write_image(images / "blue.jpg", (0, 0, 255), height=20)
    _write_image(images / "green.png", (0, 255, 0))
    tokens = tmp_path / "captions.token.txt"
    tokens.write_text(
        "red.png#0\tA red square .\n"
        "red.png#1\tsomething red\n"
        "blue.jpg#0\tA blue square .\n"
        "blue.jpg#1\t  \n"
        "green.png#0\tA green square .\n"
    )
    split = tmp_path / "train.txt"
    split.write_text("blue.jpg\nred.png\n")
    return tmp_path


def test_read_flickr_pairs_each_image_with_its_captions(flickr):
    corpus = read_flickr(flickr / "captions.token.txt", flickr / "images")
    assert [(i.image_id, i.captions) for i in corpus.images] == [
        ("red", ["A red square .", "something red"]),
        ("blue", ["A blue square ."]),
        ("green", ["A green square ."]),
    ]
    assert corpus.skipped_empty == 1
    assert all(image.image_path.is_file() for image in corpus.images)
    paths, captions = corpus.flatten()
    assert [p.name for p in paths] == ["red.png", "red.png", "blue.jpg", "green.png"]
    assert captions[1] == "something red"


def test_read_flickr_keeps_the_split_images_in_split_order(flickr):
    corpus = read_captions(
        f"{flickr}/captions.token.txt,{flickr}/images,{flickr}/train.txt"
    )
    assert [image.image_id for image in corpus.images] == ["blue", "red"]


def test_read_flickr_reads_the_kaggle_csv_and_pipe_layouts(flickr):
    csv_file = flickr / "captions.txt"
    csv_file.write_text(
        'image,caption\nred.png,"A red, square thing"\nblue.jpg,A blue one\n'
    )
    pipe_file = flickr / "results.csv"
    pipe_file.write_text("image_name| comment_number| comment\nred.png| 0| A red one\n")
    corpus = read_flickr(csv_file, flickr / "images")
    assert [(i.image_id, i.captions) for i in corpus.images] == [
        ("red", ["A red, square thing"]),
        ("blue", ["A blue one"]),
    ]
    corpus = read_flickr(pipe_file, flickr / "images")
    assert corpus.images[0].captions == ["A red one"]


@pytest.fixture
def coco(tmp_path):
    images = tmp_path / "val"
    images.mkdir()
    _write_image(images / "000001.jpg", (255, 0, 0))
    _write_image(images / "000002.png", (0, 0, 255))
    data = {
        "images": [
            {"id": 1, "file_name": "000001.jpg"},
            {"id": 2, "file_name": "000002.png"},
            {"id": 3, "file_name": "not_downloaded.jpg"},  # no captions: skipped
        ],
        "annotations": [
            {"image_id": 2, "caption": "A blue square."},
            {"image_id": 1, "caption": "A red square."},
            {"image_id": 1, "caption": " "},
            {"image_id": 1, "caption": "Red."},
        ],
    }
    (tmp_path / "captions.json").write_text(json.dumps(data))
    return tmp_path


def test_read_coco_groups_annotations_by_image(coco):
    corpus = read_captions(f"{coco}/captions.json,{coco}/val")
    assert [(i.image_id, i.captions) for i in corpus.images] == [
        ("1", ["A red square.", "Red."]),
        ("2", ["A blue square."]),
    ]
    assert corpus.images[1].image_path == coco / "val" / "000002.png"
    assert (corpus.skipped_empty, corpus.skipped_uncaptioned) == (1, 1)


def _break_flickr(root, case):
    """Spoil one thing of the Flickr fixture; return (spec, text the error names)."""
    tokens = root / "captions.token.txt"
    images, split = root / "images", root / "train.txt"
    spec = f"{tokens},{images}"
    if case == "missing caption file":
        tokens.unlink()
        return spec, str(tokens)
    if case == "missing image folder":
        return f"{tokens},{root}/nowhere", f"{root}/nowhere"
    if case == "empty caption file":
        tokens.write_text("\n\n")
        return spec, str(tokens)
    if case == "line without tab":
        tokens.write_text("red.png#0\tA red square .\nblue.jpg#0 A blue square .\n")
        return spec, f"{tokens}:2"
    if case == "line without #n":
        tokens.write_text("red.png\tA red square .\n")
        return spec, f"{tokens}:1"
    if case == "image not in folder":
        (images / "blue.jpg").unlink()
        return spec, f"{tokens}:3: image 'blue.jpg'"
    if case == "split image without captions":
        split.write_text("red.png\nyellow.png\n")
        return f"{spec},{split}", f"{split}:2: image 'yellow.png'"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "missing caption file",
        "missing image folder",
        "empty caption file",
        "line without tab",
        "line without #n",
        "image not in folder",
        "split image without captions",
    ],
)
def test_broken_flickr_input_is_a_one_line_corpus_error(flickr, case):
    spec, named = _break_flickr(flickr, case)
    with pytest.raises(CorpusError) as error:
        read_captions(spec)
    assert named in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "content, named",
    [
        ('{"images": [', "not valid JSON"),
        ('{"images": []}', "no 'annotations' list"),
        ('{"images": [{"id": 1}], "annotations": []}', "images[0] has no 'file_name'"),
        (
            '{"images": [], "annotations": [{"image_id": 9, "caption": "x"}]}',
            "annotations[0] names image_id 9",
        ),
        (
            '{"images": [{"id": 1, "file_name": "gone.jpg"}], '
            '"annotations": [{"image_id": 1, "caption": "x"}]}',
            "image 'gone.jpg' (id 1) is not in",
        ),
    ],
)
def test_broken_coco_input_is_a_one_line_corpus_error(coco, content, named):
    path = coco / "captions.json"
    path.write_text(content)
    with pytest.raises(CaptionCorpusError) as error:
        read_coco(path, coco / "val")
    assert str(path) in str(error.value) and named in str(error.value)
    assert "\n" not in str(error.value)


def test_a_spec_that_is_not_captions_and_folder_is_a_corpus_error(coco):
    with pytest.raises(CorpusError, match="CAPTIONS,IMAGE_DIR"):
        read_captions(f"{coco}/captions.json")
    with pytest.raises(CorpusError, match="no split file"):
        read_captions(f"{coco}/captions.json,{coco}/val,{coco}/split.txt")


def test_synthetic_set_and_readers_load_no_deep_learning_framework():
    # jax and torch users generate and read data without TensorFlow.
    code = (
        "import sys, zoo.data.captions, zoo.data.caption_readers; "
        "print(sorted(m for m in ('tensorflow', 'jax', 'torch', 'keras') "
        "if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert output == "[]"


# --- tf.data pipeline -----------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    from zoo.data import TextTokenizer

    captions = [c for e in synthetic_captions(300, seed=0) for c in e.captions]
    words = {word for caption in captions for word in caption.split()}
    words |= {"something", "."}  # the words of the Flickr fixture
    return TextTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", *sorted(words)])


def _check_teacher_forcing(target_in, target_out):
    for row_in, row_out in zip(target_in, target_out):
        length = int((row_out != 0).sum())  # caption tokens + EOS
        assert row_in[0] == 2  # BOS
        assert row_out[length - 1] == 3  # EOS
        np.testing.assert_array_equal(row_in[1:length], row_out[: length - 1])
        assert not row_in[length:].any() and not row_out[length:].any()


@pytest.mark.tensorflow_only
def test_synthetic_batches_pair_each_caption_with_its_image(tokenizer):
    from zoo.data import make_caption_dataset

    examples = synthetic_captions(6, seed=2)
    images = [e.image for e in examples for _ in e.captions]
    captions = [c for e in examples for c in e.captions]
    dataset = make_caption_dataset(
        images, captions, tokenizer, image_size=64, batch_size=8, shuffle=True
    )
    assert int(dataset.cardinality()) == 4  # ceil(30 / 8)
    image_of = {c: e.image for e in examples for c in e.captions}
    seen = []
    for inputs, target_out in dataset.as_numpy_iterator():
        assert inputs["image"].dtype == np.float32
        assert inputs["image"].shape[1:] == (64, 64, 3)
        assert inputs["target_in"].dtype == np.int32 == target_out.dtype
        assert inputs["target_in"].shape == target_out.shape
        assert target_out[:, -1].any()  # padded to the batch's longest only
        _check_teacher_forcing(inputs["target_in"], target_out)
        for image, ids in zip(inputs["image"], target_out):
            caption = tokenizer.decode(ids)  # round trip: the caption itself
            np.testing.assert_allclose(image, image_of[caption] / 255, atol=1e-6)
            seen.append(caption)
    assert sorted(seen) == sorted(captions)


@pytest.mark.tensorflow_only
def test_arrays_are_resized_and_long_captions_left_out(tokenizer):
    from zoo.data import make_caption_dataset

    examples = synthetic_captions(4, seed=2)
    images = np.stack([e.image for e in examples])
    captions = ["a red circle", "a red circle above a blue square", "a red circle", "a"]
    dataset = make_caption_dataset(
        images, captions, tokenizer, image_size=32, batch_size=2, max_caption_length=4
    )
    assert int(dataset.cardinality()) == 2  # the 7-word caption is left out
    inputs, target_out = next(dataset.as_numpy_iterator())
    assert inputs["image"].shape == (2, 32, 32, 3)
    assert 0 <= inputs["image"].min() and inputs["image"].max() <= 1
    assert target_out.shape[1] <= 4


@pytest.mark.tensorflow_only
def test_captions_padded_to_the_most_steps_give_one_batch_shape(tokenizer):
    from zoo.data import make_caption_dataset

    examples = synthetic_captions(6, seed=2)
    images = [e.image for e in examples for _ in e.captions]
    captions = [c for e in examples for c in e.captions]

    def epoch(**kwargs):
        dataset = make_caption_dataset(
            images, captions, tokenizer, image_size=32, batch_size=8, max_caption_length=20, **kwargs
        )
        return list(dataset.as_numpy_iterator())

    for (inputs, target_out), (plain_inputs, plain_out) in zip(
        epoch(pad_to_max_length=True), epoch()
    ):
        assert inputs["target_in"].shape[1] == target_out.shape[1] == 20
        steps = plain_out.shape[1]
        np.testing.assert_array_equal(target_out[:, :steps], plain_out)
        np.testing.assert_array_equal(inputs["target_in"][:, :steps], plain_inputs["target_in"])
        assert not target_out[:, steps:].any() and not inputs["target_in"][:, steps:].any()
    with pytest.raises(ValueError, match="pad_to_max_length needs a max_caption_length"):
        make_caption_dataset(images, captions, tokenizer, 32, 8, pad_to_max_length=True)


@pytest.mark.tensorflow_only
def test_files_are_decoded_resized_and_unreadable_ones_skipped(
    flickr, tokenizer, caplog
):
    from zoo.data import find_unreadable_images
    from zoo.data import make_caption_dataset

    images = flickr / "images"
    (images / "junk.png").write_bytes(b"not an image")
    jpeg = (images / "blue.jpg").read_bytes()
    (images / "cut.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    paths, captions = read_flickr(flickr / "captions.token.txt", images).flatten()
    paths += [images / "junk.png", images / "cut.jpg", images / "junk.png"]
    captions += ["a red circle"] * 3
    unreadable = [str(images / "junk.png"), str(images / "cut.jpg")]
    assert find_unreadable_images(paths) == unreadable

    with caplog.at_level(logging.WARNING, logger="zoo.data.caption_pipeline"):
        dataset = make_caption_dataset(paths, captions, tokenizer, 16, batch_size=2)
    assert "skipped 2 unreadable image file(s) and their 3 caption(s)" in caplog.text
    assert int(dataset.cardinality()) == 2  # the 4 readable pairs
    batches = list(dataset.as_numpy_iterator())
    assert sum(len(target) for _, target in batches) == 4
    first_image = batches[0][0]["image"][0]  # red.png, 10x14, solid red
    assert first_image.shape == (16, 16, 3)
    red = np.broadcast_to([1, 0, 0], (16, 16, 3))
    np.testing.assert_allclose(first_image, red, atol=0.02)
    for inputs, target_out in batches:
        _check_teacher_forcing(inputs["target_in"], target_out)


@pytest.mark.tensorflow_only
def test_load_image_reads_a_file_and_names_a_bad_one(flickr):
    from zoo.data import ImageError
    from zoo.data import load_image

    image = load_image(flickr / "images" / "blue.jpg", 24)
    assert image.shape == (24, 24, 3) and image.dtype == np.float32
    np.testing.assert_allclose(image.mean((0, 1)), [0, 0, 1], atol=0.03)
    junk = flickr / "images" / "junk.jpg"
    junk.write_bytes(b"GIF89a broken")
    missing = flickr / "none.jpg"
    for path, reason in [(junk, "cannot be decoded"), (missing, "no such file")]:
        with pytest.raises(ImageError) as error:
            load_image(path, 24)
        assert str(error.value).startswith(f"{path}: {reason}")
        assert "\n" not in str(error.value)
