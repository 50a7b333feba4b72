"""`check_recipe`: does a model hold the recipe contract, and if not, which part?

The contract is `zoo.recipes.contract.SequenceGenerator`'s: `call`, `encode`,
`decode_step`, and the declarations that decoding and export read instead of
inferring (the special ids, the source spec and the image's size and grid,
the constant state entries, the attention width). A model that breaks a part
raises `ContractError` naming it, so a new recipe learns what to fix.
"""

import keras
import numpy as np
from layer_checks import to_numpy

from zoo.recipes.contract import fit_step_caches

# The parts of the contract, as `ContractError` names them.
SPECIAL_IDS = "special token ids"
SOURCE_SPEC = "source_spec"
IMAGE = "image_size and grid_shape"
STATE = "state"
CONSTANT_STATE = "constant_state_keys"
CARRIED_STATE = "carried state"
STEP_CACHES = "step_cache_axes"
ATTENTION_WIDTH = "attention width"
TEACHER_FORCING = "decode_step equals call"


class ContractError(AssertionError):
    """A model that breaks one part of the recipe contract."""

    def __init__(self, part, message):
        super().__init__(f"contract part {part!r} is broken: {message}")
        self.part = part


def check_recipe(model, source, target_in, atol=1e-5):
    """Checks every part of the contract on one batch.

    Args:
        model: a `SequenceGenerator`; built here (`build()`) when it is not,
            since decoding and export only meet built models.
        source: a source batch as `model.source_spec` describes it.
        target_in: int32 `[B, T]`, BOS first; `decode_step` is run over it.
        atol: the tolerance between `decode_step`'s and `call`'s logits.

    Returns:
        The attention of each step, float `[B, T, S]`.

    Raises:
        ContractError: naming the first part found broken.
    """
    source, target_in = np.asarray(source), np.asarray(target_in)
    _check_special_ids(model)
    _check_image_declarations(model)
    _check_source_spec(model, source)
    if not model.built:
        model.build()
    # The declarations first, step by step, and `call` last: a wrong
    # declaration can make `call` itself fail (the recurrence sizes its
    # buffers by the attention width) with an error that names no part.
    state = model.encode(source)
    _check_state(model, state, len(source))
    carried = _check_declared_state(model, state)
    width = _check_attention_width(model, state)
    steps = []
    for step in range(target_in.shape[1]):
        logits, new_state, attention = model.decode_step(target_in[:, step], state, step)
        _check_step_state(model, state, new_state, carried, step)
        attention = to_numpy(attention)
        if attention.shape != (len(source), width):
            raise ContractError(
                ATTENTION_WIDTH,
                f"attention_width(state) (axis 1 of state[{model.attention_state_key!r}]) is "
                f"{width}, but decode_step's attention at step {step} has shape "
                f"{attention.shape}",
            )
        steps.append((to_numpy(logits), attention))
        state = new_state
    expected = to_numpy(model({model.source_spec.name: source, "target_in": target_in}))
    for step, (logits, _) in enumerate(steps):
        difference = np.max(np.abs(logits - expected[:, step]))
        if not difference <= atol:
            raise ContractError(
                TEACHER_FORCING,
                f"decode_step's logits at step {step} differ from call's by {difference:.3g} "
                f"(more than {atol})",
            )
    _check_step_caches(model, source, target_in, expected, atol)
    return np.stack([attention for _, attention in steps], axis=1)


def _check_step_caches(model, source, target_in, expected, atol):
    """Each declared step cache is a carried entry with `max_target_length`
    slots on its axis, and decoding with the caches cut to the target's
    length (as a search cuts them to its step limit) still equals `call`."""
    if not model.step_cache_axes:
        return
    state = model.encode(source)
    for key, axis in model.step_cache_axes.items():
        shape = tuple(state[key].shape) if key in state else None
        if key in model.constant_state_keys or shape is None or len(shape) <= axis:
            raise ContractError(
                STEP_CACHES, f"{key!r} (axis {axis}) is not a carried entry of the state"
            )
        if shape[axis] != model.max_target_length:
            raise ContractError(
                STEP_CACHES,
                f"state[{key!r}] has {shape[axis]} slots on axis {axis}, not "
                f"max_target_length={model.max_target_length}",
            )
    state = fit_step_caches(model, state, target_in.shape[1])
    for step in range(target_in.shape[1]):
        logits, state, _ = model.decode_step(target_in[:, step], state, step)
        difference = np.max(np.abs(to_numpy(logits) - expected[:, step]))
        if not difference <= atol:
            raise ContractError(
                STEP_CACHES,
                f"with the step caches cut to {target_in.shape[1]} slots, decode_step's "
                f"logits at step {step} differ from call's by {difference:.3g}",
            )


def _check_special_ids(model):
    ids = {"pad_id": model.pad_id, "bos_id": model.bos_id, "eos_id": model.eos_id}
    size = model.target_vocabulary_size
    if len(set(ids.values())) < 3 or not all(
        isinstance(v, int) and 0 <= v < size for v in ids.values()
    ):
        raise ContractError(
            SPECIAL_IDS,
            f"{ids} must be distinct ints below target_vocabulary_size={size}",
        )


def _check_source_spec(model, source):
    spec = model.source_spec
    fits = len(spec.shape) == source.ndim and all(
        want is None or want == got for want, got in zip(spec.shape, source.shape)
    )
    if not fits or np.dtype(spec.dtype).kind != source.dtype.kind:
        raise ContractError(
            SOURCE_SPEC,
            f"source_spec {spec} does not describe the source, {source.dtype} {source.shape}",
        )


def _check_state(model, state, batch):
    if not isinstance(state, dict):
        raise ContractError(STATE, f"encode returned a {type(state).__name__}, not a flat dict")
    for key, value in state.items():
        shape = tuple(value.shape)
        if not shape or shape[0] != batch:
            raise ContractError(
                STATE, f"state[{key!r}] has shape {shape}: not batch-first (batch {batch})"
            )


def _check_declared_state(model, state):
    """The carried entries (those not declared constant)."""
    try:
        return model.carried_state_keys(state)
    except ValueError as error:
        raise ContractError(CONSTANT_STATE, str(error)) from None


def _check_image_declarations(model):
    if (model.image_size is None) != (model.grid_shape is None):
        raise ContractError(
            IMAGE,
            f"image_size={model.image_size!r} and grid_shape={model.grid_shape!r}: an image "
            "recipe declares both, any other neither",
        )


def _check_attention_width(model, state):
    """The declared attention width, which for an image recipe is the grid's size."""
    width = int(model.attention_width(state))
    if model.grid_shape is not None and int(np.prod(model.grid_shape)) != width:
        raise ContractError(
            IMAGE,
            f"grid_shape {tuple(model.grid_shape)} has {int(np.prod(model.grid_shape))} "
            f"locations, but the attention spans {width}",
        )
    return width


def _check_step_state(model, state, new_state, carried, step):
    if not isinstance(new_state, dict) or list(new_state) != list(state):
        raise ContractError(
            STATE,
            f"decode_step at step {step} returned the entries {list(new_state)}, "
            f"not encode's {list(state)}",
        )
    for key in model.constant_state_keys:
        if not np.array_equal(to_numpy(new_state[key]), to_numpy(state[key])):
            raise ContractError(
                CONSTANT_STATE,
                f"decode_step changed state[{key!r}] at step {step}, which is declared "
                "constant (beam search would not reorder it)",
            )
    for key in carried:
        before = (tuple(state[key].shape), keras.backend.standardize_dtype(state[key].dtype))
        after = (
            tuple(new_state[key].shape),
            keras.backend.standardize_dtype(new_state[key].dtype),
        )
        if before != after:
            raise ContractError(
                CARRIED_STATE,
                f"decode_step turned state[{key!r}] from {before} into {after} at step {step}: "
                "a carried entry keeps its shape and dtype (the search loop requires it)",
            )
