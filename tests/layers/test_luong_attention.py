import numpy as np
import pytest
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from numpy_reference import PROBABILITY_FUNCTIONS
from numpy_reference import masked_softmax
from numpy_reference import random_inputs

from zoo.layers import LuongAttention


def luong_scores(layer, query, key, *, score, units, scale):
    """h_t^T h_s, h_t^T W_a h_s, or v_a^T tanh(W_a [h_t; h_s]), times the
    learned scale with `scale`.

    The configuration comes from the test's own arguments; only the weights
    are read from the layer.
    """
    if score == "dot":
        scores = query @ key.transpose(0, 2, 1)
    elif score == "general":
        w_a = to_numpy(layer.key_dense.kernel)
        assert w_a.shape == (key.shape[-1], query.shape[-1])
        scores = query @ (key @ w_a).transpose(0, 2, 1)
    else:
        # W_a [h_t; h_s] with W_a the two kernels stacked.
        w_a = np.concatenate(
            [to_numpy(layer.query_dense.kernel), to_numpy(layer.key_dense.kernel)], axis=0
        )
        assert w_a.shape == (query.shape[-1] + key.shape[-1], units or query.shape[-1])
        tq, tv = query.shape[1], key.shape[1]
        pairs = np.concatenate(
            [
                np.repeat(query[:, :, None, :], tv, axis=2),
                np.repeat(key[:, None, :, :], tq, axis=1),
            ],
            axis=-1,
        )
        scores = np.tanh(pairs @ w_a) @ to_numpy(layer.attention_v)
    if scale:
        scores = scores * to_numpy(layer.attention_scale)
    return scores


def move_scales_off_one(layer):
    """A scale other than its initial 1 must show in the scores: set every
    scale weight the layer has to 0.7, whether or not it should have one."""
    for weight in layer.weights:
        if weight.path.endswith("attention_scale"):
            weight.assign(0.7)


@pytest.mark.parametrize("probability_fn", ["softmax", "sparsemax"])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_matches_the_papers_formula(score, scale, probability_fn):
    query, value = random_inputs(query_depth=7, value_depth=7)
    value_mask = lengths_to_mask([6, 2, 4], 6)
    units = 3 if score == "concat" else None
    layer = LuongAttention(score=score, units=units, scale=scale, probability_fn=probability_fn)
    layer.build(query.shape, value.shape)
    move_scales_off_one(layer)
    context, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    expected_weights = PROBABILITY_FUNCTIONS[probability_fn](
        luong_scores(layer, query, value, score=score, units=units, scale=scale),
        value_mask[:, None, :],
    )
    np.testing.assert_allclose(to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected_weights @ value, rtol=1e-5, atol=1e-5)


def test_separate_key_and_value():
    query, value = random_inputs(query_depth=4, value_depth=6)
    key = np.random.default_rng(1).normal(size=(3, 6, 4)).astype("float32")
    layer = LuongAttention(score="dot")
    context, weights = layer(query, value, key=key, return_attention_scores=True)
    expected = masked_softmax(query @ key.transpose(0, 2, 1), np.ones((3, 1, 6), bool))
    np.testing.assert_allclose(to_numpy(weights), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected @ value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "score, probability_fn", [("general", "softmax"), ("concat", "softmax"), ("general", "sparsemax")]
)
def test_common_layer_checks(score, probability_fn, tmp_path):
    query, value = random_inputs(batch=2)
    check_layer(
        lambda **kw: LuongAttention(score=score, scale=True, probability_fn=probability_fn, **kw),
        query,
        value,
        tmp_path,
    )


def test_dot_score_needs_equal_depths():
    query, value = random_inputs(query_depth=3, value_depth=5)
    with pytest.raises(ValueError, match="score='dot'"):
        LuongAttention(score="dot")(query, value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"score": "bilinear"}, "score"),
        ({"score": "dot", "units": 4}, "units"),
        ({"score": "concat", "units": -1}, "units"),
        ({"probability_fn": "Sparsemax"}, "probability_fn"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LuongAttention(**kwargs)
