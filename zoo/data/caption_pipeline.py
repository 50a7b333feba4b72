"""tf.data pipelines for image captioning: images with padded caption ids.

TensorFlow only by nature (`tf.data`, `tf.io.decode_image`); the batches it
yields feed `keras.Model.fit` on every Keras backend.

Each element is `({"image": [B, S, S, 3], "target_in": [B, T]},
target_out [B, T])`: the image float32 in [0, 1], resized to `image_size`
S, and for a caption with ids `y1 ... yn` (int32, padded with `[PAD]` = 0
to the batch's longest caption):

    target_in  = [BOS] y1 ... yn        (what the decoder reads)
    target_out = y1 ... yn [EOS]        (what it must predict)

Images come either as uint8 arrays (the synthetic set), kept in memory once
each, or as file paths (a real corpus), read and decoded inside `tf.data`
(`tf.io.decode_image`: JPEG, PNG, GIF, BMP, WebP) and resized with
`tf.image.resize` (bilinear, antialiased; the aspect ratio is not kept).
`load_image` prepares one file exactly the same way, for captioning it.

A file that cannot be decoded would stop training mid-epoch, so before
building the dataset every distinct file is decoded once, in parallel
(`find_unreadable_images`, cheap beside an epoch of training). The
captions of unreadable images are left out, and their number is logged as
a warning.
"""

from __future__ import annotations

import logging
import os
import re

import numpy as np
import tensorflow as tf

from zoo.data.caption_readers import ImageError
from zoo.data.pipeline import epoch_batches
from zoo.recipes.contract import BOS_ID
from zoo.recipes.contract import EOS_ID
from zoo.recipes.contract import PAD_ID

logger = logging.getLogger(__name__)

# TF's op errors read "{{function_node ...}} reason [Op:Name] name: ...".
_TF_ERROR_NOISE = re.compile(r"^\{\{[^}]*\}\}\s*|\s*\[Op:.*$")


def _check_positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1; received {value!r}.")


def _decode_file(path, image_size):
    """A float32 `[image_size, image_size, 3]` image in [0, 1] from a file."""
    return decode_image_bytes(tf.io.read_file(path), image_size)


def decode_image_bytes(contents, image_size):
    """An encoded image (JPEG, PNG, GIF, BMP, WebP bytes), as training reads it.

    TensorFlow ops only, so that an exported SavedModel prepares an image
    exactly as `make_caption_dataset` and `load_image` do.

    Args:
        contents: a scalar string tensor, the bytes of an image file.
        image_size: int >= 1, the height and width to resize it to.

    Returns:
        A float32 tensor `[image_size, image_size, 3]` in [0, 1].
    """
    return resize_decoded_image(decode_image_pixels(contents), image_size)


def decode_image_pixels(contents):
    """The uint8 `[H, W, 3]` pixels of an encoded image, at the file's size
    (a GIF's first frame): the first half of `decode_image_bytes`."""
    return tf.io.decode_image(contents, channels=3, expand_animations=False)


def resize_decoded_image(image, image_size):
    """`decode_image_pixels`'s image as float32 `[image_size, image_size, 3]`
    in [0, 1]: the second half of `decode_image_bytes`."""
    image = tf.image.resize(image, [image_size, image_size], antialias=True)
    # Antialiased bilinear weights are non-negative, so this only guards
    # against rounding.
    return tf.clip_by_value(image / 255.0, 0.0, 1.0)


def _scale_array(image, image_size):
    """A uint8 `[H, W, 3]` image as float32 in [0, 1], resized if need be."""
    image = tf.cast(image, tf.float32) / 255.0
    if image.shape[0] != image_size or image.shape[1] != image_size:
        image = tf.image.resize(image, [image_size, image_size], antialias=True)
        image = tf.clip_by_value(image, 0.0, 1.0)
    return image


def _tf_reason(error):
    return _TF_ERROR_NOISE.sub("", error.message.strip().splitlines()[0])


def load_image(path, image_size):
    """Read one image file the way `make_caption_dataset` reads it.

    Args:
        path: str or path-like, a JPEG, PNG, GIF (first frame), BMP or WebP
            file.
        image_size: int >= 1, the height and width to resize it to.

    Returns:
        A float32 NumPy array `[image_size, image_size, 3]` in [0, 1].

    Raises:
        ImageError: (a `CorpusError`) the file is missing or cannot be
            decoded; the one-line message names the file.

    Example:

    >>> image = load_image("dog.jpg", 224)  # doctest: +SKIP
    >>> caption = model_caption(image[None])  # doctest: +SKIP
    """
    _check_positive("image_size", image_size)
    path = os.fspath(path)
    if not os.path.isfile(path):
        what = "is a folder, not an image" if os.path.isdir(path) else "no such file"
        raise ImageError(f"{path}: {what}.")
    try:
        return _decode_file(tf.constant(path), image_size).numpy()
    except tf.errors.OpError as error:
        raise ImageError(
            f"{path}: cannot be decoded as an image ({_tf_reason(error)})."
        ) from None


def find_unreadable_images(paths):
    """The files among `paths` that `tf.io.decode_image` cannot decode.

    Every distinct file is read and decoded once, in parallel; a missing
    file counts as unreadable.

    Args:
        paths: a sequence of str or path-like.

    Returns:
        A list of str, the unreadable paths, each once, in input order.

    Example:

    >>> find_unreadable_images(["ok.jpg", "truncated.jpg"])  # doctest: +SKIP
    ['truncated.jpg']
    """
    distinct = list(dict.fromkeys(os.fspath(path) for path in paths))
    if not distinct:
        return []

    def decodable(index, path):
        image = tf.io.decode_image(
            tf.io.read_file(path), channels=3, expand_animations=False
        )
        # An output of the decode (not a control dependency, which tf.data's
        # graph optimizer may prune with the decode itself).
        return index, tf.shape(image)

    checked = (
        tf.data.Dataset.from_tensor_slices((tf.range(len(distinct)), distinct))
        .map(decodable, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .ignore_errors()
    )
    readable = {int(index) for index, _ in checked.as_numpy_iterator()}
    return [path for i, path in enumerate(distinct) if i not in readable]


def _check_stack(stack):
    if stack.ndim != 4 or stack.shape[-1] != 3 or stack.dtype != np.uint8:
        raise ValueError(
            "images as arrays must be uint8 [H, W, 3] each ([N, H, W, 3] "
            f"together); received {stack.dtype} {list(stack.shape)}."
        )
    return stack


def _image_references(images):
    """`(references, stack)`: per caption an index into the uint8 image
    stack, or per caption a file path and `stack=None`."""
    if isinstance(images, np.ndarray):
        return np.arange(len(images)), _check_stack(images)
    images = list(images)
    if images and all(isinstance(image, np.ndarray) for image in images):
        # A caller repeats the same array object once per caption; keep one
        # copy of each distinct object and an index per caption.
        slot = {}
        index = np.array([slot.setdefault(id(image), len(slot)) for image in images])
        distinct = list({id(image): image for image in images}.values())
        sizes = {image.shape for image in distinct}
        if len(sizes) != 1:
            raise ValueError(
                "images as arrays must all have one size; received "
                f"{sorted(sizes)[:3]}."
            )
        return index, _check_stack(np.stack(distinct))
    if not all(isinstance(image, (str, os.PathLike)) for image in images):
        raise ValueError(
            "images must be a uint8 array [N, H, W, 3], a list of uint8 arrays "
            "or a list of file paths."
        )
    return np.array([os.fspath(image) for image in images], dtype=object), None


def _with_bos_eos(ids):
    bos = tf.constant([BOS_ID], dtype=ids.dtype)
    eos = tf.constant([EOS_ID], dtype=ids.dtype)
    return tf.concat([bos, ids], 0), tf.concat([ids, eos], 0)


def _readable_files(paths):
    """A bool mask over `paths`: False where the file cannot be decoded."""
    unreadable = find_unreadable_images(paths)
    readable = ~np.isin(paths, unreadable)
    if not readable.any():
        raise ImageError(
            f"none of the {len(set(paths))} image files can be decoded "
            f"(first: {unreadable[0]})."
        )
    if unreadable:
        logger.warning(
            "make_caption_dataset: skipped %d unreadable image file(s) and "
            "their %d caption(s), e.g. %s.",
            len(unreadable),
            int((~readable).sum()),
            ", ".join(unreadable[:3]),
        )
    return readable


def _encode_captions(tokenizer, captions, keep, max_caption_length):
    """`(ids, keep)`: ragged int32 ids of the kept captions that fit, and
    `keep` narrowed to them."""
    ids = tokenizer.encode(captions)
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    fits = lengths > 0
    if max_caption_length is not None:
        fits &= lengths + 1 <= max_caption_length
    if (keep & ~fits).any():
        logger.info(
            "make_caption_dataset: left out %d of %d captions (no tokens or "
            "longer than max_caption_length=%s).",
            int((keep & ~fits).sum()),
            int(keep.sum()),
            max_caption_length,
        )
    keep = keep & fits
    if not keep.any():
        raise ValueError(
            f"no (image, caption) pair left of {len(captions)}: every caption is "
            "blank, too long for max_caption_length, or has an unreadable image."
        )
    kept_ids = [row for row, kept in zip(ids, keep) if kept]
    values = np.concatenate(kept_ids).astype(np.int32)
    return tf.RaggedTensor.from_row_lengths(values, lengths[keep]), keep


def make_caption_dataset(
    images,
    captions,
    tokenizer,
    image_size,
    batch_size,
    shuffle=False,
    seed=0,
    max_caption_length=None,
    epochs=None,
    drop_remainder=False,
    pad_to_max_length=False,
):
    """A `tf.data.Dataset` of images with teacher-forcing caption batches.

    One element per (image, caption) pair: a caller with several captions
    per image passes the image once per caption.

    Args:
        images: either a uint8 array `[N, H, W, 3]`, a list of N uint8
            arrays `[H, W, 3]` (each distinct array object is stored once,
            so repeating the same array for each caption costs no memory),
            or a list of N image file paths (str or path-like; decoded in
            the pipeline; unreadable files are left out, see the module
            docstring).
        captions: a list of N str, parallel to `images`.
        tokenizer: a `TextTokenizer`.
        image_size: int >= 1, the height and width of the images fed to the
            model (arrays of another size are resized).
        batch_size: int >= 1, the most pairs in a batch (the last batch of
            an epoch may have fewer).
        shuffle: bool, shuffle the pairs each epoch.
        seed: int, the shuffle seed: the same seed gives the same batches in
            the same order, epoch after epoch.
        max_caption_length: optional int >= 1, the most steps of `target_in`
            (caption tokens + 1); longer captions are left out. Captions
            with no tokens are always left out. The count is logged at INFO
            level.
        epochs: optional `range` of epoch numbers: the dataset then holds
            those epochs' batches back to back, each epoch in its own seeded
            order (see `zoo.data.pipeline.epoch_batches`), for
            `fit(..., steps_per_epoch=...)`. None: one epoch.
        drop_remainder: bool, leave out each epoch's last, smaller batch.
        pad_to_max_length: bool, pad every batch's captions to
            `max_caption_length` steps (which must be given), so that the
            batches have one shape: a compiled train step (XLA,
            `jit_compile=True`) compiles once per shape.

    Returns:
        A `tf.data.Dataset` with a known cardinality, of `({"image": float32
        [B, image_size, image_size, 3] in [0, 1], "target_in": int32 [B, T]},
        target_out int32 [B, T])`, T the batch's longest caption + 1 (or
        `max_caption_length` with `pad_to_max_length`).

    Raises:
        ValueError: bad arguments, or no pair is left.
        ImageError: no image file of the list can be decoded.

    Example:

    >>> examples = synthetic_captions(1000)
    >>> images = [e.image for e in examples for _ in e.captions]
    >>> captions = [c for e in examples for c in e.captions]
    >>> tokenizer = TextTokenizer.train(captions, 100)
    >>> dataset = make_caption_dataset(images, captions, tokenizer, 64, 32)
    >>> model.fit(dataset, epochs=10)  # doctest: +SKIP
    """
    _check_positive("image_size", image_size)
    _check_positive("batch_size", batch_size)
    if max_caption_length is not None:
        _check_positive("max_caption_length", max_caption_length)
    elif pad_to_max_length:
        raise ValueError("pad_to_max_length needs a max_caption_length.")
    if isinstance(captions, str):
        raise ValueError(
            "captions must be a list of str, one per image; received a str."
        )
    captions = [str(caption) for caption in captions]
    if not captions:
        raise ValueError("captions is empty; a dataset needs at least one pair.")
    references, stack = _image_references(images)
    if len(references) != len(captions):
        raise ValueError(
            f"images and captions must be parallel; received {len(references)} "
            f"images and {len(captions)} captions."
        )

    keep = np.ones(len(captions), dtype=bool)
    if stack is None:
        keep &= _readable_files(references)
    token_ids, keep = _encode_captions(tokenizer, captions, keep, max_caption_length)
    if stack is None:
        reference = tf.constant(references[keep].tolist(), dtype=tf.string)

        def load(path):
            return _decode_file(path, image_size)

    else:
        reference = tf.constant(references[keep], dtype=tf.int32)
        stack = tf.constant(stack)

        def load(index):
            return _scale_array(tf.gather(stack, index), image_size)

    def batch_epoch(pairs):
        pairs = pairs.map(
            lambda image, ids: (load(image), *_with_bos_eos(ids)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        caption_length = max_caption_length if pad_to_max_length else None
        pairs = pairs.padded_batch(
            batch_size,
            padded_shapes=([image_size, image_size, 3], [caption_length], [caption_length]),
            padding_values=(0.0, PAD_ID, PAD_ID),
            drop_remainder=drop_remainder,
        )
        return pairs.map(
            lambda image, target_in, target_out: (
                {"image": image, "target_in": target_in},
                target_out,
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    pairs = int(keep.sum())
    batches = pairs // batch_size if drop_remainder else -(-pairs // batch_size)
    dataset = epoch_batches(
        (reference, token_ids), batch_epoch, batches, shuffle, seed, epochs
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
