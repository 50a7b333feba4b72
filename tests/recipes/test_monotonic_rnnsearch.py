"""A monotonic RNNsearch (Raffel et al., 2017) decodes without looking back:
at every step of greedy and beam search its hard alignment is one-hot or
zero, never behind an earlier step's position; `fit` trains the expected
alignment."""

import keras
import numpy as np
import pytest
from keras import ops

from tiny_configs import SOURCE
from tiny_configs import TARGET_IN
from tiny_configs import TINY
from tiny_configs import VOCABULARY
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
    # weights make the stops move, so that a step that can move back does.
    for weight in model.decoder.weights + model.target_embedding.weights:
        if "score_bias" not in weight.path:
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
