"""zoo.evaluation.plots: the alignment heat map PNG and the caption attention figure.

Pure matplotlib and numpy, so the suite runs it once, not per backend.
"""

import matplotlib
import matplotlib.image
import numpy as np
import pytest

from zoo.evaluation import plots
from zoo.evaluation.plots import plot_alignment
from zoo.evaluation.plots import plot_caption_attention

pytestmark = pytest.mark.backend_independent

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _diagonal(n_target, n_source):
    weights = np.full((n_target, n_source), 0.02)
    for i in range(n_target):
        weights[i, min(i, n_source - 1)] = 1.0
    return weights / weights.sum(axis=1, keepdims=True)


def _tokens(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


def _grey(path):
    pixels = matplotlib.image.imread(path)
    return pixels[..., :3].mean(axis=-1)


def test_writes_a_valid_png_and_creates_the_folder(tmp_path):
    target = tmp_path / "new" / "folder" / "alignment.png"
    backend_before = matplotlib.get_backend()
    written = plot_alignment(
        _diagonal(5, 6), _tokens("s", 6), _tokens("t", 5), target, title="RNNsearch"
    )
    assert written == target
    assert target.read_bytes()[:8] == PNG_MAGIC
    grey = _grey(target)
    assert grey.ndim == 2 and min(grey.shape) > 100
    # A real picture: black cells, white cells and the grey of the labels.
    assert grey.min() < 0.1 and grey.max() > 0.9 and grey.std() > 0.1
    # Plotting did not switch the user's interactive backend.
    assert matplotlib.get_backend() == backend_before


def test_image_aspect_follows_the_matrix(tmp_path):
    wide = _grey(
        plot_alignment(_diagonal(2, 16), _tokens("s", 16), _tokens("t", 2),
                       tmp_path / "wide.png")
    )
    tall = _grey(
        plot_alignment(_diagonal(16, 2), _tokens("s", 2), _tokens("t", 16),
                       tmp_path / "tall.png")
    )
    assert wide.shape[1] > 1.5 * wide.shape[0]
    assert tall.shape[0] > 1.5 * tall.shape[1]


def test_white_means_weight_one(tmp_path):
    # Same layout, all weights 1 versus all 0: the heat map of ones is white,
    # so that image holds far fewer black pixels.
    shape, source, target = (6, 6), _tokens("s", 6), _tokens("t", 6)
    ones = _grey(plot_alignment(np.ones(shape), source, target, tmp_path / "1.png"))
    zeros = _grey(plot_alignment(np.zeros(shape), source, target, tmp_path / "0.png"))
    assert ones.shape == zeros.shape
    black_ones, black_zeros = (ones < 0.1).mean(), (zeros < 0.1).mean()
    assert black_zeros > black_ones + 0.2


def test_tokens_are_plain_text_not_tex(tmp_path):
    # An odd "$" would be a mathtext parse error if labels were parsed as TeX.
    path = plot_alignment(
        np.full((2, 3), 1 / 3), ["costs", "$5", "a_b^c"], ["coûte", "5$"],
        tmp_path / "money.png", title="price in $",
    )
    assert path.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    "shape, match",
    [
        ((3, 4), r"\[4, 3\]; received shape \[3, 4\]"),  # transposed
        ((4,), r"received shape \[4\]"),
        ((4, 3, 1), r"received shape \[4, 3, 1\]"),
    ],
)
def test_shape_mismatch_raises_and_writes_nothing(tmp_path, shape, match):
    with pytest.raises(ValueError, match=match):
        plot_alignment(np.zeros(shape), _tokens("s", 3), _tokens("t", 4),
                       tmp_path / "bad.png")
    assert list(tmp_path.iterdir()) == []


def test_non_finite_weights_raise(tmp_path):
    weights = np.array([[0.5, np.nan]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        plot_alignment(weights, ["a", "b"], ["x"], tmp_path / "nan.png")
    with pytest.raises(ValueError, match="at least one"):
        plot_alignment(np.zeros((0, 0)), [], [], tmp_path / "empty.png")


def test_overwrite_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "alignment.png"
    plot_alignment(np.zeros((2, 2)), ["a", "b"], ["x", "y"], path)
    plot_alignment(_diagonal(2, 2), ["a", "b"], ["x", "y"], path)
    assert [p.name for p in tmp_path.iterdir()] == ["alignment.png"]


def test_failed_write_keeps_the_old_png_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "alignment.png"
    plot_alignment(np.zeros((2, 2)), ["a", "b"], ["x", "y"], path)
    before = path.read_bytes()

    def broken_savefig(self, *args, **kwargs):
        args[0].write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):
        plot_alignment(_diagonal(2, 2), ["a", "b"], ["x", "y"], path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["alignment.png"]


# ---------------------------------------------------------------- captions


def _scene(height=48, width=64):
    """A mid-grey float image, so a bright overlay shows above it."""
    return np.full((height, width, 3), 0.5)


def _peaked_maps(n_words, cell, grid=(4, 4)):
    maps = np.full((n_words, *grid), 0.01)
    maps[:, cell[0], cell[1]] = 1.0
    return maps / maps.sum(axis=(1, 2), keepdims=True)


def test_caption_figure_is_the_image_then_one_panel_per_word(tmp_path):
    target = tmp_path / "new" / "caption.png"
    words = "a red circle".split()
    backend_before = matplotlib.get_backend()
    written = plot_caption_attention(
        _scene(), words, _peaked_maps(3, (0, 0)), target, title="Show, Attend and Tell"
    )
    assert written == target
    assert target.read_bytes()[:8] == PNG_MAGIC
    one_row = _grey(target)
    # Image + 3 words: 4 panels side by side.
    assert one_row.shape[1] > 2.5 * one_row.shape[0]
    assert matplotlib.get_backend() == backend_before


def test_long_captions_wrap_to_several_rows(tmp_path):
    words = [f"w{i}" for i in range(6)]  # 7 panels: rows of 5 and 2
    uint8_image = np.full((48, 64, 3), 128, dtype=np.uint8)
    wrapped = _grey(
        plot_caption_attention(uint8_image, words, _peaked_maps(6, (1, 1)),
                               tmp_path / "long.png")
    )
    one_row = _grey(
        plot_caption_attention(uint8_image, words[:4], _peaked_maps(4, (1, 1)),
                               tmp_path / "short.png")
    )
    # Same width (5 panels a row), twice the height.
    assert wrapped.shape[1] == pytest.approx(one_row.shape[1], rel=0.05)
    assert wrapped.shape[0] == pytest.approx(2 * one_row.shape[0], rel=0.15)


def _bright_centroid(brighter, darker):
    """Centre (row, column) of the pixels where `brighter` exceeds `darker`."""
    gain = np.clip(brighter - darker, 0.0, None)
    rows, columns = np.indices(gain.shape)
    return (rows * gain).sum() / gain.sum(), (columns * gain).sum() / gain.sum()


def test_overlay_is_bright_where_the_word_attends(tmp_path):
    # One word, so the image's panel, the word's and the colour bar run
    # left to right, the image in the first third. Attention on
    # the top-left cell versus the bottom-right cell: the only difference
    # between the two PNGs is the overlay, brighter where the weight is high;
    # row 0 of the map is the top of the image.
    top_left = _grey(plot_caption_attention(
        _scene(), ["circle"], _peaked_maps(1, (0, 0)), tmp_path / "tl.png"))
    bottom_right = _grey(plot_caption_attention(
        _scene(), ["circle"], _peaked_maps(1, (3, 3)), tmp_path / "br.png"))
    assert top_left.shape == bottom_right.shape
    width = top_left.shape[1]
    # The image panel is the same in both.
    np.testing.assert_allclose(top_left[:, : width // 3], bottom_right[:, : width // 3])
    row_tl, column_tl = _bright_centroid(top_left, bottom_right)
    row_br, column_br = _bright_centroid(bottom_right, top_left)
    assert column_tl > width / 3 and column_br > width / 3
    assert row_tl < row_br and column_tl < column_br


def test_every_word_shares_one_colour_scale_shown_by_a_colour_bar(tmp_path):
    # A word that looks everywhere alike (weights 1/16) beside one that
    # looks at one cell: on one shared scale the first shows faint, nearly
    # the bare image, where a scale of its own would paint it all at full.
    focused = _peaked_maps(1, (0, 0))[0]
    maps = np.stack([focused, np.full((4, 4), 1 / 16)])
    blank = np.stack([focused, np.zeros((4, 4))])
    spread, bare = (
        _grey(plot_caption_attention(_scene(), ["here", "everywhere"], m, tmp_path / f"{i}.png"))
        for i, m in enumerate((maps, blank))
    )
    assert spread.shape == bare.shape
    assert np.abs(spread - bare).max() < 0.1

    figure = plots._caption_attention_figure(_scene(), ["here", "everywhere"], maps, None)
    image_axes, *word_axes, colour_bar = figure.axes
    assert image_axes.get_title() == "image"
    assert [axes.get_title() for axes in word_axes] == ["here", "everywhere"]
    assert {axes.images[-1].get_clim() for axes in word_axes} == {(0.0, focused.max())}
    assert colour_bar.get_ylabel() == "attention weight"


@pytest.mark.parametrize(
    "image, words, maps, match",
    [
        (np.zeros((48, 64)), ["a"], np.ones((1, 4, 4)),
         r"image must have shape \[H, W, 3\]; received shape \[48, 64\]"),
        (np.full((8, 8, 3), 2.0), ["a"], np.ones((1, 4, 4)), r"values in \[0, 1\]"),
        (np.zeros((8, 8, 3), dtype=np.int64), ["a"], np.ones((1, 4, 4)),
         "uint8 or float"),
        (np.zeros((8, 8, 3)), ["a", "b"], np.ones((3, 4, 4)),
         r"\[2, h, w\]; received shape \[3, 4, 4\]"),
        (np.zeros((8, 8, 3)), ["a"], np.ones((1, 16)), r"received shape \[1, 16\]"),
        (np.zeros((8, 8, 3)), ["a"], np.full((1, 2, 2), np.nan), "NaN or infinite"),
        (np.zeros((8, 8, 3)), [], np.ones((0, 4, 4)), "at least one word"),
    ],
)
def test_caption_attention_bad_input_raises_and_writes_nothing(
    tmp_path, image, words, maps, match
):
    with pytest.raises(ValueError, match=match):
        plot_caption_attention(image, words, maps, tmp_path / "bad.png")
    assert list(tmp_path.iterdir()) == []


def test_caption_attention_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def broken_savefig(self, *args, **kwargs):
        args[0].write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):
        plot_caption_attention(_scene(), ["a"], np.ones((1, 2, 2)),
                               tmp_path / "caption.png")
    assert list(tmp_path.iterdir()) == []
