"""A monotonic RNNsearch (Raffel et al., 2017) decodes without looking back:
at every step of greedy and beam search its hard alignment is one-hot or
zero, never behind an earlier step's position; `fit` trains the expected
alignment; it learns to copy, and cannot learn to reverse."""

import keras
import numpy as np
import pytest
from keras import ops

from tiny_configs import SOURCE
from tiny_configs import TARGET_IN
from tiny_configs import TINY
from tiny_configs import VOCABULARY
from toy_tasks import VOCABULARY as VOCABULARY_OF_TOYS
from toy_tasks import train_and_score
from zoo.recipes.decoding import beam_search
from zoo.recipes.decoding import greedy_search
from zoo.recipes.rnnsearch import RNNSearch


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    model = RNNSearch(VOCABULARY, VOCABULARY, **TINY["rnnsearch"], attention="monotonic")
    model.build()
    # Untrained, the tiny decoder's state and energies hardly change from
    # step to step, so every step would stop where the first did; larger
    # weights make the stops move, so that a step that can move back does
    # (the bias r starts at 0 and stays there).
    for weight in model.decoder.weights + model.target_embedding.weights:
        weight.assign(weight * 10.0)
    return model


def stop_positions(attention):
    """Each step's position, `[B, L]`; a step that attends nowhere counts as
    past the end (and every later step must too)."""
    return np.where(attention.sum(-1) > 0, attention.argmax(-1), attention.shape[-1])


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_decoding_never_attends_behind_an_earlier_step(model, search):
    if search == "greedy":
        result = greedy_search(model, SOURCE, max_length=8)
    else:
        result = beam_search(model, SOURCE, beam_width=3, max_length=8)
    attention = ops.convert_to_numpy(result.attention)
    assert np.all((attention == 0) | (attention == 1)), "a hard alignment is one-hot or zero"
    assert np.all(attention.sum(-1) <= 1)
    assert np.all(attention[1, :, 3:] == 0), "attention on padding"
    positions = stop_positions(attention)
    assert np.all(np.diff(positions, axis=1) >= 0), f"moved back: {positions}"
    # The check means something only where the steps move on.
    assert np.any(np.diff(positions, axis=1) > 0), f"the steps never move: {positions}"


def test_fit_trains_the_expected_alignment_and_the_rest_the_hard_one(model):
    inputs = {"source": SOURCE, "target_in": TARGET_IN}
    state = model.encode(SOURCE)
    embedded = model.embed_targets(TARGET_IN)
    expected = ops.convert_to_numpy(model.run_recurrence(embedded, state, training=True)[1])
    assert np.all(expected.sum(-1) <= 1 + 1e-5)
    assert np.any((expected > 1e-3) & (expected < 1 - 1e-3)), "training ran the hard mode"
    hard = ops.convert_to_numpy(model.attention_weights(inputs))
    assert np.all((hard == 0) | (hard == 1)), "teacher forcing outside fit is not the hard mode"
    assert model.decoder.attention.mode == "parallel"


def test_attention_is_validated_and_in_the_config():
    with pytest.raises(ValueError, match="Received: attention='hard'"):
        RNNSearch(VOCABULARY, VOCABULARY, **TINY["rnnsearch"], attention="hard")
    model = RNNSearch(VOCABULARY, VOCABULARY, **TINY["rnnsearch"], attention="monotonic")
    assert model.get_config()["attention"] == "monotonic"
    assert RNNSearch.from_config(model.get_config()).recurrent_state_keys == (
        "decoder_state",
        "alignment",
    )


# A learning check of the recipe, so once: the layer's numerics are tested on
# every backend (tests/layers/test_monotonic_attention.py), and the sweeps
# train this preset's noisy `fit` on each.
@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="a training run: once, on tensorflow"
)
@pytest.mark.parametrize("reverse", [False, True], ids=["copy", "reversal"])
def test_a_monotonic_rnnsearch_learns_to_copy_but_not_to_reverse(reverse):
    # Its alignment only moves forward: copying follows the diagonal, while
    # reversal's first word is the source's last, after which no step can
    # move back to the words before it (docs/recipes.md). The decoder's
    # initial state still carries the source, as RNNencdec's does, so some
    # short sentences reverse without the attention.
    keras.utils.set_random_seed(0)
    model = RNNSearch(
        VOCABULARY_OF_TOYS, VOCABULARY_OF_TOYS, embedding_dim=16, hidden_dim=32,
        attention_units=32, maxout_units=16, attention="monotonic",
    )
    exact, aer, attention, _ = train_and_score(model, reverse=reverse)
    positions = stop_positions(attention)
    assert np.all(np.diff(positions, axis=1) >= 0), f"moved back: {positions}"
    if reverse:
        assert exact <= 0.5, f"reversed {exact:.0%} of sentences exactly"
        assert aer >= 0.5, f"an alignment error rate of {aer:.2f} on reversal"
    else:
        assert exact >= 0.8, f"copied only {exact:.0%} of sentences exactly"
        assert aer <= 0.15, f"an alignment error rate of {aer:.2f} on copying"
