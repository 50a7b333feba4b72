"""Plots: the alignment matrix of an attentional decoder as a heat map.

Uses `matplotlib.figure.Figure` with the Agg canvas directly, never pyplot, so
that plotting from a script, a test or a notebook neither needs a display nor
changes the user's interactive matplotlib backend, and no figure is left
registered in pyplot's global state. Pure Python and numpy: no tensorflow,
jax or torch.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Inches per token along each axis, and the fixed margin for the colour bar
# and tick labels: the cells stay square and readable for 5 or 50 tokens.
_INCHES_PER_TOKEN = 0.35
_MARGIN_INCHES = 1.5
_DPI = 100


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
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_atomically(figure, path)
    return path


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


def _save_atomically(figure, path):
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as stream:
            figure.savefig(
                stream, format="png", bbox_inches="tight", pad_inches=0.1
            )
        # mkstemp creates the file private (0600); a plot is meant to be shared.
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
