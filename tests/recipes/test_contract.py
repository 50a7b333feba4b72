"""The recipe contract as code (`zoo.recipes.contract`): every registered
preset holds it, and a recipe that breaks one part fails naming that part.

Each broken recipe below is a tiny RNNSearch or ShowAttendTell with one
mistake a new recipe could make.
"""

import doctest

import numpy as np
import pytest
from contract_checks import ATTENTION_WIDTH
from contract_checks import CARRIED_STATE
from contract_checks import CONSTANT_STATE
from contract_checks import IMAGE
from contract_checks import SOURCE_SPEC
from contract_checks import SPECIAL_IDS
from contract_checks import STATE
from contract_checks import STEP_CACHES
from contract_checks import TEACHER_FORCING
from contract_checks import ContractError
from contract_checks import check_recipe
from keras import ops

import zoo.recipes.contract
from tiny_configs import IMAGES
from tiny_configs import LOCATIONS
from tiny_configs import SOURCE
from tiny_configs import TARGET_IN
from tiny_configs import TINY
from tiny_configs import VOCABULARY
from tiny_configs import inputs
from tiny_configs import is_captioning
from tiny_configs import source_of
from tiny_configs import tiny_model
from zoo.recipes.decoding import beam_search
from zoo.recipes.rnnsearch import RNNSearch
from zoo.recipes.show_attend_tell import ShowAttendTell
from zoo.recipes.transformer import Transformer


def test_every_preset_holds_the_contract(preset_name):
    model = tiny_model(preset_name)
    attention = check_recipe(model, source_of(preset_name), TARGET_IN)
    if is_captioning(preset_name):
        assert attention.shape == (2, TARGET_IN.shape[1], LOCATIONS)
        np.testing.assert_allclose(attention.sum(-1), 1.0, rtol=1e-5)
    else:
        assert attention.shape == (2, TARGET_IN.shape[1], SOURCE.shape[1])
        assert np.all(attention[1, :, 3:] == 0), "attention on padding"
    # The teacher-forced alignment (plots, AER) is the one decoding attends with.
    teacher_forced = ops.convert_to_numpy(model.attention_weights(inputs(preset_name)))
    np.testing.assert_allclose(teacher_forced, attention, atol=1e-5)


# Broken recipes ----------------------------------------------------------------


class WritesIntoAConstant(RNNSearch):
    """A coverage-like recipe that damps what it attended to in `memory`, an
    entry it still declares constant (beam search would not reorder it)."""

    def decode_step(self, previous_tokens, state, step):
        logits, state, attention = super().decode_step(previous_tokens, state, step)
        memory = state["memory"] * (1.0 - ops.expand_dims(attention, -1))
        return logits, dict(state, memory=memory), attention


class DeclaresAMissingConstant(RNNSearch):
    """Declares an entry `encode` does not return (a renamed one)."""

    constant_state_keys = ("memory", "keys", "source_mask")


class DeclaresTheWrongAttentionEntry(Transformer):
    """Names its first self-attention cache `[B, 2, T, H, key_dim]` as the
    entry of the attention width: 2, not the source length. (A recurrent
    recipe with this mistake fails sooner, in `call`, whose recurrence sizes
    its buffers by the width.)"""

    attention_state_key = "self_cache_0"


class DeclaresItsCachesOnTheHeadsAxis(Transformer):
    """Declares axis 3 of `[B, 2, T, H, key_dim]` as the caches' slots: a
    search would cut the heads, not the positions."""

    @property
    def step_cache_axes(self):
        return {key: 3 for key in super().step_cache_axes}


class ForgetsItsState(RNNSearch):
    """`decode_step` returns the state it was given: teacher forcing and
    decoding part ways from the second step."""

    def decode_step(self, previous_tokens, state, step):
        logits, _, attention = super().decode_step(previous_tokens, state, step)
        return logits, state, attention


class ChangesACarriedDtype(RNNSearch):
    """A carried entry drifts to float16 (the search's while loop refuses it)."""

    def decode_step(self, previous_tokens, state, step):
        logits, state, attention = super().decode_step(previous_tokens, state, step)
        return logits, dict(state, decoder_state=ops.cast(state["decoder_state"], "float16")), attention


class KeepsAnUnbatchedEntry(RNNSearch):
    """A position table `[S]` in the state: beam search tiles and gathers
    every entry along axis 0."""

    constant_state_keys = RNNSearch.constant_state_keys + ("positions",)

    def encode(self, source, training=None):
        state = super().encode(source, training=training)
        return dict(state, positions=ops.arange(ops.shape(source)[1]))


class SwapsItsSpecialIds(RNNSearch):
    """Its end token is its padding token (set after the constructor's check)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.eos_id = self.pad_id


class DropsAGridLocation(ShowAttendTell):
    """Attends over one location fewer than the grid it declares (as a
    recipe that adds a summary token, or pools, without updating the grid)."""

    def encode(self, image, training=None):
        state = super().encode(image, training=training)
        return dict(
            state,
            features=state["features"][:, 1:],
            projected_features=state["projected_features"][:, 1:],
        )


class DeclaresAnotherImageSize(ShowAttendTell):
    """Declares 32x32 images but is fed (and built for) 16x16 ones."""

    @property
    def source_spec(self):
        spec = super().source_spec
        return spec._replace(shape=(None, 32, 32, 3))


BROKEN = [
    (WritesIntoAConstant, CONSTANT_STATE, "changed state['memory'] at step 0"),
    (DeclaresAMissingConstant, CONSTANT_STATE, "['keys']"),
    (DeclaresTheWrongAttentionEntry, ATTENTION_WIDTH, "state['self_cache_0']) is 2"),
    (ForgetsItsState, TEACHER_FORCING, "at step 1"),
    (DeclaresItsCachesOnTheHeadsAxis, STEP_CACHES, "slots on axis 3"),
    (ChangesACarriedDtype, CARRIED_STATE, "state['decoder_state']"),
    (KeepsAnUnbatchedEntry, STATE, "state['positions']"),
    (SwapsItsSpecialIds, SPECIAL_IDS, "'eos_id': 0"),
    (DropsAGridLocation, IMAGE, "16 locations, but the attention spans 15"),
    (DeclaresAnotherImageSize, SOURCE_SPEC, "(None, 32, 32, 3)"),
]


def tiny(recipe):
    if issubclass(recipe, ShowAttendTell):
        return recipe(VOCABULARY, **TINY["show_attend_tell"])
    config = TINY["transformer" if issubclass(recipe, Transformer) else "rnnsearch"]
    return recipe(VOCABULARY, VOCABULARY, **config)


@pytest.mark.parametrize(
    "recipe,part,words", BROKEN, ids=[recipe.__name__ for recipe, _, _ in BROKEN]
)
def test_a_broken_recipe_fails_naming_the_broken_part(recipe, part, words):
    source = IMAGES if issubclass(recipe, ShowAttendTell) else SOURCE
    with pytest.raises(ContractError) as error:
        check_recipe(tiny(recipe), source, TARGET_IN)
    assert error.value.part == part, str(error.value)
    assert f"contract part {part!r}" in str(error.value)
    assert words in str(error.value)


def test_beam_search_refuses_a_declared_constant_that_the_state_lacks():
    with pytest.raises(ValueError, match=r"constant_state_keys names \['keys'\]"):
        beam_search(tiny(DeclaresAMissingConstant), SOURCE, beam_width=2, max_length=2)


@pytest.mark.parametrize(
    "ids,words",
    [
        ({"eos_id": 0}, "must be distinct. Received: pad_id=0, bos_id=2, eos_id=0"),
        ({"pad_id": -1}, "pad_id=-1"),
        ({"bos_id": 2.0}, "bos_id=2.0"),
        ({"eos_id": VOCABULARY}, f"target_vocabulary_size={VOCABULARY}"),
    ],
)
def test_the_constructor_refuses_bad_special_ids(ids, words):
    with pytest.raises(ValueError) as error:
        RNNSearch(20, VOCABULARY, **TINY["rnnsearch"], **ids)
    assert words in str(error.value)


def test_the_docstring_example_runs():
    results = doctest.testmod(zoo.recipes.contract, optionflags=doctest.ELLIPSIS)
    assert results.attempted and not results.failed
