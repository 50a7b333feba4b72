import numpy as np
import pytest
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import PROBABILITY_FUNCTIONS

from zoo.layers import SpatialSoftAttention
from zoo.layers import doubly_stochastic_penalty


def grid_inputs(batch=2, steps=3, query_depth=5, height=3, width=4, depth=6, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, steps, query_depth)).astype("float32")
    grid = rng.normal(size=(batch, height, width, depth)).astype("float32")
    return query, grid


def show_attend_tell_reference(layer, query, grid, *, units, use_gate, probability_fn="softmax"):
    """e_ti = v^T tanh(W h + b + U a_i); z_t = sigmoid(f_beta(h)) sum_i alpha_ti a_i,
    alpha_t = softmax(e_t) (or sparsemax(e_t) with `probability_fn="sparsemax"`).

    The configuration comes from the test's own arguments; only the weights
    are read from the layer.
    """
    annotations = grid.reshape(grid.shape[0], -1, grid.shape[-1])
    attention = layer.attention
    w = to_numpy(attention.query_dense.kernel)
    u = to_numpy(attention.key_dense.kernel)
    v = to_numpy(attention.attention_v)
    assert w.shape == (query.shape[-1], units) and u.shape == (grid.shape[-1], units)
    assert v.shape == (units,)
    projected_query = query @ w + to_numpy(attention.query_dense.bias)
    projected_keys = annotations @ u
    hidden = np.tanh(projected_query[:, :, None, :] + projected_keys[:, None, :, :])
    alpha = PROBABILITY_FUNCTIONS[probability_fn](hidden @ v, np.ones(hidden.shape[:3], bool))
    context = alpha @ annotations
    if use_gate:
        f_beta = query @ to_numpy(layer.gate_dense.kernel) + to_numpy(layer.gate_dense.bias)
        context = context * (1 / (1 + np.exp(-f_beta)))
    return context, alpha


def randomize_biases(layer, seed=0):
    """Biases start at zero, where a dropped bias would go unseen: give every
    bias (the attention's b, the gate's) random non-zero values."""
    rng = np.random.default_rng(seed)
    biases = [weight for weight in layer.weights if weight.path.endswith("bias")]
    for weight in biases:
        magnitude = rng.uniform(0.5, 1.5, size=weight.shape)
        weight.assign(magnitude * rng.choice([-1.0, 1.0], size=weight.shape))
    return [weight.path for weight in biases]


@pytest.mark.parametrize("probability_fn", ["softmax", "sparsemax"])
@pytest.mark.parametrize("use_gate", [True, False])
def test_matches_the_papers_formula(use_gate, probability_fn):
    query, grid = grid_inputs()
    layer = SpatialSoftAttention(units=4, use_gate=use_gate, probability_fn=probability_fn)
    layer.build(query.shape, grid.shape)
    randomized = randomize_biases(layer)
    assert any(path.endswith("attention/query_dense/bias") for path in randomized), randomized
    if use_gate:
        assert any(path.endswith("gate/bias") for path in randomized), randomized
    context, alpha = layer(query, grid, return_attention_scores=True)
    expected_context, expected_alpha = show_attend_tell_reference(
        layer, query, grid, units=4, use_gate=use_gate, probability_fn=probability_fn
    )
    np.testing.assert_allclose(to_numpy(alpha), expected_alpha, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected_context, rtol=1e-5, atol=1e-5)
    assert tuple(alpha.shape) == (2, 3, 12)


def test_one_step_with_projected_features_equals_the_sequence_row():
    query, grid = grid_inputs()
    layer = SpatialSoftAttention(units=4)
    all_steps, all_alpha = layer(query, grid, return_attention_scores=True)
    keys = layer.project_features(grid)
    for t in range(query.shape[1]):
        step, alpha = layer(query[:, t], grid, projected_features=keys, return_attention_scores=True)
        np.testing.assert_allclose(to_numpy(step), to_numpy(all_steps)[:, t], atol=1e-6)
        np.testing.assert_allclose(to_numpy(alpha), to_numpy(all_alpha)[:, t], atol=1e-6)


def test_a_flat_grid_gives_the_same_result():
    query, grid = grid_inputs()
    layer = SpatialSoftAttention(units=4)
    flat = grid.reshape(grid.shape[0], -1, grid.shape[-1])
    np.testing.assert_allclose(to_numpy(layer(query, grid)), to_numpy(layer(query, flat)), atol=1e-6)


def test_doubly_stochastic_penalty_matches_the_formula():
    rng = np.random.default_rng(1)
    alpha = rng.dirichlet(np.ones(5), size=(2, 4)).astype("float32")  # [B, T, L]
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    expected = np.sum((1 - np.sum(alpha * mask[:, :, None], axis=1)) ** 2, axis=-1)
    np.testing.assert_allclose(
        to_numpy(doubly_stochastic_penalty(alpha, mask)), expected, rtol=1e-6
    )
    # Attention that visits each location exactly once over the caption
    # costs nothing.
    one_visit = np.eye(4, dtype="float32")[None]
    assert float(to_numpy(doubly_stochastic_penalty(one_visit))[0]) == 0.0


def test_common_layer_checks(tmp_path):
    query, grid = grid_inputs()
    check_layer(lambda **kw: SpatialSoftAttention(units=4, **kw), query, grid, tmp_path)


def test_probability_fn_reaches_the_attention_and_the_config():
    query, grid = grid_inputs()
    layer = SpatialSoftAttention(units=4, probability_fn="sparsemax")
    layer(query, grid)
    assert layer.attention.probability_fn == "sparsemax"
    config = layer.get_config()
    assert config["probability_fn"] == "sparsemax"
    assert SpatialSoftAttention.from_config(config).attention.probability_fn == "sparsemax"
    del config["probability_fn"]  # a config saved before the argument existed
    assert SpatialSoftAttention.from_config(config).attention.probability_fn == "softmax"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0}, "units"),
        ({"units": 4, "dropout": 1.5}, "dropout"),
        ({"units": 4, "probability_fn": "entmax"}, "probability_fn"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpatialSoftAttention(**kwargs)


def test_bad_feature_rank_is_one_line():
    layer = SpatialSoftAttention(units=4)
    with pytest.raises(ValueError, match=r"\[batch, H, W, D\]"):
        layer(np.zeros((2, 3), "float32"), np.zeros((2, 3), "float32"))
