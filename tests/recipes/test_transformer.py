"""The Transformer recipe: the decoding contract, training, and config."""

import time

import keras
import numpy as np
import pytest
from keras import ops

from zoo.recipes.decoding import ChunkedBeamSearch
from zoo.recipes.decoding import beam_search
from zoo.recipes.decoding import greedy_search
from zoo.recipes.transformer import Transformer
from zoo.recipes.transformer import sinusoidal_positions

VOCABULARY = 20
MAX_TARGET_LENGTH = 8

# Two examples with different source lengths (the second is padded), and a
# target whose second row is padded too. 2 is BOS, 3 is EOS, 0 is PAD.
SOURCE = np.array([[5, 6, 7, 8, 9, 3], [10, 11, 3, 0, 0, 0]], "int32")
TARGET_IN = np.array([[2, 12, 13, 14, 15], [2, 16, 17, 0, 0]], "int32")
TARGET_OUT = np.array([[12, 13, 14, 15, 3], [16, 17, 3, 0, 0]], "int32")
INPUTS = {"source": SOURCE, "target_in": TARGET_IN}

# The share of unseen sequences the copy test must copy exactly.
COPIED_EXACTLY = 0.9
# (norm_first, share_target_embeddings): the paper's post-LN with its own
# output layer, and pre-LN with the output tied to the target embeddings.
VARIANTS = [(False, False), (True, True)]
VARIANT_IDS = ["post_ln", "pre_ln_tied"]


def make_model(norm_first=False, share_target_embeddings=False, **overrides):
    config = dict(
        d_model=16,
        num_heads=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        feed_forward_dim=32,
        # Dropout is on, so the tests also check that inference paths
        # (call outside fit, decode_step) do not drop.
        dropout=0.1,
        max_target_length=MAX_TARGET_LENGTH,
        max_source_length=8,
        share_target_embeddings=share_target_embeddings,
        norm_first=norm_first,
    )
    config.update(overrides)
    model = Transformer(VOCABULARY, VOCABULARY, **config)
    model(INPUTS)
    return model


def to_numpy(x):
    return ops.convert_to_numpy(x)


def decode_teacher_forced(model, source, target_in):
    """Runs `decode_step` over the reference target; returns the stacked
    logits `[B, T, V]` and attention `[B, T, S]`."""
    state = model.encode(source)
    logits, attention = [], []
    for t in range(target_in.shape[1]):
        # Alternate python ints and scalar tensors, the two kinds of `step`.
        step = t if t % 2 == 0 else ops.convert_to_tensor(t, "int32")
        step_logits, state, step_attention = model.decode_step(target_in[:, t], state, step)
        logits.append(to_numpy(step_logits))
        attention.append(to_numpy(step_attention))
    return np.stack(logits, axis=1), np.stack(attention, axis=1)


@pytest.mark.parametrize("norm_first,share", VARIANTS, ids=VARIANT_IDS)
def test_decode_step_matches_teacher_forced_call(norm_first, share):
    """THE contract: step-by-step decoding computes what `call` computes."""
    model = make_model(norm_first, share)
    expected = to_numpy(model(INPUTS))
    assert expected.shape == TARGET_IN.shape + (VOCABULARY,)
    logits, _ = decode_teacher_forced(model, SOURCE, TARGET_IN)
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-5)


def test_decode_step_inside_a_while_loop_matches_call():
    """`step` as a loop variable (a traced scalar on JAX and TensorFlow)
    indexes the positional table and the cache correctly."""
    model = make_model()
    expected = to_numpy(model(INPUTS))
    steps = TARGET_IN.shape[1]
    targets = ops.convert_to_tensor(TARGET_IN)

    def body(step, state, collected):
        tokens = ops.take(targets, step, axis=1)
        logits, state, _ = model.decode_step(tokens, state, step)
        collected = ops.slice_update(
            collected, [0, step, 0], ops.expand_dims(ops.cast(logits, "float32"), 1)
        )
        return step + 1, state, collected

    initial = (
        ops.convert_to_tensor(0, "int32"),
        model.encode(SOURCE),
        ops.zeros((2, steps, VOCABULARY), "float32"),
    )
    _, _, logits = ops.while_loop(lambda step, *_: step < steps, body, initial)
    np.testing.assert_allclose(to_numpy(logits), expected, rtol=0, atol=1e-5)


def test_step_attention_is_the_teacher_forced_alignment():
    model = make_model()
    _, attention = decode_teacher_forced(model, SOURCE, TARGET_IN)
    batch, source_length = SOURCE.shape
    assert attention.shape == (batch, TARGET_IN.shape[1], source_length)
    padded = SOURCE == 0
    # Exactly zero on padding, a distribution over the real tokens.
    assert np.all(attention[np.broadcast_to(padded[:, None, :], attention.shape)] == 0)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    expected = to_numpy(model.attention_weights(INPUTS))
    np.testing.assert_allclose(attention, expected, rtol=0, atol=1e-5)


def test_state_is_a_flat_batch_first_dict_that_can_be_gathered():
    model = make_model()
    batch = SOURCE.shape[0]
    state = model.encode(SOURCE)
    assert isinstance(state, dict) and "source_mask" in state
    for key, value in state.items():
        assert not isinstance(value, (dict, list, tuple)), key
        assert ops.is_tensor(value), key
        assert value.shape[0] == batch, (key, value.shape)
    assert state["source_mask"].shape == SOURCE.shape
    assert state["self_cache_0"].shape == (batch, 2, MAX_TARGET_LENGTH, 2, 8)
    assert state["cross_cache_1"].shape == (batch, 2, SOURCE.shape[1], 2, 8)

    # Reordering every entry with one gather reorders the decoding: a state
    # gathered mid-sentence keeps decoding the right examples.
    order = np.array([1, 0, 0], "int32")
    _, state, _ = model.decode_step(TARGET_IN[:, 0], state, 0)
    gathered = {key: ops.take(value, order, axis=0) for key, value in state.items()}
    logits, _, _ = model.decode_step(TARGET_IN[order, 1], gathered, 1)
    expected = to_numpy(model(INPUTS))[order, 1]
    np.testing.assert_allclose(to_numpy(logits), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("search", [greedy_search, beam_search], ids=["greedy", "beam"])
def test_searches_cut_the_self_attention_caches_to_their_step_limit(search, monkeypatch):
    model = make_model(max_target_length=32)
    slots = []
    decode_step = model.decode_step

    def recording_step(tokens, state, step):
        slots.append(state["self_cache_0"].shape[2])
        return decode_step(tokens, state, step)

    monkeypatch.setattr(model, "decode_step", recording_step)
    cut = search(model, SOURCE, max_length=5)
    assert slots and set(slots) == {5}

    # The same search over the whole 32-slot caches gives the same result.
    monkeypatch.setattr(Transformer, "step_cache_axes", {})
    slots.clear()
    whole = search(model, SOURCE, max_length=5)
    assert set(slots) == {32}
    np.testing.assert_array_equal(to_numpy(cut.tokens), to_numpy(whole.tokens))
    np.testing.assert_allclose(to_numpy(cut.scores), to_numpy(whole.scores), atol=1e-5)
    np.testing.assert_allclose(to_numpy(cut.attention), to_numpy(whole.attention), atol=1e-5)


@pytest.mark.parametrize("norm_first,share", VARIANTS, ids=VARIANT_IDS)
def test_one_fit_step_moves_every_weight(norm_first, share):
    """With plain SGD a weight moves by `-learning_rate * gradient`, so a
    weight that does not move got no gradient. There is no weight to
    excuse: the attention projections have no biases (as in the paper), so
    the key bias, whose gradient softmax makes exactly zero, does not exist.
    """
    model = make_model(norm_first, share)
    assert not any(w.path.endswith("key/bias") for w in model.weights)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    weights = model.trainable_weights
    # 2 embeddings; an encoder block has 4 attention kernels, the FFN's 2
    # kernels and 2 biases, and 2 norms of 2 weights; a decoder block 8
    # attention kernels, the FFN's 4 weights and 3 norms.
    expected_count = 2 + 2 * (4 + 4 + 2 * 2) + 2 * (8 + 4 + 3 * 2)
    expected_count += 2 * 2 if norm_first else 0
    expected_count += 0 if share else 2
    assert len(weights) == expected_count
    before = [to_numpy(w).copy() for w in weights]
    model.fit(INPUTS, TARGET_OUT, batch_size=2, epochs=1, verbose=0)
    for weight, old in zip(weights, before):
        assert not np.array_equal(to_numpy(weight), old), f"{weight.path} did not move"


def test_d_model_must_be_divisible_by_num_heads():
    with pytest.raises(ValueError, match=r"d_model.*num_heads.*d_model=10, num_heads=4"):
        Transformer(VOCABULARY, VOCABULARY, d_model=10, num_heads=4)


def test_longer_target_than_the_cache_is_an_error():
    model = Transformer(VOCABULARY, VOCABULARY, d_model=8, num_heads=2, max_target_length=4)
    with pytest.raises(ValueError, match="max_target_length"):
        model(INPUTS)


def test_config_round_trip_and_save(tmp_path):
    model = make_model(norm_first=True, share_target_embeddings=True, dropout=0.0)
    config = model.get_config()
    assert Transformer.from_config(config).get_config() == config
    path = str(tmp_path / "transformer.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded, Transformer)
    np.testing.assert_allclose(
        to_numpy(reloaded(INPUTS)), to_numpy(model(INPUTS)), rtol=0, atol=1e-6
    )


def test_beam_search_in_chunks_grows_the_self_attention_caches_to_the_same_result():
    """The chunks start from a cache of `chunk_steps` slots and grow it:
    the search is the one over the whole cache."""
    model = make_model(norm_first=True, dropout=0.0)
    # An untrained model may end every hypothesis within one chunk, as it
    # did on one backend's initialisation; barring EOS makes every
    # search run to the step limit, `MAX_TARGET_LENGTH`, over three chunks.
    bias = to_numpy(model.output_projection.bias).copy()
    bias[model.eos_id] = -1e4
    model.output_projection.bias.assign(bias)
    whole = beam_search(model, SOURCE, 3, length_penalty=0.6)
    chunked = ChunkedBeamSearch(model, 3, length_penalty=0.6, chunk_steps=3)(SOURCE)
    assert int(chunked.num_steps) == MAX_TARGET_LENGTH
    np.testing.assert_array_equal(chunked.beam_tokens, to_numpy(whole.beam_tokens))
    np.testing.assert_allclose(chunked.beam_scores, to_numpy(whole.beam_scores), rtol=1e-5)
    np.testing.assert_allclose(chunked.attention, to_numpy(whole.attention), atol=1e-6)


def test_shared_embeddings_are_one_matrix_for_source_target_and_output(tmp_path):
    model = make_model(norm_first=True, share_all_embeddings=True, dropout=0.0)
    separate = make_model(norm_first=True, share_target_embeddings=True, dropout=0.0)
    table = VOCABULARY * 16
    # One table fewer than with the target's tied to the output alone.
    assert model.count_params() == separate.count_params() - table
    assert model.source_embedding.embeddings is model.target_embedding.embeddings
    # The source side reads the very matrix the output projects with.
    embeddings = to_numpy(model.target_embedding.embeddings)
    np.testing.assert_allclose(to_numpy(model.source_embedding(SOURCE)), embeddings[SOURCE])
    path = str(tmp_path / "shared.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.share_all_embeddings and reloaded.share_target_embeddings
    assert len(reloaded.weights) == len(model.weights)
    np.testing.assert_allclose(
        to_numpy(reloaded(INPUTS)), to_numpy(model(INPUTS)), rtol=0, atol=1e-6
    )


def test_the_weights_keep_the_order_that_older_run_directories_were_saved_in():
    # A weights file lists the layers in the order they were made: with the
    # target embedding made first, a trained run's tables loaded swapped and
    # it translated nonsense.
    names = [w.path.split("/", 1)[1] for w in make_model().weights[:2]]
    assert names == ["source_embedding/embeddings", "target_embedding/embeddings"]


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match=r"joint vocabulary.*20 entries.*21.*--shared-vocabulary"):
        Transformer(20, 21, d_model=8, num_heads=2, share_all_embeddings=True)


def test_positional_encodings_are_the_papers():
    table = sinusoidal_positions(5, 6)
    pos, i = 3, 2  # columns 2i = 4 and 2i + 1 = 5
    np.testing.assert_allclose(table[pos, 4], np.sin(pos / 10000 ** (2 * i / 6)), rtol=1e-6)
    np.testing.assert_allclose(table[pos, 5], np.cos(pos / 10000 ** (2 * i / 6)), rtol=1e-6)


def test_it_learns_to_copy():
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 10, size=(1000, 5)).astype("int32")
    bos = np.full((1000, 1), 2, "int32")
    eos = np.full((1000, 1), 3, "int32")
    model = Transformer(
        10,
        10,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        feed_forward_dim=32,
        dropout=0.0,
        max_target_length=6,
        max_source_length=5,
        norm_first=True,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    started = time.perf_counter()
    history = model.fit(
        {"source": tokens, "target_in": np.concatenate([bos, tokens], axis=1)},
        np.concatenate([tokens, eos], axis=1),
        batch_size=50,
        # Enough that every seed tried copies all 50 unseen sequences: with
        # 8 epochs one seed (or one thread count) still copied only 58%.
        epochs=12,
        verbose=0,
    )
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0], (losses, time.perf_counter() - started)
    # What it learned: greedy decoding copies sequences it never saw.
    unseen = np.random.default_rng(1).integers(4, 10, size=(50, 5)).astype("int32")
    copies = to_numpy(greedy_search(model, unseen, max_length=6).tokens)
    exact = np.mean(np.all(copies[:, :5] == unseen, axis=1) & (copies[:, 5] == 3))
    assert exact >= COPIED_EXACTLY, f"only {exact:.0%} of unseen sequences copied exactly"
