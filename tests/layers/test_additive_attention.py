import numpy as np
import pytest
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from numpy_reference import PROBABILITY_FUNCTIONS
from numpy_reference import random_inputs

from zoo.layers import AdditiveAttention


def bahdanau_reference(
    layer, query, value, value_mask, *, units, use_bias, normalize, probability_fn="softmax"
):
    """e_ij = v_a^T tanh(W_a s_i + b + U_a h_j); c_i = sum_j softmax_j(e_ij) h_j
    (sparsemax_j in place of softmax_j with `probability_fn="sparsemax"`).

    The configuration comes from the test's own arguments; only the weights
    are read from the layer.
    """
    w_a = to_numpy(layer.query_dense.kernel)
    u_a = to_numpy(layer.key_dense.kernel)
    v_a = to_numpy(layer.attention_v)
    assert w_a.shape == (query.shape[-1], units) and u_a.shape == (value.shape[-1], units)
    assert v_a.shape == (units,)
    projected_query = query @ w_a
    if use_bias:
        projected_query = projected_query + to_numpy(layer.query_dense.bias)
    if normalize:
        v_a = to_numpy(layer.attention_g) * v_a / np.linalg.norm(v_a)
    hidden = np.tanh(projected_query[:, :, None, :] + (value @ u_a)[:, None, :, :])
    weights = PROBABILITY_FUNCTIONS[probability_fn](hidden @ v_a, value_mask[:, None, :])
    return weights @ value, weights


@pytest.mark.parametrize("probability_fn", ["softmax", "sparsemax"])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("use_bias", [True, False])
def test_matches_the_papers_formula(use_bias, normalize, probability_fn):
    query, value = random_inputs()
    value_mask = lengths_to_mask([6, 3, 1], 6)
    layer = AdditiveAttention(
        units=4,
        use_bias=use_bias,
        normalize=normalize,
        bias_initializer="random_normal",
        probability_fn=probability_fn,
    )
    layer.build(query.shape, value.shape)
    # Every weight away from a value that would hide it: the bias non-zero
    # (so a dropped or an extra bias shows), g away from its initial value.
    for weight in layer.weights:
        if weight.path.endswith("bias"):
            assert np.all(to_numpy(weight) != 0), weight.path
        if weight.path.endswith("attention_g"):
            weight.assign(1.7)
    context, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    expected_context, expected_weights = bahdanau_reference(
        layer,
        query,
        value,
        value_mask,
        units=4,
        use_bias=use_bias,
        normalize=normalize,
        probability_fn=probability_fn,
    )
    np.testing.assert_allclose(to_numpy(weights), expected_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected_context, rtol=1e-5, atol=1e-5)
    assert np.all(to_numpy(weights)[~np.broadcast_to(value_mask[:, None, :], weights.shape)] == 0)


def test_query_and_key_may_have_different_depths():
    query, value = random_inputs(query_depth=3, value_depth=9)
    layer = AdditiveAttention(units=5)
    assert tuple(layer(query, value).shape) == (3, 4, 9)
    assert tuple(layer.key_dense.kernel.shape) == (9, 5)
    assert tuple(layer.query_dense.kernel.shape) == (3, 5)


def test_common_layer_checks(tmp_path):
    query, value = random_inputs(batch=2)
    check_layer(
        lambda **kw: AdditiveAttention(units=4, normalize=True, **kw), query, value, tmp_path
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0}, "units"),
        ({"units": 2.5}, "units"),
        ({"units": 4, "dropout": 1.0}, "dropout"),
        ({"units": 4, "probability_fn": "entmax"}, "probability_fn"),
        ({"units": 4, "probability_fn": None}, "probability_fn"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdditiveAttention(**kwargs)
