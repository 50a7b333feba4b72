"""Image files read and resized as `zoo.data.load_image` does, with Pillow
and NumPy."""

import io
import os

import numpy as np

from .layout import DEFAULT_LIMITS
from .layout import InputError
from .layout import MissingPackageError
from .layout import RequestTooLarge


# The file formats `tf.io.decode_image` reads, by Pillow's names: no other.
IMAGE_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP")

# Pillow's modes of a 16-bit grayscale PNG.
_SIXTEEN_BIT_GRAY = ("I;16", "I;16B", "I;16L", "I;16N", "I")


def load_image(path, image_size, limits=None):
    """An image file as float32 `[image_size, image_size, 3]` in [0, 1], as
    `zoo.data.load_image` reads it; `limits` (the manifest's) bound the
    file's bytes and the decoded image's side (`RequestTooLarge`).

    See `load_image_bytes` for what is equal to TensorFlow's reading.

    Args:
        path: str or path-like, a JPEG, PNG, GIF (first frame), BMP or WebP
            file.
        image_size: int >= 1, the height and width to resize it to.
        limits: a dict with `max_image_bytes` and `max_image_side` (a
            manifest's `limits`); missing entries, or None, take
            `DEFAULT_LIMITS`; an entry None is no limit.

    Raises:
        InputError: the file is missing or cannot be decoded.
        RequestTooLarge: the file or the image is over a limit.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        what = "is a folder, not an image" if os.path.isdir(path) else "no such file"
        raise InputError(f"{path}: {what}")
    _check_image_bytes(os.path.getsize(path), limits, path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    return load_image_bytes(data, image_size, limits, name=path)


def load_image_bytes(data, image_size, limits=None, name="the image"):
    """An image file's contents as float32 `[image_size, image_size, 3]` in
    [0, 1], as `zoo.data.caption_pipeline.decode_image_bytes` makes it.

    Pillow decodes it (the first frame of a GIF; three channels: alpha
    dropped, gray repeated; a 16-bit PNG by its high byte, as
    `tf.io.decode_image`), and the resize is TensorFlow's `tf.image.resize(
    ..., antialias=True)` written in NumPy: the triangle kernel of
    ScaleAndTranslate, widened by the scale's inverse when it shrinks. For
    PNG, GIF, BMP and lossless WebP the pixels are TensorFlow's, and the
    result equals TensorFlow's to 1e-5. A JPEG's do not quite:
    `tf.io.decode_image` runs libjpeg's fast integer DCT, Pillow the
    accurate one (its pixels are exactly `tf.io.decode_jpeg(...,
    dct_method="INTEGER_ACCURATE")`'s), so a pixel can differ by a few
    units of 255; the resized image stays within the tests' JPEG_TOLERANCE
    of TensorFlow's (`tests/zoo/export/test_onnx_runner_text.py`).

    Args:
        data: bytes, the contents of an image file.
        image_size: int >= 1, the height and width to resize it to.
        limits: see `load_image`.
        name: what to call the image in error messages (its file).

    Raises:
        InputError: the bytes cannot be decoded as an image.
        RequestTooLarge: the bytes or the image are over a limit.
    """
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1:
        raise ValueError(f"image_size must be an int >= 1; received {image_size!r}.")
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    data = bytes(data)
    _check_image_bytes(len(data), limits, name)
    try:
        from PIL import Image
    except ImportError:
        raise MissingPackageError(
            f"reading {name} needs Pillow, which is not installed: pip install pillow"
        ) from None
    try:
        image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
        width, height = image.size  # read from the header: nothing decoded yet
    except Image.DecompressionBombError as error:
        raise RequestTooLarge(f"{name}: over Pillow's pixel limit ({error})") from None
    except Exception as error:  # Pillow raises many kinds for a bad file
        raise InputError(f"{name}: cannot be decoded as an image ({_reason(error)})") from None
    side = limits["max_image_side"]
    if side is not None and max(width, height) > side:
        raise RequestTooLarge(
            f"{name}: the image is {width}x{height} pixels (width x height), over the "
            f"limit max_image_side={side} (the export's limits); send a smaller image"
        )
    try:
        pixels = _rgb_pixels(image)
    except Exception as error:  # truncated or corrupt pixel data
        raise InputError(f"{name}: cannot be decoded as an image ({_reason(error)})") from None
    resized = _resize_antialiased(pixels, image_size)
    return np.clip(resized / np.float32(255.0), 0.0, 1.0).astype("float32")


def _check_image_bytes(size, limits, name):
    limit = {**DEFAULT_LIMITS, **(limits or {})}["max_image_bytes"]
    if limit is not None and size > limit:
        raise RequestTooLarge(
            f"{name}: {size} bytes is over the limit max_image_bytes={limit} "
            "(the export's limits); send a smaller file"
        )


def _reason(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _rgb_pixels(image):
    """uint8 `[H, W, 3]` of a Pillow image's first frame, as
    `tf.io.decode_image(channels=3)` gives them."""
    if image.format == "GIF":
        return _gif_first_frame(image)
    image.load()
    if image.mode in _SIXTEEN_BIT_GRAY:
        # TensorFlow keeps the high byte (libpng's strip_16); Pillow's own
        # conversion would clip the 16-bit values to 255.
        gray = (np.asarray(image).astype("int64") >> 8).clip(0, 255).astype("uint8")
        return np.repeat(gray[:, :, None], 3, axis=2)
    return np.asarray(image.convert("RGB"))


def _gif_first_frame(image):
    """A GIF's first frame as TensorFlow's decoder gives it: a canvas of the
    frame's own size (not the screen's), the frame drawn at its offset on
    it, and black where the frame is transparent or does not reach."""
    left, top, right, bottom = image.tile[0][1]  # the frame's extent, before load
    image.load()
    screen = np.asarray(image.convert("RGB")).copy()
    if image.mode in ("P", "L") and "transparency" in image.info:
        screen[np.asarray(image) == image.info["transparency"]] = 0
    height, width = bottom - top, right - left
    canvas = np.zeros((height, width, 3), "uint8")
    frame = screen[top:bottom, left:right]
    canvas[top:, left:] = frame[: max(height - top, 0), : max(width - left, 0)]
    return canvas


def _resize_spans(input_size, output_size):
    """`(index, weights)`, each `[output_size, span]`: the sources of each
    output pixel and their weights, as TensorFlow's ScaleAndTranslate
    computes them for `tf.image.resize(antialias=True)` (bilinear: the
    triangle kernel of radius 1; no translation), in float32 as it does."""
    f32 = np.float32
    inverse_scale = f32(1.0) / (f32(output_size) / f32(input_size))
    # Shrinking widens the kernel by 1/scale: each output averages all the
    # pixels it covers, not just its two neighbours.
    kernel_scale = max(inverse_scale, f32(1.0))
    sample = (np.arange(output_size, dtype=f32) + f32(0.5)) * inverse_scale
    start = np.clip(np.ceil(sample - kernel_scale - f32(0.5)), 0, input_size - 1).astype("int64")
    end = np.clip(np.floor(sample + kernel_scale - f32(0.5)), 0, input_size - 1).astype("int64") + 1
    span = int((end - start).max())
    index = start[:, None] + np.arange(span)
    position = (index.astype(f32) + f32(0.5) - sample[:, None]) / kernel_scale
    weights = np.where(index < end[:, None], np.maximum(f32(0.0), f32(1.0) - np.abs(position)), f32(0.0))
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(f32)
    return np.minimum(index, input_size - 1), weights


def _resize_antialiased(pixels, size):
    """uint8 `[H, W, 3]` -> float32 `[size, size, 3]` in [0, 255]:
    `tf.image.resize(pixels, [size, size], antialias=True)`."""
    rows_index, rows_weights = _resize_spans(pixels.shape[0], size)
    columns_index, columns_weights = _resize_spans(pixels.shape[1], size)
    # Rows first, then columns, as TensorFlow; one span offset at a time, so
    # that a large image is never copied whole as floats.
    rows = np.zeros((size, pixels.shape[1], 3), "float32")
    for k in range(rows_index.shape[1]):
        rows += rows_weights[:, k, None, None] * pixels[rows_index[:, k]]
    resized = np.zeros((size, size, 3), "float32")
    for k in range(columns_index.shape[1]):
        resized += columns_weights[None, :, k, None] * rows[:, columns_index[:, k]]
    return resized
