
import keras
import numpy as np
import pytest
from keras import ops
from keras.src.layers.attention import multi_head_attention as keras_mha_module
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from numpy_reference import masked_softmax
from numpy_reference import random_inputs

from zoo.layers.multi_head_attention import MultiHeadAttention

NUM_HEADS = 2
KEY_DIM = 4


def make_layer(**kwargs):
    kwargs = {
        "num_heads": NUM_HEADS,
        "key_dim": KEY_DIM,
        "bias_initializer": "random_normal",
        **kwargs,
    }
    return MultiHeadAttention(**kwargs)


def vaswani_reference(layer, query, value, mask, *, num_heads, key_dim):
    """softmax(Q_h K_h^T / sqrt(d_k)) V_h per head, concatenated, times W^O.

    `mask` is a boolean `[batch, Tq, Tv]` of the pairs that may attend. The
    configuration comes from the test's own arguments; only the weights are
    read from the layer.
    """
    w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o = [
        w.astype("float64") for w in layer.get_weights()
    ]
    assert w_q.shape[1:] == (num_heads, key_dim) and w_k.shape[1:] == (num_heads, key_dim)
    q = np.einsum("btd,dhk->bthk", query, w_q) + b_q
    k = np.einsum("bsd,dhk->bshk", value, w_k) + b_k
    v = np.einsum("bsd,dhk->bshk", value, w_v) + b_v
    scores = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(key_dim)
    weights = masked_softmax(scores, mask[:, None, :, :])
    context = np.einsum("bhts,bshk->bthk", weights, v)
    return np.einsum("bthk,hke->bte", context, w_o) + b_o, weights


def test_weights_have_keras_names_shapes_and_order():
    query, value = random_inputs()
    layer = make_layer(value_dim=3)
    layer(query, value)
    expected = [
        ("query/kernel", (5, 2, 4)),
        ("query/bias", (2, 4)),
        ("key/kernel", (7, 2, 4)),
        ("key/bias", (2, 4)),
        ("value/kernel", (7, 2, 3)),
        ("value/bias", (2, 3)),
        ("attention_output/kernel", (2, 3, 5)),
        ("attention_output/bias", (5,)),
    ]
    got = [("/".join(w.path.split("/")[-2:]), tuple(w.shape)) for w in layer.weights]
    assert got == expected


@pytest.mark.parametrize("return_attention_scores", [True, False], ids=["explicit", "fused"])
def test_matches_the_papers_formula(return_attention_scores):
    query, value = random_inputs()
    value_mask = lengths_to_mask([6, 3, 1], 6)
    layer = make_layer()
    result = layer(
        query, value, value_mask=value_mask, return_attention_scores=return_attention_scores
    )
    mask = np.broadcast_to(value_mask[:, None, :], (3, 4, 6))
    expected_output, expected_weights = vaswani_reference(
        layer, query, value, mask, num_heads=NUM_HEADS, key_dim=KEY_DIM
    )
    if return_attention_scores:
        output, weights = map(to_numpy, result)
        np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-6)
        padded = ~np.broadcast_to(mask[:, None], weights.shape)
        assert np.all(weights[padded] == 0)
    else:
        output = to_numpy(result)
    np.testing.assert_allclose(output, expected_output, rtol=1e-5, atol=1e-5)


def test_value_dim_and_output_shape():
    query, value = random_inputs()
    layer = make_layer(value_dim=3, output_shape=(2, 3))
    output, weights = layer(query, value, return_attention_scores=True)
    assert tuple(output.shape) == (3, 4, 2, 3)
    assert tuple(weights.shape) == (3, NUM_HEADS, 4, 6)
    assert tuple(layer.output_dense.kernel.shape) == (NUM_HEADS, 3, 2, 3)
    # The fused path is not used with value_dim != key_dim; same output.
    np.testing.assert_allclose(to_numpy(layer(query, value)), to_numpy(output), atol=1e-6)


def test_key_differs_from_value():
    query, value = random_inputs()
    key = np.random.default_rng(1).normal(size=(3, 6, 3)).astype("float32")
    layer = make_layer()
    output = layer(query, value, key=key)
    w_k, b_k = layer.key_dense.get_weights()
    projected = np.einsum("bsd,dhk->bshk", key, w_k) + b_k
    # Swapping key for value in the reference's key projection only.
    w_q, b_q = layer.query_dense.get_weights()
    w_v, b_v = layer.value_dense.get_weights()
    w_o, b_o = layer.output_dense.get_weights()
    q = np.einsum("btd,dhk->bthk", query, w_q) + b_q
    scores = np.einsum("bthk,bshk->bhts", q, projected) / np.sqrt(KEY_DIM)
    weights = masked_softmax(scores, np.ones_like(scores, bool))
    v = np.einsum("bsd,dhk->bshk", value, w_v) + b_v
    expected = np.einsum("bhts,bshk,hke->bte", weights, v, w_o) + b_o
    np.testing.assert_allclose(to_numpy(output), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "call_kwargs, return_attention_scores",
    [
        ({}, False),
        ({"value_mask": True}, False),
        ({"use_causal_mask": True}, False),
        ({"value_mask": True, "use_causal_mask": True}, False),
        ({"value_mask": True, "use_causal_mask": True}, True),
    ],
    ids=["plain", "value_mask", "causal", "value_mask+causal", "value_mask+causal-explicit"],
)
def test_equals_keras_multi_head_attention(call_kwargs, return_attention_scores):
    query, value = random_inputs(query_length=5, value_length=5, value_depth=5)
    call_kwargs = dict(call_kwargs)
    if call_kwargs.get("value_mask"):
        call_kwargs["value_mask"] = lengths_to_mask([5, 3, 1], 5)
    keras_layer = keras.layers.MultiHeadAttention(
        num_heads=NUM_HEADS, key_dim=KEY_DIM, bias_initializer="random_normal"
    )
    expected = to_numpy(keras_layer(query, value, **call_kwargs))
    ours = make_layer()
    ours(query, value)
    ours.set_weights(keras_layer.get_weights())
    output = ours(
        query, value, return_attention_scores=return_attention_scores, **call_kwargs
    )
    if return_attention_scores:
        output = output[0]
    np.testing.assert_allclose(to_numpy(output), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_float32_weights_and_computes_in_half(policy):
    query, value = random_inputs(query_length=5, value_length=5, value_depth=5)
    full = make_layer()
    expected = to_numpy(full(query, value))
    mixed = make_layer(dtype=policy)
    mixed(query, value)
    mixed.set_weights(full.get_weights())
    output = mixed(query, value)
    assert keras.backend.standardize_dtype(output.dtype) == policy.split("_")[1]
    assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in mixed.weights)
    np.testing.assert_allclose(to_numpy(output).astype("float32"), expected, atol=5e-2)


def test_lora_on_a_projection_acts_as_in_keras_layer():
    query, value = random_inputs(query_length=5, value_length=5, value_depth=5)
    keras_layer = keras.layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=KEY_DIM)
    keras_layer(query, value)
    ours = make_layer()
    ours(query, value)
    ours.set_weights(keras_layer.get_weights())
    before = to_numpy(ours(query, value))
    for layer in (keras_layer, ours):
        layer.query_dense.enable_lora(2)
    rng = np.random.default_rng(3)
    lora_a = rng.standard_normal(ours.query_dense.lora_kernel_a.shape).astype("float32")
    lora_b = rng.standard_normal(ours.query_dense.lora_kernel_b.shape).astype("float32")
    for layer in (keras_layer, ours):
        layer.query_dense.lora_kernel_a.assign(lora_a)
        layer.query_dense.lora_kernel_b.assign(lora_b)
    output = to_numpy(ours(query, value))
    assert np.abs(output - before).max() > 1e-3  # the adapter is used
    np.testing.assert_allclose(output, to_numpy(keras_layer(query, value)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("return_attention_scores", [True, False], ids=["explicit", "fused"])
def test_fully_masked_rows_give_zeros_not_nan(dtype, return_attention_scores):
    query, value = random_inputs()
    # Batch 1 has no allowed key; position 3 of every query is padding.
    value_mask = lengths_to_mask([6, 0, 2], 6)
    query_mask = lengths_to_mask([3, 3, 3], 4)
    layer = make_layer(dtype=dtype)
    result = layer(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=return_attention_scores,
    )
    output = result[0] if return_attention_scores else result
    assert keras.backend.standardize_dtype(output.dtype) == dtype
    output = to_numpy(ops.cast(output, "float32"))
    assert np.all(np.isfinite(output))
    # A row that attends to nothing has a zero context: the output is the bias.
    bias = to_numpy(ops.cast(layer.output_dense.bias, "float32"))
    np.testing.assert_array_equal(output[1], np.broadcast_to(bias, output[1].shape))
    np.testing.assert_array_equal(output[:, 3], np.broadcast_to(bias, output[:, 3].shape))
    assert not np.allclose(output[0, 0], bias)
    if return_attention_scores:
        weights = to_numpy(ops.cast(result[1], "float32"))
        assert np.all(weights[1] == 0) and np.all(weights[:, :, 3] == 0)
        assert np.all(weights[2][..., 2:] == 0)
        np.testing.assert_allclose(weights[0, :, :3].sum(-1), 1.0, atol=1e-2)


def test_implicit_masks_are_honoured_and_propagated():
    tokens = np.array([[3, 1, 4, 0, 0], [0, 0, 0, 0, 0], [2, 7, 1, 8, 2]], "int32")
    embedding = keras.layers.Embedding(10, 6, mask_zero=True)
    layer = make_layer()
    pooling = keras.layers.GlobalAveragePooling1D()  # averages over the mask
    embedded = embedding(tokens)
    pooled = to_numpy(pooling(layer(embedded, embedded)))

    plain = ops.convert_to_tensor(to_numpy(embedded))  # no Keras mask
    mask = tokens != 0
    explicit = to_numpy(layer(plain, plain, query_mask=mask, value_mask=mask))
    assert np.all(np.isfinite(explicit))
    lengths = mask.sum(1, keepdims=True)
    for row in (0, 2):  # the empty row 1 has no mean
        expected = explicit[row][mask[row]].sum(0) / lengths[row]
        np.testing.assert_allclose(pooled[row], expected, rtol=1e-5, atol=1e-6)
    # Without the masks the padded tokens would change the valid outputs.
    unmasked = to_numpy(layer(plain, plain))
    assert not np.allclose(unmasked[0, :3], explicit[0, :3], atol=1e-4)


def test_one_fit_step_with_padding_stays_finite():
    tokens = np.array([[3, 1, 4, 0], [0, 0, 0, 0]], "int32")
    inputs = keras.Input((4,), dtype="int32")
    embedded = keras.layers.Embedding(10, 6, mask_zero=True)(inputs)
    attended = make_layer()(embedded, embedded, use_causal_mask=True)
    model = keras.Model(inputs, keras.layers.Dense(2)(attended))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(tokens, np.ones((2, 4, 2), "float32"), batch_size=2, epochs=1, verbose=0)
    assert all(np.all(np.isfinite(to_numpy(w))) for w in model.weights)


@pytest.mark.parametrize(
    "query_rank, tensor_index", [(2, False), (3, True)], ids=["rank2-int", "rank3-tensor"]
)
def test_self_attention_cache_decoding_equals_causal_call(query_rank, tensor_index):
    x, _ = random_inputs(batch=2, query_length=5, query_depth=6)
    layer = make_layer()
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = np.zeros((2, 2, 5, NUM_HEADS, KEY_DIM), "float32")
    for step in range(5):
        x_t = x[:, step] if query_rank == 2 else x[:, step : step + 1]
        index = ops.convert_to_tensor(step, "int32") if tensor_index else step
        output, weights, cache = layer(
            x_t,
            x[:, step : step + 1],
            cache=cache,
            cache_update_index=index,
            use_causal_mask=True,
            return_attention_scores=True,
        )
        output, weights = to_numpy(output), to_numpy(weights)
        if query_rank == 3:
            output, weights = output[:, 0], weights[:, :, 0]
        np.testing.assert_allclose(output, full[:, step], rtol=1e-5, atol=1e-5)
        assert weights.shape == (2, NUM_HEADS, 5)
        assert np.all(weights[..., step + 1 :] == 0)
    # The cache now holds the projected keys and values of the sequence.
    np.testing.assert_allclose(
        to_numpy(cache), to_numpy(layer.project_key_value(x)), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("return_attention_scores", [False, True], ids=["one_query", "explicit"])
def test_cache_decoding_keeps_the_sliding_window_and_the_gate(return_attention_scores):
    """Keras' causal and sliding-window masks count the query positions from
    0; with a cache being written they start at `cache_update_index`."""
    x, _ = random_inputs(batch=2, query_length=5, query_depth=6)
    layer = make_layer(sliding_window=2, use_gate=True)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = np.zeros((2, 2, 5, NUM_HEADS, KEY_DIM), "float32")
    for step in range(5):
        results = layer(
            x[:, step],
            x[:, step : step + 1],
            cache=cache,
            cache_update_index=step,
            use_causal_mask=True,
            return_attention_scores=return_attention_scores,
        )
        output, cache = results[0], results[-1]
        np.testing.assert_allclose(to_numpy(output), full[:, step], rtol=1e-5, atol=1e-5)
        if return_attention_scores:
            keys = np.arange(5)
            outside = (keys > step) | (step - keys >= 2)
            assert np.all(to_numpy(results[1])[..., outside] == 0)


def test_cache_decoding_with_attention_mask_and_fused_path():
    x, _ = random_inputs(batch=2, query_length=4, query_depth=6)
    layer = make_layer()
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = np.zeros((2, 2, 4, NUM_HEADS, KEY_DIM), "float32")
    for step in range(4):
        filled = np.broadcast_to(np.arange(4) <= step, (2, 4))
        output, cache = layer(
            x[:, step], x[:, step : step + 1], attention_mask=filled,
            cache=cache, cache_update_index=step,
        )
        np.testing.assert_allclose(to_numpy(output), full[:, step], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("query_rank", [2, 3])
def test_cross_attention_cache_equals_plain_call(query_rank):
    query, memory = random_inputs(batch=2, query_length=3, value_length=5)
    value_mask = lengths_to_mask([5, 2], 5)
    layer = make_layer()
    if query_rank == 2:
        query = query[:, 0]
    expected, expected_weights = layer(
        query, memory, value_mask=value_mask, return_attention_scores=True
    )
    memory_cache = layer.project_key_value(memory)
    assert tuple(memory_cache.shape) == (2, 2, 5, NUM_HEADS, KEY_DIM)
    output, weights, same_cache = layer(
        query, None, value_mask=value_mask, cache=memory_cache, return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(output), to_numpy(expected), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(expected_weights), atol=1e-6)
    np.testing.assert_array_equal(to_numpy(same_cache), to_numpy(memory_cache))
    fused, _ = layer(query, memory, value_mask=value_mask, cache=memory_cache)
    np.testing.assert_allclose(to_numpy(fused), to_numpy(expected), rtol=1e-5, atol=1e-5)


def test_rank_2_query_is_one_step():
    query, value = random_inputs()
    value_mask = lengths_to_mask([6, 3, 1], 6)
    layer = make_layer()
    output, weights = layer(
        query[:, 1], value, value_mask=value_mask, return_attention_scores=True
    )
    assert tuple(output.shape) == (3, 5) and tuple(weights.shape) == (3, NUM_HEADS, 6)
    steps, step_weights = layer(
        query[:, 1:2], value, value_mask=value_mask, return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(output), to_numpy(steps)[:, 0], atol=1e-6)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(step_weights)[:, :, 0], atol=1e-6)
    fused = layer(query[:, 1], value, value_mask=value_mask)
    np.testing.assert_allclose(to_numpy(fused), to_numpy(output), atol=1e-5)


def test_symbolic_call_with_scores_and_cache():
    query = keras.Input((None, 5))
    value = keras.Input((6, 7))
    layer = make_layer()
    output, weights = layer(query, value, return_attention_scores=True)
    assert tuple(output.shape) == (None, None, 5)
    assert tuple(weights.shape) == (None, NUM_HEADS, None, 6)
    step = keras.Input((5,))
    cache = keras.Input((2, 6, NUM_HEADS, KEY_DIM))
    output, weights, new_cache = layer(
        step, None, cache=cache, return_attention_scores=True
    )
    assert tuple(output.shape) == (None, 5)
    assert tuple(weights.shape) == (None, NUM_HEADS, 6)
    assert tuple(new_cache.shape) == (None, 2, 6, NUM_HEADS, KEY_DIM)


def test_dropout_acts_on_weights_only_in_training():
    query, value = random_inputs()
    layer = make_layer(dropout=0.5, seed=3)
    inference, weights = layer(query, value, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(layer(query, value, training=False)), to_numpy(inference), atol=1e-5
    )
    trained = to_numpy(layer(query, value, training=True))
    assert not np.allclose(trained, to_numpy(inference), atol=1e-3)


@pytest.mark.parametrize(
    "layer_kwargs, call_kwargs, expected_calls",
    [
        ({}, {}, 1),
        ({}, {"value_mask": True}, 1),
        ({}, {"use_causal_mask": True}, 1),
        ({}, {"return_attention_scores": True}, 0),
        ({"dropout": 0.5}, {"training": True}, 0),
        # As in Keras' layer, a dropout rate takes the explicit path.
        ({"dropout": 0.5}, {"training": False}, 0),
        # jax's fused kernel needs value heads as deep as the key heads.
        ({"value_dim": 3}, {}, 0 if keras.backend.backend() == "jax" else 1),
    ],
)
def test_fused_kernel_is_used_when_it_can_be(
    monkeypatch, layer_kwargs, call_kwargs, expected_calls
):
    query, value = random_inputs()
    call_kwargs = dict(call_kwargs)
    if call_kwargs.get("value_mask"):
        call_kwargs["value_mask"] = lengths_to_mask([6, 3, 1], 6)
    layer = make_layer(**layer_kwargs)
    layer(query, value)
    calls = []
    fused = keras_mha_module.ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return fused(*args, **kwargs)

    monkeypatch.setattr(keras_mha_module.ops, "dot_product_attention", counting)
    layer(query, value, **call_kwargs)
    assert len(calls) == expected_calls


@pytest.mark.parametrize("query_rank", [2, 3])
def test_one_query_position_matches_the_formula_without_the_fused_kernel(
    monkeypatch, query_rank
):
    """A decoding step's single query is computed by products over the keys'
    own layout (no transposed copy of the cache), with the fused kernel's
    results: a fully masked row gives a zero context."""
    query, value = random_inputs(query_length=1)
    value_mask = lengths_to_mask([6, 0, 2], 6)
    layer = make_layer()
    layer(query, value)
    calls = []
    monkeypatch.setattr(
        keras_mha_module.ops, "dot_product_attention", lambda *a, **k: calls.append(k)
    )
    step_query = query[:, 0] if query_rank == 2 else query
    output = to_numpy(layer(step_query, value, value_mask=value_mask))
    assert not calls
    mask = np.broadcast_to(value_mask[:, None, :], (3, 1, 6))
    expected, _ = vaswani_reference(
        layer, query, value, mask, num_heads=NUM_HEADS, key_dim=KEY_DIM
    )
    expected = expected[:, 0] if query_rank == 2 else expected
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)
    bias = to_numpy(layer.output_dense.bias)
    np.testing.assert_allclose(output[1].reshape(-1, bias.shape[0])[0], bias, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 0, "key_dim": 4}, "num_heads=0"),
        ({"num_heads": 2.0, "key_dim": 4}, "num_heads=2.0"),
        ({"num_heads": 2, "key_dim": -1}, "key_dim=-1"),
        ({"num_heads": 2, "key_dim": 4, "value_dim": 0}, "value_dim=0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": 1.0}, "dropout=1.0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": -0.1}, "dropout=-0.1"),
        ({"num_heads": 2, "key_dim": 4, "output_shape": "x"}, "output_shape='x'"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


def test_bad_inputs_are_named():
    query, value = random_inputs()
    layer = make_layer()
    with pytest.raises(ValueError, match=r"`value` must have rank 3.*value.shape=\(3, 7\)"):
        layer(query, value[:, 0])
    with pytest.raises(ValueError, match=r"same rank.*query.shape=\(3, 4, 1, 5\)"):
        layer(query[:, :, None], value)
    with pytest.raises(ValueError, match="same batch size"):
        layer(query[:2], value)
    layer(query, value)
    with pytest.raises(ValueError, match=r"`value_mask` must have shape.*value_mask.shape=\(3, 5\)"):
        layer(query, value, value_mask=np.ones((3, 5), bool))
    with pytest.raises(ValueError, match=r"`query_mask` must have shape"):
        layer(query, value, query_mask=np.ones((3, 6), bool))
    with pytest.raises(ValueError, match="cache_update_index"):
        layer(query, value, cache_update_index=0)
    with pytest.raises(ValueError, match=r"`cache` must have shape"):
        layer(query, value, cache=np.zeros((3, 2, 6, 3, KEY_DIM), "float32"))


def test_cache_needs_key_dim_equal_to_value_dim():
    query, value = random_inputs()
    layer = make_layer(value_dim=3)
    with pytest.raises(ValueError, match="is not built"):
        layer.project_key_value(value)
    layer(query, value)
    with pytest.raises(ValueError, match="key_dim == value_dim.*value_dim=3"):
        layer.project_key_value(value)


def test_config_round_trip_keeps_every_argument():
    layer = make_layer(
        value_dim=3, dropout=0.25, use_bias=False, output_shape=6, seed=7,
        kernel_regularizer="l2", name="mha",
    )
    config = layer.get_config()
    for name, value in {
        "num_heads": NUM_HEADS, "key_dim": KEY_DIM, "value_dim": 3, "dropout": 0.25,
        "use_bias": False, "output_shape": (6,), "seed": 7,
    }.items():
        assert config[name] == value, name
    clone = MultiHeadAttention.from_config(config)
    assert clone.get_config() == config


def test_common_layer_checks(tmp_path):
    query, value = random_inputs(batch=2)
    # Without biases: the key bias adds the same q.b to every score of a row,
    # which the softmax cancels, so its gradient is zero (up to round-off) and
    # "every weight moves in one fit step" cannot hold for it.
    check_layer(
        lambda **kw: make_layer(use_bias=False, **kw),
        query,
        value,
        tmp_path,
        call_kwargs={"use_causal_mask": True},
    )


def test_key_bias_does_not_change_the_output():
    query, value = random_inputs()
    layer = make_layer()
    expected = to_numpy(layer(query, value))
    kernel, bias = layer.key_dense.get_weights()
    layer.key_dense.set_weights([kernel, bias + 3.0])
    np.testing.assert_allclose(to_numpy(layer(query, value)), expected, rtol=1e-5, atol=1e-5)
