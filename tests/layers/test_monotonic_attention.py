import keras
import numpy as np
import pytest
from layer_checks import check_layer
from layer_checks import to_numpy
from layer_checks import vector_jacobian_product
from numpy_reference import lengths_to_mask
from numpy_reference import monotonic_attention
from numpy_reference import monotonic_expected_alignment
from numpy_reference import random_inputs

from zoo.layers import BahdanauDecoder
from zoo.layers import BahdanauMonotonicAttention
from zoo.layers import LuongDecoder
from zoo.layers import LuongMonotonicAttention
from zoo.layers._monotonic import monotonic_alignment

SCORE_BIAS = 0.3  # the energy bias r, set away from its initial value


def make(kind, **kwargs):
    if kind == "bahdanau":
        return BahdanauMonotonicAttention(units=4, normalize=True, **kwargs)
    return LuongMonotonicAttention(score="general", scale=True, **kwargs)


def set_weights(layer):
    """Non-zero biases and scales, so that leaving one out shows."""
    rng = np.random.default_rng(1)
    for weight in layer.weights:
        name = weight.path.split("/")[-1]
        if name == "attention_score_bias":
            weight.assign(SCORE_BIAS)
        elif name in ("attention_g", "attention_scale"):
            weight.assign(1.7)
        elif name == "bias":
            weight.assign(rng.normal(size=weight.shape).astype("float32"))


def energies(kind, layer, query, value, *, score_bias):
    """The paper's energies from the test's own formula; only the weights
    are read from the layer. Bahdanau with weight normalisation:
    `g v^T/||v|| tanh(W s + b + U h) + r`; Luong general, scaled:
    `g s^T W h + r`."""
    if kind == "bahdanau":
        w = to_numpy(layer.query_dense.kernel)
        b = to_numpy(layer.query_dense.bias)
        u = to_numpy(layer.key_dense.kernel)
        v = to_numpy(layer.attention_v)
        g = to_numpy(layer.attention_g)
        hidden = np.tanh((query @ w + b)[:, :, None, :] + (value @ u)[:, None, :, :])
        return hidden @ (g * v / np.linalg.norm(v)) + score_bias
    w = to_numpy(layer.key_dense.kernel)
    g = to_numpy(layer.attention_scale)
    return g * query @ (value @ w).transpose(0, 2, 1) + score_bias


def inputs():
    query, value = random_inputs(batch=3, query_length=5, value_length=7, query_depth=4, value_depth=4)
    return query, value, lengths_to_mask([7, 4, 0], 7)  # the last row fully masked


@pytest.mark.parametrize("mass_preservation", [False, True])
@pytest.mark.parametrize("mode", ["parallel", "hard"])
@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_matches_the_papers_formula(kind, mode, mass_preservation):
    query, value, value_mask = inputs()
    layer = make(kind, mode=mode, mass_preservation=mass_preservation)
    layer.build(query.shape, value.shape)
    set_weights(layer)
    context, alignment = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    expected = monotonic_attention(
        energies(kind, layer, query, value, score_bias=SCORE_BIAS),
        value_mask,
        mode,
        mass_preservation=mass_preservation,
    )
    alignment = to_numpy(alignment)
    np.testing.assert_allclose(alignment, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected @ value, rtol=1e-5, atol=1e-5)
    assert np.all(alignment[~np.broadcast_to(value_mask[:, None], alignment.shape)] == 0)
    assert np.all(alignment[2] == 0), "a fully masked row got weight"
    assert np.any(alignment[:2] > 0) and np.any(alignment[:2, 1:, 1:] > 0)
    if mass_preservation:
        # Every step of a row with memory stops somewhere, at the latest at its end.
        np.testing.assert_allclose(alignment[:2].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("mode", ["parallel", "hard"])
def test_steps_one_at_a_time_equal_the_whole_sequence(mode):
    query, value, value_mask = inputs()
    layer = make("luong", mode=mode)
    layer.build(query.shape, value.shape)
    set_weights(layer)
    _, whole = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    keys = layer.project_keys(value)
    alignment = layer.initial_alignment(3, 7)
    for t in range(query.shape[1]):
        _, alignment = layer(
            query[:, t],
            value,
            value_mask=value_mask,
            projected_key=keys,
            previous_alignment=alignment,
            return_attention_scores=True,
        )
        np.testing.assert_allclose(to_numpy(alignment), to_numpy(whole)[:, t], atol=1e-6)


def test_a_masked_query_step_attends_nowhere_and_keeps_the_alignment():
    query, value, value_mask = inputs()
    layer = make("bahdanau")
    layer.build(query.shape, value.shape)
    set_weights(layer)
    query_mask = np.array([True, True, False, True, True])[None].repeat(3, 0)
    _, alignment = layer(
        query, value, value_mask=value_mask, query_mask=query_mask, return_attention_scores=True
    )
    kept = [0, 1, 3, 4]
    expected = monotonic_attention(
        energies("bahdanau", layer, query[:, kept], value, score_bias=SCORE_BIAS),
        value_mask,
        "parallel",
    )
    alignment = to_numpy(alignment)
    assert np.all(alignment[:, 2] == 0)
    np.testing.assert_allclose(alignment[:, kept], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_hard_attention_is_one_hot_monotonic_and_streams(kind):
    """Each step attends to one position or none, never behind an earlier
    step, never after attending nowhere; and a step's alignment does not
    depend on the memory beyond where the last step stopped."""
    rng = np.random.default_rng(2)
    query = rng.normal(size=(8, 9, 4)).astype("float32")
    value = rng.normal(size=(8, 12, 4)).astype("float32")
    value_mask = lengths_to_mask(rng.integers(0, 13, 8), 12)
    layer = make(kind, mode="hard")
    layer.build(query.shape, value.shape)
    for weight in layer.weights:  # energies near 0, so that steps both stop and move on
        if weight.path.endswith("attention_score_bias"):
            weight.assign(0.0)
    _, alignment = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    alignment = to_numpy(alignment)
    assert np.all((alignment == 0) | (alignment == 1))
    attended = alignment.sum(-1)
    assert np.all(attended <= 1)
    assert np.all(alignment[~np.broadcast_to(value_mask[:, None], alignment.shape)] == 0)
    assert np.all(np.diff(attended, axis=1) <= 0), "a step attended after one attended nowhere"
    positions = np.where(attended > 0, alignment.argmax(-1), 0)
    for row, count in zip(positions, attended.sum(-1).astype(int)):
        assert np.all(np.diff(row[:count]) >= 0), f"attention moved back: {row[:count]}"
    assert np.any(np.diff(positions, axis=1) > 0) and np.any(attended == 0)

    full = attended[:, -1] > 0  # rows whose every step stopped somewhere
    assert full.any()
    changed = value.copy()
    for b in np.flatnonzero(full):
        changed[b, positions[b, -1] + 1 :] = rng.normal(size=changed[b, positions[b, -1] + 1 :].shape)
    _, again = layer(query, changed, value_mask=value_mask, return_attention_scores=True)
    np.testing.assert_array_equal(to_numpy(again)[full], alignment[full])


def test_implicit_keras_masks_are_honoured_and_propagated():
    token_ids = np.array([[3, 4, 5, 0, 0, 0], [7, 1, 2, 3, 9, 0]])
    query_ids = np.array([[2, 6, 0, 0], [4, 5, 6, 1]])
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    layer = make("luong")
    query, value = embedding(query_ids), embedding(token_ids)
    implicit = layer(query, value)
    explicit = layer(query, value, query_mask=query_ids != 0, value_mask=token_ids != 0)
    np.testing.assert_allclose(to_numpy(implicit), to_numpy(explicit), atol=1e-6)
    unmasked = layer(query, value, query_mask=np.ones((2, 4), bool), value_mask=np.ones((2, 6), bool))
    assert not np.allclose(to_numpy(implicit), to_numpy(unmasked), atol=1e-3)


def test_noise_only_in_training():
    query, value, value_mask = inputs()
    query = query[:, :1]  # one step: the noise needs no scan over steps
    noisy = make("luong", sigmoid_noise=1.0, sigmoid_noise_seed=3)
    clean = make("luong")
    noisy.build(query.shape, value.shape)
    clean.build(query.shape, value.shape)
    clean.set_weights(noisy.get_weights()[: len(clean.get_weights())])
    kwargs = {"value_mask": value_mask, "return_attention_scores": True}
    expected = to_numpy(clean(query, value, **kwargs)[1])
    np.testing.assert_allclose(to_numpy(noisy(query, value, **kwargs)[1]), expected, atol=1e-7)
    trained = to_numpy(noisy(query, value, training=True, **kwargs)[1])
    assert not np.allclose(trained, expected, atol=1e-3)
    assert np.all(trained[2] == 0)


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_given_energy_noise_is_the_noise_of_training(kind):
    # What the decoders pass: every step's standard-normal draws, scaled by
    # `sigmoid_noise` and added to the energies in training only.
    query, value, value_mask = inputs()
    layer = make(kind, sigmoid_noise=0.5)
    layer.build(query.shape, value.shape)
    set_weights(layer)
    noise = np.random.default_rng(2).normal(size=(3, 5, 7)).astype("float32")
    clean = energies(kind, layer, query, value, score_bias=SCORE_BIAS)
    kwargs = {"value_mask": value_mask, "energy_noise": noise, "return_attention_scores": True}
    for training, added in ((True, 0.5 * noise), (False, 0.0)):
        got = to_numpy(layer(query, value, training=training, **kwargs)[1])
        expected = monotonic_attention(clean + added, value_mask, "parallel")
        np.testing.assert_allclose(got, expected, atol=1e-5)
    # One step's draws `[batch, Tv]`, as a decoder's step passes them.
    step = to_numpy(layer(query[:, :1], value, training=True, **{**kwargs, "energy_noise": noise[:, 0]})[1])
    np.testing.assert_allclose(step, monotonic_attention(clean[:, :1] + 0.5 * noise[:, :1], value_mask, "parallel"), atol=1e-5)


def test_a_decoder_draws_the_noise_in_training_only():
    query, value, value_mask = inputs()
    targets = np.random.default_rng(3).normal(size=(3, 5, 6)).astype("float32")
    decoders = {
        noise: BahdanauDecoder(keras.layers.GRUCell(4), make("bahdanau", sigmoid_noise=noise, sigmoid_noise_seed=1))
        for noise in (0.0, 1.0)
    }
    for decoder in decoders.values():
        decoder.build(targets.shape, value.shape)
    decoders[1.0].set_weights(decoders[0.0].get_weights())
    clean = to_numpy(decoders[0.0](targets, value, memory_mask=value_mask, return_attention=True)[1])
    evaluated = to_numpy(decoders[1.0](targets, value, memory_mask=value_mask, return_attention=True)[1])
    np.testing.assert_allclose(evaluated, clean, atol=1e-6)
    trained = to_numpy(
        decoders[1.0](targets, value, memory_mask=value_mask, return_attention=True, training=True)[1]
    )
    assert np.all(np.isfinite(trained))
    assert not np.allclose(trained, clean, atol=1e-3), "no noise in training"
    assert np.all(trained[2] == 0), "noise on a fully masked row"


def test_parallel_form_is_stable_where_p_reaches_0_and_1():
    """The log-space cumprod keeps the alignment exact and its gradient
    finite where `1 - p` is exactly 0 (plain cumprod's gradient divides by
    it), for previous mass before the certain stops (see the layers'
    docstrings for mass after them)."""
    p = np.array([[0.0, 0.6, 1.0, 0.5, 1.0, 0.3], [1e-30, 0.2, 1.0, 0.7, 1.0, 1.0]], "float32")
    previous = np.array([[0.3, 0.7, 0.0, 0.0, 0.0, 0.0], [0.4, 0.0, 0.6, 0.0, 0.0, 0.0]], "float32")
    alignment = to_numpy(monotonic_alignment(p, previous, "parallel"))
    np.testing.assert_allclose(
        alignment, monotonic_expected_alignment(p.astype("float64"), previous), atol=1e-6
    )
    cotangent = np.random.default_rng(0).normal(size=p.shape)
    gradient = vector_jacobian_product(
        lambda x: monotonic_alignment(x, previous, "parallel"), p, cotangent
    )
    assert np.all(np.isfinite(gradient))

    def loss(p):
        return (monotonic_expected_alignment(p, previous) * cotangent).sum()

    # Where p < 1 the gradient is the formula's; where p = 1 the floor on
    # `1 - p` (the point of the log-space form) zeroes it.
    eps = 1e-6
    for index in zip(*np.nonzero(p < 1)):
        step = np.zeros(p.shape)
        step[index] = eps
        numeric = (loss(p + step) - loss(p - step)) / (2 * eps)
        np.testing.assert_allclose(gradient[index], numeric, atol=1e-4, err_msg=str(index))


@pytest.mark.parametrize("mode", ["parallel", "hard"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_masks_give_zeros_not_nan(dtype, mode):
    query, value, value_mask = inputs()
    layer = make("bahdanau", mode=mode, dtype=dtype)
    context, alignment = layer(
        query[:, 0], value, value_mask=value_mask, return_attention_scores=True
    )
    assert keras.backend.standardize_dtype(alignment.dtype) == dtype
    alignment = to_numpy(alignment).astype("float32")
    assert np.all(np.isfinite(alignment)) and np.all(np.isfinite(to_numpy(context).astype("float32")))
    assert np.all(alignment[~value_mask] == 0) and np.all(alignment[2] == 0)
    assert np.any(alignment[:2] > 0)


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_common_layer_checks(kind, tmp_path):
    # One step for Bahdanau's, three (the scan over steps) for Luong's: each
    # scan costs JAX a compilation.
    steps = 1 if kind == "bahdanau" else 3
    query, value = random_inputs(batch=2, query_length=steps, value_length=4, query_depth=4, value_depth=4)
    check_layer(
        lambda **kw: make(kind, score_bias_init=-1.0, sigmoid_noise=0.5, sigmoid_noise_seed=1, **kw),
        query,
        value,
        tmp_path,
    )


def test_config_round_trip_keeps_the_monotonic_arguments():
    layer = make(
        "bahdanau", mode="hard", sigmoid_noise=0.5, sigmoid_noise_seed=4, score_bias_init=-4.0,
        mass_preservation=True,
    )
    config = layer.get_config()
    names = ("mode", "sigmoid_noise", "sigmoid_noise_seed", "score_bias_init", "mass_preservation")
    assert {k: config[k] for k in names} == {
        "mode": "hard",
        "sigmoid_noise": 0.5,
        "sigmoid_noise_seed": 4,
        "score_bias_init": -4.0,
        "mass_preservation": True,
    }
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(clone) is BahdanauMonotonicAttention and clone.get_config() == config
    query, value = random_inputs(batch=2, query_length=1, value_length=3)
    clone(query, value)
    assert float(to_numpy(clone.attention_score_bias)) == -4.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "recursive"}, "mode"),
        ({"sigmoid_noise": -1.0}, "sigmoid_noise"),
        ({"sigmoid_noise": True}, "sigmoid_noise"),
        ({"score_bias_init": "minus four"}, "score_bias_init"),
        ({"mass_preservation": 1}, "mass_preservation"),
        ({"probability_fn": "sparsemax"}, "probability_fn"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LuongMonotonicAttention(**kwargs)


def test_bad_call_arguments_are_named():
    query, value = random_inputs(batch=2, query_length=2, value_length=3)
    layer = LuongMonotonicAttention(score="general")
    with pytest.raises(ValueError, match="previous_alignment"):
        layer(query, value, previous_alignment=np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match="mode"):
        layer(query, value, mode="soft")


@pytest.mark.parametrize(
    "decoder_class, kind, mode",
    [(BahdanauDecoder, "bahdanau", "parallel"), (LuongDecoder, "luong", "hard")],
)
def test_decoders_carry_the_alignment_step_to_step(decoder_class, kind, mode):
    """A decoder with monotonic attention over a whole target equals its
    steps one at a time, each step's attention starts from the previous
    step's alignment (the state's last entry), and hard attention never
    moves back."""
    rng = np.random.default_rng(4)
    targets = rng.normal(size=(3, 4, 3)).astype("float32")
    memory = rng.normal(size=(3, 6, 4)).astype("float32")
    memory_mask = lengths_to_mask([6, 3, 0], 6)
    extra = {} if decoder_class is BahdanauDecoder else {"input_feeding": False}
    decoder = decoder_class(keras.layers.GRUCell(4), make(kind, mode=mode), **extra)
    outputs, attention, state = decoder(
        targets, memory, memory_mask=memory_mask, return_attention=True, return_state=True
    )
    assert decoder.carries_alignment
    assert type(decoder).from_config(decoder.get_config()).carries_alignment
    with pytest.raises(ValueError, match="memory_length"):
        decoder.get_initial_state(3)
    states = decoder.get_initial_state(3, 6)
    for t in range(4):
        before = states
        output, states, alpha = decoder.step(targets[:, t], before, memory, memory_mask=memory_mask)
        # Bahdanau attends from s_{t-1}, Luong from h_t (a GRU's state is its output).
        query = before[0] if decoder_class is BahdanauDecoder else states[0]
        _, expected = decoder.attention(
            query, memory, value_mask=memory_mask, previous_alignment=before[-1],
            return_attention_scores=True,
        )
        np.testing.assert_allclose(to_numpy(alpha), to_numpy(expected), atol=1e-6)
        np.testing.assert_allclose(to_numpy(alpha), to_numpy(attention)[:, t], atol=1e-5)
        np.testing.assert_allclose(to_numpy(output), to_numpy(outputs)[:, t], atol=1e-5)
        np.testing.assert_array_equal(to_numpy(states[-1]), to_numpy(alpha))
    alignment = to_numpy(states[-1])
    np.testing.assert_allclose(to_numpy(state[-1]), alignment, atol=1e-6)
    attention = to_numpy(attention)
    assert np.all(attention[2] == 0) and np.any(attention[:2, 1:] > 0)
    if mode == "hard":
        attended = attention.sum(-1) > 0
        positions = attention.argmax(-1)
        for row, keep in zip(positions, attended):
            assert np.all(np.diff(row[keep]) >= 0)
    with pytest.raises(ValueError, match="previous alignment"):
        decoder.step(targets[:, 0], states[:-1], memory)


def test_learns_to_copy_and_decodes_hard_and_monotonic():
    """The issue's property, on the layer: trained with the expected
    alignment (and pre-sigmoid noise) to copy a random token sequence, hard
    decoding copies it, one source position per step, never moving back. A
    query knows only its target position, so the tokens can come only
    through the attention (as in `zoo.cli.layer_demo`'s reversal)."""
    vocabulary, length, depth = 12, 6, 16
    keras.utils.set_random_seed(0)
    attention = BahdanauMonotonicAttention(units=depth, sigmoid_noise=1.0, sigmoid_noise_seed=0)
    token_embedding = keras.layers.Embedding(vocabulary, depth)
    position_embedding = keras.layers.Embedding(length, depth)
    query_embedding = keras.layers.Embedding(length, depth)
    readout = keras.layers.Dense(vocabulary)

    def attend(source, **kwargs):
        positions = keras.ops.zeros_like(source) + keras.ops.arange(length, dtype="int32")
        memory = token_embedding(source) + position_embedding(positions)
        return attention(query_embedding(positions), memory, return_attention_scores=True, **kwargs)

    source = keras.Input((length,), dtype="int32")
    model = keras.Model(source, readout(attend(source)[0]))
    model.compile(
        keras.optimizers.Adam(0.02),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocabulary, (1000, length)).astype("int32")
    model.fit(tokens, tokens, batch_size=100, epochs=3, verbose=0)

    test = rng.integers(0, vocabulary, (100, length)).astype("int32")
    context, alignment = attend(test, mode="hard")
    copied = to_numpy(readout(context)).argmax(-1)
    assert (copied == test).mean() > 0.95
    alignment = to_numpy(alignment)
    assert np.all(alignment.sum(-1) == 1), "a step attended nowhere"
    assert np.all(np.diff(alignment.argmax(-1), axis=1) >= 0), "a step attended behind an earlier one"
