import numpy as np
import pytest
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from numpy_reference import PROBABILITY_FUNCTIONS
from numpy_reference import random_inputs

from zoo.layers import LocalAttention


def local_reference(
    layer,
    query,
    value,
    value_mask,
    *,
    mode,
    window,
    score,
    scale=False,
    step=0,
    probability_fn="softmax",
):
    """Luong et al. 2015, eqs. 9-10, with the dot score h_t^T h_s or the
    general score h_t^T W_a h_s; with `probability_fn="sparsemax"`,
    sparsemax in place of the softmax over the window.

    The configuration comes from the test's own arguments; only the weights
    are read from the layer.
    """
    if score == "dot":
        scores = query @ value.transpose(0, 2, 1)
    else:
        assert score == "general"
        scores = query @ (value @ to_numpy(layer.key_dense.kernel)).transpose(0, 2, 1)
    if scale:
        scores = scores * to_numpy(layer.attention_scale)
    batch, tq, tv = scores.shape
    if mode == "local-m":
        centres = np.broadcast_to(np.arange(tq, dtype="float64")[None, :] + step, (batch, tq))
    else:
        assert mode == "local-p"
        source_length = value_mask.sum(axis=1)[:, None]  # S, without padding
        hidden = np.tanh(query @ to_numpy(layer.position_dense.kernel))
        centres = source_length / (1 + np.exp(-(hidden @ to_numpy(layer.position_v))))
    distance = np.arange(tv)[None, None, :] - centres[:, :, None]
    in_window = np.abs(distance) <= window
    weights = PROBABILITY_FUNCTIONS[probability_fn](scores, in_window & value_mask[:, None, :])
    if mode == "local-p":
        sigma = window / 2
        weights = weights * np.exp(-(distance**2) / (2 * sigma**2))
    return weights @ value, weights, in_window


@pytest.mark.parametrize("probability_fn", ["softmax", "sparsemax"])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("mode", ["local-m", "local-p"])
def test_matches_the_papers_formula(mode, scale, probability_fn):
    query, value = random_inputs(query_length=5, value_length=9, query_depth=4, value_depth=6)
    value_mask = lengths_to_mask([9, 5, 2], 9)
    layer = LocalAttention(
        mode=mode, window=2, score="general", scale=scale, probability_fn=probability_fn
    )
    layer.build(query.shape, value.shape)
    for weight in layer.weights:  # a scale other than its initial 1 must show
        if weight.path.endswith("attention_scale"):
            weight.assign(0.7)
    context, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    expected_context, expected_weights, in_window = local_reference(
        layer,
        query,
        value,
        value_mask,
        mode=mode,
        window=2,
        score="general",
        scale=scale,
        probability_fn=probability_fn,
    )
    weights = to_numpy(weights)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected_context, rtol=1e-5, atol=1e-5)
    outside = ~(in_window & value_mask[:, None, :])
    assert np.all(weights[outside] == 0), "a position outside the window or padded got weight"
    assert np.any(weights > 0)


def test_local_p_centres_stay_within_the_true_source_length():
    query, value = random_inputs(query_length=6, value_length=10, query_depth=4, value_depth=4)
    value_mask = lengths_to_mask([10, 4, 7], 10)
    layer = LocalAttention(mode="local-p", window=1, score="dot")
    layer(query, value, value_mask=value_mask)
    centres = to_numpy(layer.window_centres(query, value_mask, 10))[..., 0]
    assert np.all(centres >= 0)
    assert np.all(centres <= value_mask.sum(axis=1)[:, None])


def test_local_m_step_moves_the_window():
    query, value = random_inputs(query_length=1, value_length=9, query_depth=4, value_depth=4)
    value_mask = np.ones((3, 9), bool)
    layer = LocalAttention(mode="local-m", window=1, score="dot")
    weights = to_numpy(
        layer(query[:, 0], value, value_mask=value_mask, step=6, return_attention_scores=True)[1]
    )
    assert weights.shape == (3, 9)
    assert np.all(weights[:, [5, 6, 7]] > 0)
    assert np.all(np.delete(weights, [5, 6, 7], axis=1) == 0)
    _, expected, _ = local_reference(
        layer, query, value, value_mask, mode="local-m", window=1, score="dot", step=6
    )
    np.testing.assert_allclose(weights, expected[:, 0], rtol=1e-5, atol=1e-6)


def test_local_m_single_step_needs_the_step():
    query, value = random_inputs(query_depth=7, value_depth=7)
    with pytest.raises(ValueError, match="step"):
        LocalAttention(mode="local-m", score="dot")(query[:, 0], value)


@pytest.mark.parametrize("mode", ["local-m", "local-p"])
def test_common_layer_checks(mode, tmp_path):
    query, value = random_inputs(batch=2, query_length=4, value_length=6)
    check_layer(
        lambda **kw: LocalAttention(mode=mode, window=2, score="concat", units=4, **kw),
        query,
        value,
        tmp_path,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "local-q"}, "mode"),
        ({"window": 0}, "window"),
        ({"window": -3}, "window"),
        ({"score": "cosine"}, "score"),
        ({"mode": "local-m", "position_units": 4}, "position_units"),
        ({"probability_fn": "hardmax"}, "probability_fn"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocalAttention(**kwargs)
