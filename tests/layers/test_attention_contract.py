"""The call contract shared by AdditiveAttention, LuongAttention and LocalAttention,
with either distribution of the weights (softmax, sparsemax)."""

import keras
import numpy as np
import pytest
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from numpy_reference import random_inputs

from zoo.layers import AdditiveAttention
from zoo.layers import LocalAttention
from zoo.layers import LuongAttention
from zoo.layers import masked_softmax
from zoo.layers.base_attention import lowest_value

SPARSEMAX = {"probability_fn": "sparsemax"}
LAYERS = {
    "additive": lambda **kw: AdditiveAttention(units=4, **kw),
    "luong_dot": lambda **kw: LuongAttention(score="dot", scale=True, **kw),
    "luong_general": lambda **kw: LuongAttention(score="general", **kw),
    "luong_concat": lambda **kw: LuongAttention(score="concat", units=3, **kw),
    "local_m": lambda **kw: LocalAttention(mode="local-m", window=2, **kw),
    "local_p": lambda **kw: LocalAttention(mode="local-p", window=2, **kw),
    # Sparsemax on the additive score and inside local-p's Gaussian window.
    "additive_sparsemax": lambda **kw: AdditiveAttention(units=4, **{**SPARSEMAX, **kw}),
    "local_p_sparsemax": lambda **kw: LocalAttention(
        mode="local-p", window=2, **{**SPARSEMAX, **kw}
    ),
}


def step_kwargs(layer, step):
    return {"step": step} if isinstance(layer, LocalAttention) else {}


@pytest.fixture(params=sorted(LAYERS))
def make_layer(request):
    return LAYERS[request.param]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_rows_give_zeros_not_nan(make_layer, dtype):
    query, value = random_inputs(query_depth=6, value_depth=6)
    value_mask = lengths_to_mask([6, 0, 3], 6)  # the second example has no source at all
    query_mask = lengths_to_mask([4, 4, 2], 4)
    layer = make_layer(dtype=dtype)
    context, weights = layer(
        query, value, value_mask=value_mask, query_mask=query_mask, return_attention_scores=True
    )
    assert keras.backend.standardize_dtype(context.dtype) == dtype
    context = to_numpy(context).astype("float32")
    weights = to_numpy(weights).astype("float32")
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    assert np.all(weights[1] == 0) and np.all(context[1] == 0)
    assert np.all(weights[2, 2:] == 0) and np.all(context[2, 2:] == 0), "masked queries"
    assert np.all(weights[2, :, 3:] == 0), "padded source positions"
    assert np.any(weights[0] > 0) and np.any(weights[2, :2] > 0)


def test_single_step_query_equals_the_same_step_of_a_sequence(make_layer):
    query, value = random_inputs(query_depth=6, value_depth=6)
    value_mask = lengths_to_mask([6, 4, 2], 6)
    layer = make_layer()
    context, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    for t in range(query.shape[1]):
        step_context, step_weights = layer(
            query[:, t],
            value,
            value_mask=value_mask,
            return_attention_scores=True,
            **step_kwargs(layer, t),
        )
        assert tuple(step_context.shape) == (3, 6) and tuple(step_weights.shape) == (3, 6)
        np.testing.assert_allclose(to_numpy(step_context), to_numpy(context)[:, t], atol=1e-6)
        np.testing.assert_allclose(to_numpy(step_weights), to_numpy(weights)[:, t], atol=1e-6)


def test_keys_projected_once_give_the_same_result(make_layer):
    query, value = random_inputs(query_depth=6, value_depth=6)
    key = np.random.default_rng(3).normal(size=value.shape).astype("float32")
    layer = make_layer()
    expected = to_numpy(layer(query, value, key=key))
    projected_key = layer.project_keys(key)
    np.testing.assert_allclose(
        to_numpy(layer(query, value, projected_key=projected_key)), expected, atol=1e-6
    )


def test_project_keys_before_build_says_how_to_build(make_layer):
    with pytest.raises(ValueError, match="build"):
        make_layer().project_keys(np.zeros((1, 3, 6), "float32"))


def test_implicit_keras_masks_are_honoured_and_propagated(make_layer):
    token_ids = np.array([[3, 4, 5, 0, 0, 0], [7, 1, 2, 3, 9, 0]])
    query_ids = np.array([[2, 6, 0, 0], [4, 5, 6, 1]])
    embedding = keras.layers.Embedding(10, 6, mask_zero=True)
    layer = make_layer()
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    context = layer(embedding(target), embedding(source))
    pooled = keras.layers.GlobalAveragePooling1D()(context)  # uses the output mask
    model = keras.Model([target, source], [context, pooled])
    context, pooled = (to_numpy(x) for x in model([query_ids, token_ids]))

    explicit = layer(
        embedding(query_ids),
        embedding(token_ids),
        query_mask=query_ids != 0,
        value_mask=token_ids != 0,
    )
    np.testing.assert_allclose(context, to_numpy(explicit), atol=1e-6)
    query_mask = query_ids != 0
    masked_mean = (context * query_mask[..., None]).sum(1) / query_mask.sum(1, keepdims=True)
    np.testing.assert_allclose(pooled, masked_mean, atol=1e-6)


def test_dropout_acts_only_in_training(make_layer):
    query, value = random_inputs(query_depth=6, value_depth=6)
    layer = make_layer(dropout=0.5, seed=7)
    inference = to_numpy(layer(query, value, training=False))
    np.testing.assert_array_equal(to_numpy(layer(query, value)), inference)
    assert not np.allclose(to_numpy(layer(query, value, training=True)), inference)


def test_symbolic_call_returns_context_and_weights(make_layer):
    layer = make_layer()
    query, value = keras.Input((4, 6)), keras.Input((None, 6))
    context, weights = layer(query, value, return_attention_scores=True)
    assert tuple(context.shape) == (None, 4, 6)
    assert tuple(weights.shape) == (None, 4, None)


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"value": np.zeros((3, 6), "float32")}, "value"),
        ({"query": np.zeros((3, 4, 2, 6), "float32")}, "query"),
        ({"query": np.zeros((2, 4, 6), "float32")}, "batch size"),
        ({"value_mask": np.ones((3, 5), bool)}, "value_mask"),
        ({"query_mask": np.ones((3,), bool)}, "query_mask"),
        ({"key": np.zeros((3, 5, 6), "float32")}, "key"),
    ],
)
def test_bad_inputs_are_named(make_layer, inputs, message):
    query, value = random_inputs(query_depth=6, value_depth=6)
    arguments = {"query": query, "value": value, **inputs}
    with pytest.raises(ValueError, match=message):
        make_layer()(**arguments)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_masked_softmax_is_exact_at_masked_positions(dtype):
    scores = keras.ops.cast(np.array([[3.0, -2.0, 60000.0], [1.0, 2.0, 3.0]]), dtype)
    mask = np.array([[True, True, False], [False, False, False]])
    weights = to_numpy(masked_softmax(scores, mask)).astype("float32")
    expected_first = np.exp([3.0, -2.0]) / np.exp([3.0, -2.0]).sum()
    np.testing.assert_allclose(weights[0, :2], expected_first, rtol=1e-2)
    assert weights[0, 2] == 0 and np.all(weights[1] == 0)



@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_lowest_value_is_the_dtypes_lowest_finite_number_on_this_backend(dtype):
    # ml_dtypes comes with Keras; zoo.layers itself does not import it.
    import ml_dtypes

    lowest = lowest_value(dtype)
    assert lowest == float(ml_dtypes.finfo(dtype).min)
    as_tensor = keras.ops.cast(lowest, dtype)
    # Read back through float32, which holds every value of the three exactly.
    assert to_numpy(keras.ops.cast(as_tensor, "float32")) == lowest, "the backend rounds it"
    # Twice as low overflows: nothing finite lies below it.
    doubled = keras.ops.multiply(as_tensor, keras.ops.cast(2, dtype))
    assert np.isneginf(to_numpy(keras.ops.cast(doubled, "float32")))


def test_probability_fn_is_in_the_config_and_old_configs_reload_as_softmax(make_layer):
    layer = make_layer(probability_fn="sparsemax")
    layer(*random_inputs(query_depth=6, value_depth=6))
    config = layer.get_config()
    assert config["probability_fn"] == "sparsemax"
    assert type(layer).from_config(config).probability_fn == "sparsemax"
    del config["probability_fn"]  # a config saved before the argument existed
    assert type(layer).from_config(config).probability_fn == "softmax"


def test_projections_of_equal_shape_start_different():
    # One stateless initializer shared by two weights would make them equal.
    layer = AdditiveAttention(units=6)
    layer(*random_inputs(query_depth=6, value_depth=6))
    assert not np.allclose(to_numpy(layer.query_dense.kernel), to_numpy(layer.key_dense.kernel))
