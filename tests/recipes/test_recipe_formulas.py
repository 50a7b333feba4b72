"""Each recipe's own formulas against an independent NumPy step.

`decode_step` equals `call` by construction (both run the same step), so
that test can't tell a wrong formula from a right one. Here every weight is
set to random non-zero values (biases included), one step is computed in
NumPy from the papers' equations and the model's weights, and the recipe
must give the same initial state, attention, new state and logits.
"""

import numpy as np
import pytest
from keras import ops

from numpy_reference import masked_softmax
from zoo.recipes.gnmt import GNMT
from zoo.recipes.luong import Luong
from zoo.recipes.rnnencdec import RNNEncDec
from zoo.recipes.rnnsearch import RNNSearch
from zoo.recipes.show_attend_tell import ShowAttendTell

SOURCE = np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32")
TOKENS = (np.array([2, 2], "int32"), np.array([7, 9], "int32"))  # BOS, then a word


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def randomized(model):
    """`model` built, every weight (biases too) drawn from N(0, 0.5^2)."""
    model.build()
    rng = np.random.default_rng(7)
    for variable in model.weights:
        if "moving_variance" in variable.path:
            variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype("float32"))
        else:
            variable.assign(rng.normal(0.0, 0.5, variable.shape).astype("float32"))
    return model


def weight(model, suffix):
    """The one weight of `model` whose path ends with `/suffix`, as NumPy."""
    found = [v for v in model.weights if v.path.endswith("/" + suffix)]
    assert len(found) == 1, f"{suffix}: {[v.path for v in found]}"
    return ops.convert_to_numpy(found[0])


def dense(model, name, x):
    """`x W + b` of the Dense layer `name` (no b when it has none)."""
    out = x @ weight(model, f"{name}/kernel")
    if any(v.path.endswith(f"/{name}/bias") for v in model.weights):
        out = out + weight(model, f"{name}/bias")
    return out


def gru_cell(model, name, x, h):
    """Keras' GRUCell (reset_after, gates z, r, h): Cho et al.'s GRU with the
    reset gate applied after the recurrent product."""
    bias = weight(model, f"{name}/bias")
    inputs = x @ weight(model, f"{name}/kernel") + bias[0]
    inner = h @ weight(model, f"{name}/recurrent_kernel") + bias[1]
    xz, xr, xh = np.split(inputs, 3, axis=-1)
    hz, hr, hh = np.split(inner, 3, axis=-1)
    z, r = sigmoid(xz + hz), sigmoid(xr + hr)
    candidate = np.tanh(xh + r * hh)
    return z * h + (1 - z) * candidate


def lstm_cell(model, name, x, h, c):
    """Keras' LSTMCell (gates i, f, c, o)."""
    z = (
        x @ weight(model, f"{name}/kernel")
        + h @ weight(model, f"{name}/recurrent_kernel")
        + weight(model, f"{name}/bias")
    )
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def additive_attention(model, prefix, query, memory, mask, normalize=False):
    """Bahdanau's `v^T tanh(W_a q + U_a h_j)`, softmax over valid j; with
    `normalize`, `v` is `g v / ||v||` (normalised Bahdanau attention)."""
    projected_query = dense(model, f"{prefix}/query_dense", query)
    projected_keys = dense(model, f"{prefix}/key_dense", memory)
    v = weight(model, f"{prefix}/attention_v")
    if normalize:
        v = weight(model, f"{prefix}/attention_g") * v / np.linalg.norm(v)
    scores = np.tanh(projected_query[:, None, :] + projected_keys) @ v
    alpha = masked_softmax(scores, mask)
    return (alpha[:, :, None] * memory).sum(axis=1), alpha


def numpy(x):
    return ops.convert_to_numpy(x).astype("float64")


def assert_close(actual, expected, what):
    np.testing.assert_allclose(numpy(actual), expected, rtol=1e-4, atol=1e-5, err_msg=what)


def test_rnnsearch_initial_state_attention_gru_step_and_maxout():
    hidden, maxout = 6, 3
    model = randomized(
        RNNSearch(11, 13, embedding_dim=5, hidden_dim=hidden, attention_units=4, maxout_units=maxout)
    )
    state = model.encode(SOURCE)
    memory, mask = numpy(state["memory"]), SOURCE != 0
    # s_0 = tanh(W_s h_1_backward): the backward GRU's state at the first word.
    s = np.tanh(dense(model, "initial_state", memory[:, 0, hidden:]))
    assert_close(state["decoder_state"], s, "s_0")
    embeddings = weight(model, "target_embedding/embeddings")
    for step, tokens in enumerate(TOKENS):
        logits, state, attention = model.decode_step(tokens, state, step)
        e = embeddings[tokens]
        context, alpha = additive_attention(model, "attention", s, memory, mask)
        t = dense(model, "readout", np.concatenate([s, e, context], -1))  # uses s_{i-1}
        t = np.maximum(t[:, :maxout], t[:, maxout:])
        s = gru_cell(model, "decoder_cell", np.concatenate([e, context], -1), s)
        assert_close(attention, alpha, f"alpha at step {step}")
        assert_close(state["decoder_state"], s, f"s at step {step}")
        assert_close(logits, dense(model, "output_projection", t), f"logits at step {step}")


def test_show_attend_tell_initial_state_gate_and_deep_output():
    model = randomized(
        ShowAttendTell(
            13, image_size=16, encoder_filters=(4,), feature_dim=5,
            embedding_dim=4, hidden_dim=6, attention_units=3,
        )
    )
    images = np.random.default_rng(0).uniform(size=(2, 16, 16, 3)).astype("float32")
    state = model.encode(images)
    features = numpy(state["features"])
    mean = features.mean(axis=1)
    h = np.tanh(dense(model, "init_h", mean))
    c = np.tanh(dense(model, "init_c", mean))
    assert_close(state["hidden"], h, "h_0")
    assert_close(state["cell"], c, "c_0")
    embeddings = weight(model, "target_embedding/embeddings")
    everywhere = np.ones(features.shape[:2], bool)
    for step, tokens in enumerate(TOKENS):
        logits, state, attention = model.decode_step(tokens, state, step)
        e = embeddings[tokens]
        context, alpha = additive_attention(model, "attention/attention", h, features, everywhere)
        beta = sigmoid(dense(model, "attention/gate", h))  # the gate reads h_{t-1}
        z = beta * context
        h, c = lstm_cell(model, "decoder_cell", np.concatenate([e, z], -1), h, c)
        deep = e + dense(model, "L_h", h) + dense(model, "L_z", z)
        assert_close(attention, alpha, f"alpha at step {step}")
        assert_close(state["hidden"], h, f"h at step {step}")
        assert_close(state["cell"], c, f"c at step {step}")
        assert_close(logits, dense(model, "L_o", deep), f"logits at step {step}")


def luong_general_step(model, tops, memory, mask):
    """`h~ = tanh(W_c [c; h])` with the general score `h^T W_a h_s`, and the
    logits `W_s h~`, for top states `[B, T, H]`."""
    keys = memory @ weight(model, "attention/key_dense/kernel")
    alpha = masked_softmax(np.einsum("bth,bsh->bts", tops, keys), mask[:, None, :])
    context = np.einsum("bts,bsh->bth", alpha, memory)
    attentional = np.tanh(
        np.concatenate([context, tops], -1) @ weight(model, "attentional_state/kernel")
    )
    return dense(model, "output_projection", attentional), alpha, attentional


@pytest.mark.parametrize("input_feeding", [False, True], ids=["no_feeding", "feeding"])
def test_luong_stacked_lstm_attentional_state_and_input_feeding(input_feeding):
    layers = 2
    model = randomized(
        Luong(11, 13, embedding_dim=5, hidden_dim=6, num_layers=layers,
              score="general", input_feeding=input_feeding)
    )
    state = model.encode(SOURCE)
    memory, mask = numpy(state["memory"]), SOURCE != 0
    states = [(numpy(state[f"h_{i}"]), numpy(state[f"c_{i}"])) for i in range(layers)]
    feed = np.zeros((len(SOURCE), 6))
    embeddings = weight(model, "target_embedding/embeddings")
    expected_logits = []
    for step, tokens in enumerate(TOKENS):
        logits, state, attention = model.decode_step(tokens, state, step)
        x = embeddings[tokens]
        if input_feeding:
            x = np.concatenate([x, feed], -1)  # h~_{t-1} beside the word
        for i in range(layers):
            x, c = lstm_cell(model, f"decoder_cell_{i}", x, *states[i])
            states[i] = (x, c)
        step_logits, alpha, attentional = luong_general_step(model, x[:, None], memory, mask)
        feed = attentional[:, 0]
        expected_logits.append(step_logits[:, 0])
        assert_close(attention, alpha[:, 0], f"alpha at step {step}")
        assert_close(logits, step_logits[:, 0], f"logits at step {step}")
        if input_feeding:
            assert_close(state["feed"], feed, f"h~ fed at step {step}")
    # Teacher forcing (for input feeding off: the stacked LSTM first, then
    # every step attends at once) gives the same logits.
    target_in = np.stack(TOKENS, axis=1)
    logits = model({"source": SOURCE, "target_in": target_in})
    assert_close(logits, np.stack(expected_logits, axis=1), "teacher-forced logits")


def test_luong_local_p_predicts_its_centre_and_weighs_by_the_gaussian():
    # Luong et al. 2015, eqs. 9-10: p_t = S sigmoid(v_p^T tanh(W_p h_t)) with
    # S the true source length, the general score's softmax over the
    # positions within D of p_t, times exp(-(s - p_t)^2 / (2 (D/2)^2)).
    window = 1
    model = randomized(
        Luong(11, 13, embedding_dim=5, hidden_dim=6, num_layers=1, attention="local-p",
              score="general", window=window, input_feeding=False)
    )
    state = model.encode(SOURCE)
    memory, mask = numpy(state["memory"]), SOURCE != 0
    h, c = numpy(state["h_0"]), numpy(state["c_0"])
    embeddings = weight(model, "target_embedding/embeddings")
    lengths = mask.sum(axis=1)
    positions = np.arange(SOURCE.shape[1])
    for step, tokens in enumerate(TOKENS):
        logits, state, attention = model.decode_step(tokens, state, step)
        h, c = lstm_cell(model, "decoder_cell_0", embeddings[tokens], h, c)
        hidden = np.tanh(dense(model, "position_dense", h))
        centre = lengths * sigmoid(hidden @ weight(model, "position_v"))
        distance = positions[None] - centre[:, None]
        inside = (np.abs(distance) <= window) & mask
        keys = memory @ weight(model, "attention/key_dense/kernel")
        alpha = masked_softmax(np.einsum("bh,bsh->bs", h, keys), inside)
        alpha = alpha * np.exp(-(distance**2) / (2 * (window / 2) ** 2))
        context = np.einsum("bs,bsh->bh", alpha, memory)
        attentional = np.tanh(
            np.concatenate([context, h], -1) @ weight(model, "attentional_state/kernel")
        )
        assert_close(attention, alpha, f"alpha at step {step}")
        assert_close(logits, dense(model, "output_projection", attentional), f"logits at step {step}")


def lstm_over_source(model, name, inputs, mask, backwards=False):
    """Keras' LSTM over `[B, S, D]`, a padded step keeping the state: the
    outputs `[B, S, H]` (valid positions only) and the final (h, c)."""
    units = weight(model, f"{name}/recurrent_kernel").shape[0]
    h = c = np.zeros((inputs.shape[0], units))
    outputs = np.zeros(inputs.shape[:2] + (units,))
    positions = range(inputs.shape[1])
    for j in reversed(positions) if backwards else positions:
        new_h, new_c = lstm_cell(model, name, inputs[:, j], h, c)
        keep = mask[:, j, None]
        h, c = np.where(keep, new_h, h), np.where(keep, new_c, c)
        outputs[:, j] = h
    return outputs, h, c


@pytest.mark.parametrize("output_context", [False, True])
def test_gnmt_bidirectional_bottom_residuals_from_layer_3_and_context_to_every_layer(
    output_context,
):
    # Wu et al. 2016, section 3: layer 1 of the encoder is bidirectional;
    # x^{i+1} = LSTM_i(x^i) + x^i from layer 3 on, in encoder and decoder;
    # the bottom decoder layer's h^1_{t-1} attends (normalised Bahdanau) and
    # the context is fed to every decoder layer; the softmax reads the top
    # (and the context, with `output_context`).
    layers, hidden = 4, 6
    model = randomized(
        GNMT(
            11, 13, embedding_dim=5, hidden_dim=hidden, num_layers=layers, attention_units=4,
            output_context=output_context,
        )
    )
    state = model.encode(SOURCE)
    mask = SOURCE != 0
    x = weight(model, "source_embedding/embeddings")[SOURCE]
    forward, *_ = lstm_over_source(model, "encoder_0/forward_lstm/lstm_cell", x, mask)
    backward, h, c = lstm_over_source(
        model, "encoder_0/backward_lstm/lstm_cell", x, mask, backwards=True
    )
    x = np.concatenate([forward, backward], -1)
    states = [(h, c)]  # decoder layer i starts from encoder layer i's final state
    for i in range(1, layers):
        outputs, h, c = lstm_over_source(model, f"encoder_{i}/lstm_cell", x, mask)
        x = outputs + x if i + 1 >= 3 else outputs
        states.append((h, c))
    memory = numpy(state["memory"])
    assert_close(memory[mask], x[mask], "the top encoder layer's outputs")
    for i, (h, c) in enumerate(states):
        assert_close(state[f"h_{i}"], h, f"h_{i} from encoder layer {i + 1}")
        assert_close(state[f"c_{i}"], c, f"c_{i} from encoder layer {i + 1}")
    embeddings = weight(model, "target_embedding/embeddings")
    for step, tokens in enumerate(TOKENS):
        logits, state, attention = model.decode_step(tokens, state, step)
        context, alpha = additive_attention(
            model, "decoder/attention", states[0][0], memory, mask, normalize=True
        )
        x = embeddings[tokens]
        for i in range(layers):
            h, c = lstm_cell(
                model, f"decoder_cell_{i}", np.concatenate([x, context], -1), *states[i]
            )
            states[i] = (h, c)
            x = h + x if i + 1 >= 3 else h
        assert_close(attention, alpha, f"alpha at step {step}")
        for i, (h, c) in enumerate(states):
            assert_close(state[f"h_{i}"], h, f"decoder h_{i} at step {step}")
            assert_close(state[f"c_{i}"], c, f"decoder c_{i} at step {step}")
        features = np.concatenate([x, context], -1) if output_context else x
        assert_close(logits, dense(model, "output_projection", features), f"logits at step {step}")


@pytest.mark.parametrize("cell_type", ["gru", "lstm"])
def test_rnnencdec_readout_sees_state_word_and_summary(cell_type):
    hidden = 6
    model = randomized(
        RNNEncDec(11, 13, embedding_dim=5, hidden_dim=hidden, cell_type=cell_type, readout_dim=4)
    )
    state = model.encode(SOURCE)
    summary = numpy(state["summary"])
    h = np.tanh(dense(model, "initial_state", summary))
    c = np.zeros_like(h)
    assert_close(state["decoder_h"], h, "s_0 = tanh(W c)")
    embeddings = weight(model, "target_embedding/embeddings")
    for step, tokens in enumerate(TOKENS):
        logits, state, _ = model.decode_step(tokens, state, step)
        e = embeddings[tokens]
        x = np.concatenate([e, summary], -1)
        if cell_type == "gru":
            h = gru_cell(model, "decoder_cell", x, h)
        else:
            h, c = lstm_cell(model, "decoder_cell", x, h, c)
        readout = np.tanh(dense(model, "readout", np.concatenate([h, e, summary], -1)))
        assert_close(logits, dense(model, "output_projection", readout), f"logits at step {step}")


def test_reverse_source_reads_each_sentence_backwards_before_its_padding():
    reversed_model = randomized(RNNEncDec(11, 13, embedding_dim=5, hidden_dim=6, reverse_source=True))
    plain_model = RNNEncDec(11, 13, embedding_dim=5, hidden_dim=6, reverse_source=False)
    plain_model.build()
    plain_model.set_weights(reversed_model.get_weights())
    backwards = np.array([[3, 7, 6, 5, 0], [3, 9, 8, 0, 0]], "int32")
    np.testing.assert_allclose(
        numpy(reversed_model.encode(SOURCE)["summary"]),
        numpy(plain_model.encode(backwards)["summary"]),
        rtol=1e-5, atol=1e-6,
    )
    assert not np.allclose(
        numpy(plain_model.encode(SOURCE)["summary"]), numpy(plain_model.encode(backwards)["summary"])
    )


def test_luong_bidirectional_encoder_reads_both_ways_and_zeros_start_the_decoder():
    model = randomized(
        Luong(11, 13, embedding_dim=5, hidden_dim=6, num_layers=1,
              bidirectional_encoder=True, initial_state="zeros")
    )
    state = model.encode(SOURCE)
    memory = numpy(state["memory"])
    assert memory.shape == (2, 5, 6)  # each direction half of hidden_dim
    for i in range(1):
        assert not numpy(state[f"h_{i}"]).any() and not numpy(state[f"c_{i}"]).any()
    # The first word's state: its forward half has read that word only, its
    # backward half the whole sentence back from its last word.
    changed = SOURCE.copy()
    changed[0, 2] = 9
    other = numpy(model.encode(changed)["memory"])
    assert_close(other[0, 0, :3], memory[0, 0, :3], "forward half before the change")
    assert np.abs(other[0, 0, 3:] - memory[0, 0, 3:]).max() > 1e-4
    assert_close(other[1], memory[1], "the other sentence")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"bidirectional_encoder": True, "hidden_dim": 7}, "even"),
        ({"initial_state": "encoder_last"}, "initial_state"),
    ],
)
def test_luong_refuses_options_it_cannot_build(options, message):
    with pytest.raises(ValueError, match=message):
        Luong(11, 13, **{"embedding_dim": 5, "hidden_dim": 6, **options})
