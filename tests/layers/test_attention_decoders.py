"""BahdanauDecoder, LuongDecoder and GNMTDecoder: the formulas, both ways of running them, and
the layer contract."""

import keras
import numpy as np
import pytest
from layer_checks import check_config_round_trip
from layer_checks import check_layer
from layer_checks import to_numpy
from numpy_reference import additive_attention
from numpy_reference import attentional_state
from numpy_reference import general_attention
from numpy_reference import gru_step
from numpy_reference import lengths_to_mask
from numpy_reference import lstm_step
from numpy_reference import maxout_attentional_state
from numpy_reference import sigmoid

from zoo.layers import AdditiveAttention
from zoo.layers import BahdanauDecoder
from zoo.layers import GNMTDecoder
from zoo.layers import LocalAttention
from zoo.layers import LuongAttention
from zoo.layers import LuongDecoder
from zoo.layers import SpatialSoftAttention

BATCH, STEPS, SOURCE, INPUT_DIM, MEMORY_DIM, UNITS = 2, 4, 5, 3, 6, 4
MEMORY_MASK = lengths_to_mask([5, 3], SOURCE)


def inputs_and_memory(seed=0, grid=False):
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(BATCH, STEPS, INPUT_DIM)).astype("float32")
    shape = (BATCH, 2, 3, MEMORY_DIM) if grid else (BATCH, SOURCE, MEMORY_DIM)
    return inputs, rng.normal(size=shape).astype("float32")


def randomize_biases(layer, seed=0):
    """Biases start at zero (or one), where a dropped bias would go unseen."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        if weight.path.endswith("bias"):
            weight.assign(rng.uniform(-1.0, 1.0, size=weight.shape))


def cell_weights(cell):
    return [to_numpy(w) for w in (cell.kernel, cell.recurrent_kernel, cell.bias)]


def additive_weights(attention):
    """W, b, U, v of an AdditiveAttention."""
    return [
        to_numpy(w)
        for w in (
            attention.query_dense.kernel,
            attention.query_dense.bias,
            attention.key_dense.kernel,
            attention.attention_v,
        )
    ]


DECODERS = {
    "bahdanau_gru_additive": lambda **kw: BahdanauDecoder(
        keras.layers.GRUCell(UNITS, **kw), AdditiveAttention(units=3, **kw), **kw
    ),
    "bahdanau_stacked_luong_concat": lambda **kw: BahdanauDecoder(
        [keras.layers.GRUCell(UNITS, **kw), keras.layers.LSTMCell(UNITS, **kw)],
        LuongAttention(score="concat", units=3, **kw),
        output_context=False,
        **kw,
    ),
    "luong_lstm_general_feeding": lambda **kw: LuongDecoder(
        keras.layers.LSTMCell(UNITS, **kw), LuongAttention(score="general", **kw), **kw
    ),
    "luong_stacked_local_m_no_feeding": lambda **kw: LuongDecoder(
        [keras.layers.LSTMCell(UNITS, **kw), keras.layers.LSTMCell(UNITS, **kw)],
        LocalAttention(mode="local-m", window=1, **kw),
        units=5,
        input_feeding=False,
        **kw,
    ),
    "luong_gru_local_p_feeding": lambda **kw: LuongDecoder(
        keras.layers.GRUCell(UNITS, **kw), LocalAttention(mode="local-p", window=1, **kw), **kw
    ),
    # The bottom cell wider than the others: the query is the bottom's state.
    "gnmt_stacked_normalized_additive": lambda **kw: GNMTDecoder(
        [keras.layers.LSTMCell(5, **kw), keras.layers.LSTMCell(UNITS, **kw),
         keras.layers.GRUCell(UNITS, **kw)],
        AdditiveAttention(units=3, normalize=True, **kw),
        output_context=True,
        **kw,
    ),
}
SPATIAL = "bahdanau_lstm_spatial"
DECODERS[SPATIAL] = lambda **kw: BahdanauDecoder(
    keras.layers.LSTMCell(UNITS, **kw), SpatialSoftAttention(units=3, **kw), **kw
)
# Each check of the layer contract calls the layer a dozen times, and JAX
# compiles the step loop anew at each eager call: the two styles only there,
# and GNMT's decoder too on the other backends (its loop is the base's).
CONTRACT_CHECKED = ("bahdanau_gru_additive", "luong_lstm_general_feeding")
if keras.backend.backend() != "jax":
    CONTRACT_CHECKED += ("gnmt_stacked_normalized_additive",)
# The three ways a target runs: Bahdanau's loop (GNMT's too), Luong's loop
# with input feeding, and Luong's keras RNN then attention at once without it.
MASK_CHECKED = (
    "bahdanau_gru_additive",
    "luong_lstm_general_feeding",
    "luong_stacked_local_m_no_feeding",
)


@pytest.fixture(params=sorted(DECODERS))
def decoder_name(request):
    return request.param


def example_inputs(name):
    """The target inputs, the memory and its mask for a decoder of DECODERS."""
    spatial = name == SPATIAL
    inputs, memory = inputs_and_memory(grid=spatial)
    return inputs, memory, None if spatial else MEMORY_MASK


# The formulas ----------------------------------------------------------------


def test_bahdanau_decoder_matches_the_papers_formula():
    """c_t = attention(s_{t-1}); s_t = GRU([x_t; c_t], s_{t-1}); output [s_t; c_t]."""
    inputs, memory = inputs_and_memory()
    decoder = DECODERS["bahdanau_gru_additive"]()
    initial = np.random.default_rng(1).normal(size=(BATCH, UNITS)).astype("float32")
    decoder.build(inputs.shape, memory.shape)
    randomize_biases(decoder)
    outputs, alignment = decoder(
        inputs, memory, memory_mask=MEMORY_MASK, initial_state=[initial], return_attention=True
    )
    attention_weights = additive_weights(decoder.attention)
    state, expected, expected_alignment = initial, [], []
    for t in range(STEPS):
        context, alpha = additive_attention(state, memory, MEMORY_MASK, *attention_weights)
        state = gru_step(
            np.concatenate([inputs[:, t], context], -1), state, *cell_weights(decoder.cell)
        )
        expected.append(np.concatenate([state, context], -1))
        expected_alignment.append(alpha)
    np.testing.assert_allclose(to_numpy(outputs), np.stack(expected, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(alignment), np.stack(expected_alignment, 1), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "input_feeding, activation", [(True, "tanh"), (False, "tanh"), (True, "maxout")]
)
def test_luong_decoder_matches_the_papers_formula(input_feeding, activation):
    """h_t = LSTM([x_t; h~_{t-1}]); c_t = attention(h_t); h~_t = tanh(W_c [c_t; h_t])
    (or the maximum of two affine maps of [c_t; h_t])."""
    inputs, memory = inputs_and_memory()
    memory = memory[..., :UNITS]  # h_t^T W_a h_s: W_a maps the memory to the query's depth
    decoder = LuongDecoder(
        keras.layers.LSTMCell(UNITS),
        LuongAttention(score="general"),
        units=5,
        input_feeding=input_feeding,
        attentional_activation=activation,
    )
    decoder.build(inputs.shape, memory.shape)
    randomize_biases(decoder)
    outputs, alignment = decoder(inputs, memory, memory_mask=MEMORY_MASK, return_attention=True)
    w_a = to_numpy(decoder.attention.key_dense.kernel)
    w_c = to_numpy(decoder.attentional_dense.kernel)
    combine = attentional_state
    if activation == "maxout":
        b_c = to_numpy(decoder.attentional_dense.bias)

        def combine(context, top, w_c):
            return maxout_attentional_state(context, top, w_c, b_c)
    h = c = np.zeros((BATCH, UNITS), "float32")
    feed = np.zeros((BATCH, 5), "float32")
    expected, expected_alignment = [], []
    for t in range(STEPS):
        x = np.concatenate([inputs[:, t], feed], -1) if input_feeding else inputs[:, t]
        h, c = lstm_step(x, h, c, *cell_weights(decoder.cell))
        context, alpha = general_attention(h, memory, MEMORY_MASK, w_a)
        feed = combine(context, h, w_c)
        expected.append(feed)
        expected_alignment.append(alpha)
    np.testing.assert_allclose(to_numpy(outputs), np.stack(expected, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(alignment), np.stack(expected_alignment, 1), rtol=1e-5, atol=1e-6
    )


def test_gnmt_decoder_matches_the_papers_formula():
    """c_t = attention(h^1_{t-1}); h^i_t = cell_i([x^i_t; c_t]); x^{i+1} = h^i_t
    (+ x^i_t from layer 3 on); output [x^4_t; c_t]."""
    inputs, memory = inputs_and_memory()
    decoder = DECODERS["gnmt_stacked_normalized_additive"]()
    rng = np.random.default_rng(1)
    sizes = (5, 5, UNITS, UNITS, UNITS)  # (h, c) of two LSTMs, then a GRU's h
    initial = [rng.normal(size=(BATCH, size)).astype("float32") for size in sizes]
    decoder.build(inputs.shape, memory.shape)
    randomize_biases(decoder)
    outputs, alignment = decoder(
        inputs, memory, memory_mask=MEMORY_MASK, initial_state=initial, return_attention=True
    )
    w, b, u, v = additive_weights(decoder.attention)
    v = to_numpy(decoder.attention.attention_g) * v / np.linalg.norm(v)
    cells = [cell_weights(cell) for cell in decoder.cells]
    (h1, c1), (h2, c2), h3 = initial[:2], initial[2:4], initial[4]
    expected, expected_alignment = [], []
    for t in range(STEPS):
        context, alpha = additive_attention(h1, memory, MEMORY_MASK, w, b, u, v)
        h1, c1 = lstm_step(np.concatenate([inputs[:, t], context], -1), h1, c1, *cells[0])
        h2, c2 = lstm_step(np.concatenate([h1, context], -1), h2, c2, *cells[1])
        h3 = gru_step(np.concatenate([h2, context], -1), h3, *cells[2])
        expected.append(np.concatenate([h3 + h2, context], -1))  # layer 3 is residual
        expected_alignment.append(alpha)
    np.testing.assert_allclose(to_numpy(outputs), np.stack(expected, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(alignment), np.stack(expected_alignment, 1), rtol=1e-5, atol=1e-6
    )


def test_spatial_decoder_matches_show_attend_and_tell():
    """z_t = beta_t sum_i alpha_ti a_i from h_{t-1}; h_t, c_t = LSTM([x_t; z_t])."""
    inputs, grid = inputs_and_memory(grid=True)
    decoder = DECODERS[SPATIAL]()
    decoder.build(inputs.shape, grid.shape)
    randomize_biases(decoder)
    outputs, alignment = decoder(inputs, grid, return_attention=True)
    assert tuple(alignment.shape) == (BATCH, STEPS, 6)
    attention_weights = additive_weights(decoder.attention.attention)
    gate = decoder.attention.gate_dense
    annotations = grid.reshape(BATCH, -1, MEMORY_DIM)
    everywhere = np.ones(annotations.shape[:2], bool)
    h = c = np.zeros((BATCH, UNITS), "float32")
    expected = []
    for t in range(STEPS):
        context, _ = additive_attention(h, annotations, everywhere, *attention_weights)
        beta = sigmoid(h @ to_numpy(gate.kernel) + to_numpy(gate.bias))
        context = beta * context
        h, c = lstm_step(
            np.concatenate([inputs[:, t], context], -1), h, c, *cell_weights(decoder.cell)
        )
        expected.append(np.concatenate([h, context], -1))
    np.testing.assert_allclose(to_numpy(outputs), np.stack(expected, 1), rtol=1e-5, atol=1e-5)


# Two ways to run, one set of numbers -------------------------------------------


def run_steps(decoder, inputs, memory, memory_mask=None):
    keys = decoder.project_memory(memory)
    state = decoder.get_initial_state(BATCH)
    outputs, alignment = [], []
    for t in range(inputs.shape[1]):
        output, state, alpha = decoder.step(
            inputs[:, t], state, memory, projected_memory=keys, memory_mask=memory_mask, step=t
        )
        outputs.append(to_numpy(output))
        alignment.append(to_numpy(alpha))
    return np.stack(outputs, 1), np.stack(alignment, 1), state


def test_step_by_step_equals_the_whole_target(decoder_name):
    inputs, memory, memory_mask = example_inputs(decoder_name)
    decoder = DECODERS[decoder_name]()
    outputs, alignment, final = decoder(
        inputs, memory, memory_mask=memory_mask, return_attention=True, return_state=True
    )
    assert len(final) == len(decoder.state_size)
    step_outputs, step_alignment, step_final = run_steps(decoder, inputs, memory, memory_mask)
    np.testing.assert_allclose(step_outputs, to_numpy(outputs), atol=1e-5)
    np.testing.assert_allclose(step_alignment, to_numpy(alignment), atol=1e-6)
    for state, expected in zip(step_final, final):
        np.testing.assert_allclose(to_numpy(state), to_numpy(expected), atol=1e-5)
    if memory_mask is not None:
        assert np.all(step_alignment[1, :, 3:] == 0), "attention on memory padding"


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the loop choice is TensorFlow's")
def test_the_while_loop_and_the_scan_agree(decoder_name):
    inputs, memory, memory_mask = example_inputs(decoder_name)
    decoder = DECODERS[decoder_name]()
    scanned = decoder(inputs, memory, memory_mask=memory_mask, xla=False, return_attention=True)
    looped = decoder(inputs, memory, memory_mask=memory_mask, xla=True, return_attention=True)
    for a, b in zip(scanned, looped):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=1e-6)


@pytest.mark.parametrize("decoder_name", MASK_CHECKED)
def test_a_masked_target_step_keeps_the_state(decoder_name):
    inputs, memory = inputs_and_memory()
    decoder = DECODERS[decoder_name]()
    lengths = [4, 2]
    inputs_mask = lengths_to_mask(lengths, STEPS)
    outputs, alignment, final = decoder(
        inputs,
        memory,
        inputs_mask=inputs_mask,
        memory_mask=MEMORY_MASK,
        return_attention=True,
        return_state=True,
    )
    outputs, alignment = to_numpy(outputs), to_numpy(alignment)
    assert np.all(outputs[1, 2:] == 0) and np.all(alignment[1, 2:] == 0)
    short, _, short_final = decoder(
        inputs[1:, :2], memory[1:], memory_mask=MEMORY_MASK[1:], return_attention=True,
        return_state=True,
    )
    np.testing.assert_allclose(outputs[1, :2], to_numpy(short)[0], atol=1e-5)
    for state, expected in zip(final, short_final):
        np.testing.assert_allclose(to_numpy(state)[1], to_numpy(expected)[0], atol=1e-5)


def test_keras_masks_of_the_memory_and_the_target_are_used():
    tokens = np.array([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]], "int32")
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(10, MEMORY_DIM, mask_zero=True)(source)
    embedded = keras.layers.Embedding(10, INPUT_DIM, mask_zero=True)(target)
    decoder = DECODERS["bahdanau_gru_additive"]()
    outputs, alignment = decoder(embedded, memory, return_attention=True)
    model = keras.Model([source, target], [outputs, alignment])
    outputs, alignment = (to_numpy(x) for x in model([tokens, tokens[:, :STEPS]]))
    assert np.all(alignment[1, :, 3:] == 0), "memory mask not taken from the Keras mask"
    assert np.all(alignment[1, 3:] == 0) and np.all(outputs[1, 3:] == 0), "target mask"
    assert np.all(alignment[0] > 0)


# The layer contract --------------------------------------------------------------


@pytest.mark.parametrize("decoder_name", CONTRACT_CHECKED)
def test_common_layer_checks(decoder_name, tmp_path):
    inputs, memory, _ = example_inputs(decoder_name)
    check_layer(DECODERS[decoder_name], inputs, memory, tmp_path)


def test_config_round_trip(decoder_name):
    inputs, memory, _ = example_inputs(decoder_name)
    check_config_round_trip(DECODERS[decoder_name], inputs, memory, {})


def test_a_subclassed_model_trains_with_fit():
    class Captioner(keras.Model):
        def __init__(self):
            super().__init__()
            self.decoder = DECODERS[SPATIAL]()
            self.logits = keras.layers.Dense(7)

        def call(self, inputs):
            return self.logits(self.decoder(inputs["words"], inputs["grid"]))

    words, grid = inputs_and_memory(grid=True)
    model = Captioner()
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = np.zeros((BATCH, STEPS), "int32")
    history = model.fit({"words": words, "grid": grid}, labels, epochs=2, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: BahdanauDecoder("gru", AdditiveAttention(2)), "cell"),
        (lambda: BahdanauDecoder(keras.layers.GRUCell(2), keras.layers.Dense(2)), "attention"),
        (lambda: LuongDecoder(keras.layers.GRUCell(2), LuongAttention(), units=0), "units"),
        (
            lambda: LuongDecoder(
                keras.layers.GRUCell(2), LuongAttention(), attentional_activation="relu"
            ),
            "attentional_activation",
        ),
        (
            lambda: GNMTDecoder(
                [keras.layers.LSTMCell(2) for _ in range(2)],
                AdditiveAttention(2),
                first_residual_layer=1,
            ),
            "first_residual_layer",
        ),
        (
            lambda: GNMTDecoder(
                [keras.layers.LSTMCell(2), keras.layers.LSTMCell(2), keras.layers.LSTMCell(3)],
                AdditiveAttention(2),
            ),
            "output size",
        ),
    ],
)
def test_bad_arguments_are_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_memory_mask_on_a_grid_is_refused():
    inputs, grid = inputs_and_memory(grid=True)
    with pytest.raises(ValueError, match="memory_mask"):
        DECODERS[SPATIAL]()(inputs, grid, memory_mask=np.ones((BATCH, 6), bool))


def test_a_wrong_initial_state_names_the_sizes():
    inputs, memory = inputs_and_memory()
    decoder = DECODERS["luong_lstm_general_feeding"]()
    with pytest.raises(ValueError, match="initial_state"):
        decoder(inputs, memory[..., :UNITS], initial_state=[np.zeros((BATCH, UNITS), "float32")])
