"""Plots: the alignment matrix of an attentional decoder as a heat map, and
the attention of a captioning decoder over the image, word by word.

Uses `matplotlib.figure.Figure` with the Agg canvas directly, never pyplot, so
that plotting from a script, a test or a notebook neither needs a display nor
changes the user's interactive matplotlib backend, and no figure is left
registered in pyplot's global state. Pure Python and numpy: no tensorflow,
jax or torch.
"""

from __future__ import annotations

import pathlib

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from zoo import files
from zoo.errors import ZooUserError

# Inches per token along each axis, and the fixed margin for the colour bar
# and tick labels: the cells stay square and readable for 5 or 50 tokens.
_INCHES_PER_TOKEN = 0.35
_MARGIN_INCHES = 1.5
_DPI = 100
# Caption attention figure: inches per panel side, and panels per row before
# the figure wraps (the image plus four words, as in the paper's figures).
_PANEL_INCHES = 2.0
_PANELS_PER_ROW = 5
# The attention overlay: its colour map, and its opacity at the largest
# weight (less where the weight is less).
_ATTENTION_COLOURS = "inferno"
_OVERLAY_ALPHA = 0.85
# Room for the caption figure's colour bar.
_COLOUR_BAR_INCHES = 0.8


def plot_alignment(weights, source_tokens, target_tokens, path, title=None):
    """Writes the alignment matrix as a grey-scale heat map PNG.

    As in Figure 3 of Bahdanau et al. (2014), each cell (i, j) shows the
    weight alpha_ij of source word j when target word i was produced, in grey
    scale with 0 = black and 1 = white (the colour bar is fixed to [0, 1], so
    plots of different sentences and models compare directly). Source words
    run along the top x axis, rotated, and target words down the y axis, as
    in the paper.

    The PNG is written to a temporary file in the same folder and moved into
    place with `os.replace`, so a failure never leaves a half-written PNG at
    `path`; the parent folder is created if missing.

    Args:
        weights: array-like of shape `[len(target_tokens), len(source_tokens)]`,
            the attention weights (a NumPy array, or anything `np.asarray`
            accepts, such as a CPU tensor).
        source_tokens: sequence of str, the source words (x axis).
        target_tokens: sequence of str, the target words (y axis).
        path: str or path-like, where to write the PNG.
        title: optional str, written above the plot.

    Returns:
        `pathlib.Path`, the path of the written PNG.

    Raises:
        ValueError: `weights` is not 2-D, its shape does not match the token
            lists, a token list is empty, or a weight is NaN or infinite.
        PlotPathError: `path` is a folder, or its folder can't be created.

    Example:

    >>> weights = decoded["attention"][0]        # [target_len, source_len]
    >>> plot_alignment(weights, source.split(), translation.split(),
    ...                "runs/rnnsearch/alignment_0.png")  # doctest: +SKIP
    """
    source_tokens = [str(token) for token in source_tokens]
    target_tokens = [str(token) for token in target_tokens]
    weights = np.asarray(weights, dtype=np.float64)
    expected = (len(target_tokens), len(source_tokens))
    if weights.ndim != 2 or weights.shape != expected:
        raise ValueError(
            "weights must have shape [len(target_tokens), len(source_tokens)] = "
            f"{list(expected)}; received shape {list(weights.shape)}."
        )
    if not source_tokens or not target_tokens:
        raise ValueError(
            "plot_alignment needs at least one source and one target token; "
            f"received {len(source_tokens)} source and {len(target_tokens)} "
            "target tokens."
        )
    if not np.all(np.isfinite(weights)):
        raise ValueError(
            "weights contain NaN or infinite values; attention weights must be "
            "finite (check the model's masking)."
        )

    figure = _alignment_figure(weights, source_tokens, target_tokens, title)
    path = prepare_output(path)
    _save_atomically(figure, path)
    return path


def plot_caption_attention(image, words, attention_maps, path, title=None):
    """Writes the image and, per generated word, where the decoder looked.

    The figure of Xu et al. (2015, Figures 2 and 3): the image (titled
    "image"), then one panel per word of the caption, titled with the word:
    the image in grey under that word's attention map, upsampled smoothly
    (bilinear) to the image, in colour (`_ATTENTION_COLOURS`) that is opaque
    where the weight is high and clear where it is low. Every word shares
    one colour scale, from 0 to the largest weight of the caption, shown by
    the colour bar, so that maps compare across words. Row i of a map is
    the i-th band of the image from the top. Panels run left to right and
    wrap after `_PANELS_PER_ROW` per row.

    The PNG is written atomically, as by `plot_alignment`.

    Args:
        image: array-like `[H, W, 3]`, uint8, or float in [0, 1].
        words: sequence of str, the generated caption, one word per step.
        attention_maps: array-like `[len(words), h, w]`, each step's weights
            over the feature grid (e.g. the decoder's attention `[T, h * w]`
            reshaped to the grid).
        path: str or path-like, where to write the PNG.
        title: optional str, written above the figure.

    Returns:
        `pathlib.Path`, the path of the written PNG.

    Raises:
        ValueError: the image is not `[H, W, 3]` uint8 or float in [0, 1],
            there are no words, the maps are not `[len(words), h, w]`, or a
            weight is NaN or infinite.

    Example:

    >>> result = greedy_caption(model, image[None])          # doctest: +SKIP
    >>> maps = result["attention"][0].reshape(-1, 8, 8)      # doctest: +SKIP
    >>> plot_caption_attention(image, caption.split(), maps,
    ...                        "runs/sat/attention_0.png")   # doctest: +SKIP

    References:
        Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption
        Generation with Visual Attention", https://arxiv.org/abs/1502.03044.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[-1] != 3 or 0 in image.shape:
        raise ValueError(
            f"image must have shape [H, W, 3]; received shape {list(image.shape)}."
        )
    if image.dtype != np.uint8:
        if not np.issubdtype(image.dtype, np.floating):
            raise ValueError(
                f"image must be uint8 or float in [0, 1]; received dtype {image.dtype}."
            )
        if not (np.all(np.isfinite(image)) and image.min() >= 0 and image.max() <= 1):
            raise ValueError("A float image must have values in [0, 1].")
    words = [str(word) for word in words]
    if not words:
        raise ValueError("plot_caption_attention needs at least one word; received 0.")
    maps = np.asarray(attention_maps, dtype=np.float64)
    if maps.ndim != 3 or maps.shape[0] != len(words) or 0 in maps.shape:
        raise ValueError(
            f"attention_maps must have shape [len(words), h, w] = [{len(words)}, h, w]; "
            f"received shape {list(maps.shape)}."
        )
    if not np.all(np.isfinite(maps)):
        raise ValueError(
            "attention_maps contain NaN or infinite values; attention weights must "
            "be finite (check the model's masking)."
        )

    figure = _caption_attention_figure(image, words, maps, title)
    path = prepare_output(path)
    _save_atomically(figure, path)
    return path


def _caption_attention_figure(image, words, maps, title):
    n_panels = 1 + len(words)
    columns = min(n_panels, _PANELS_PER_ROW)
    rows = -(-n_panels // columns)
    figure = Figure(
        figsize=(_PANEL_INCHES * columns + _COLOUR_BAR_INCHES, _PANEL_INCHES * rows),
        dpi=_DPI,
        layout="constrained",
    )
    FigureCanvasAgg(figure)
    height, width = image.shape[:2]
    # The map's cells tile the whole image: cell (0, 0) is the top-left.
    extent = (0, width, height, 0)
    axes = figure.add_subplot(rows, columns, 1)
    axes.imshow(image, extent=extent)
    axes.set_title("image")
    axes.set_axis_off()
    # In grey beneath the maps, so that the colour is the attention alone.
    grey = _luminance(image)
    # One scale for every word, so that a word that looks at the whole image
    # shows faint and a word that looks at one place shows bright.
    norm = Normalize(vmin=0.0, vmax=max(maps.max(), np.finfo(np.float64).tiny))
    word_axes = []
    for panel, (word, attention) in enumerate(zip(words, maps), start=2):
        axes = figure.add_subplot(rows, columns, panel)
        axes.imshow(grey, cmap="gray", vmin=0.0, vmax=1.0, extent=extent)
        overlay = axes.imshow(
            attention,
            cmap=_ATTENTION_COLOURS,
            norm=norm,
            # Opaque where the weight is high, clear where it is low: the
            # image stays visible wherever the word does not look.
            alpha=_OVERLAY_ALPHA * norm(attention),
            interpolation="bilinear",
            extent=extent,
        )
        axes.set_title(word, parse_math=False)
        axes.set_axis_off()
        word_axes.append(axes)
    figure.colorbar(overlay, ax=word_axes, fraction=0.05, pad=0.02, label="attention weight")
    if title is not None:
        figure.suptitle(str(title), parse_math=False)
    return figure


def _luminance(image):
    """The grey level in [0, 1] of each pixel of a uint8 or [0, 1] image."""
    image = image / 255.0 if image.dtype == np.uint8 else image
    return image @ np.array([0.299, 0.587, 0.114])


def _alignment_figure(weights, source_tokens, target_tokens, title):
    n_target, n_source = weights.shape
    figure = Figure(
        figsize=(
            _MARGIN_INCHES + _INCHES_PER_TOKEN * n_source,
            _MARGIN_INCHES + _INCHES_PER_TOKEN * n_target,
        ),
        dpi=_DPI,
        layout="constrained",
    )
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    image = axes.imshow(
        weights,
        cmap="gray",
        vmin=0.0,
        vmax=1.0,
        interpolation="nearest",
        aspect="equal",
    )
    # parse_math=False: tokens such as "$5" or "a_b" are words, not TeX.
    axes.set_xticks(
        range(n_source), labels=source_tokens, rotation=90, parse_math=False
    )
    axes.set_yticks(range(n_target), labels=target_tokens, parse_math=False)
    axes.xaxis.tick_top()
    axes.tick_params(length=0)
    figure.colorbar(image, ax=axes, fraction=0.05, pad=0.02)
    if title is not None:
        axes.set_title(str(title), parse_math=False)
    return figure


class PlotPathError(ZooUserError):
    """A plot's path can't be written: its folder can't be made, or it is a folder."""


def prepare_output(path):
    """Makes the folder of the PNG `path` and returns it as a `Path`.

    Called before the work whose result is plotted (the command line does),
    a bad path fails at once with a one-line error rather than after it.

    Raises:
        PlotPathError: the folder can't be created, or `path` is a folder.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        raise PlotPathError(f"--plot {str(path)!r} is a folder; name a .png file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PlotPathError(
            f"cannot create the folder of --plot {str(path)!r}: {error.strerror}; "
            "choose another path"
        ) from None
    return path


def _save_atomically(figure, path):
    with files.replacing(path) as temporary, open(temporary, "wb") as stream:
        figure.savefig(stream, format="png", bbox_inches="tight", pad_inches=0.1)
