"""Greedy search in NumPy, and what beam search shares with it: the step
limit, the search's result (`DecodeResult`), the step caches cut to the
limit, and the ids of a result cut at EOS."""

import math
from typing import Any
from typing import NamedTuple

import numpy as np

from .search_settings import _is_int


# The algorithms of `zoo.recipes.decoding`, step for step: the same step
# limit, the same expansion, tie-breaking, stopping rules and n-best list.

# A "minus infinity" that stays finite (`zoo.recipes.decoding.NEG_INF`).
NEG_INF = -1e9


class DecodeResult(NamedTuple):
    """`zoo.recipes.decoding.DecodeResult`, of NumPy arrays."""

    tokens: Any
    lengths: Any
    scores: Any
    attention: Any
    finished: Any
    num_steps: Any
    penalized_scores: Any = None
    beam_tokens: Any = None
    beam_lengths: Any = None
    beam_scores: Any = None
    beam_penalized_scores: Any = None
    beam_finished: Any = None


def max_decoding_steps(model, source_length, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.max_decoding_steps` for a python int length."""
    if max_length is not None:
        if not _is_int(max_length) or max_length < 1:
            raise ValueError(
                f"`max_length` must be a positive int or None. Received: max_length={max_length!r}"
            )
        limit = int(max_length)
    else:
        limit = max(1, math.ceil(max_length_ratio * int(source_length)) + int(max_length_offset))
    cap = getattr(model, "max_target_length", None)
    return min(limit, int(cap)) if cap is not None else limit


def greedy_search(model, source, max_length=None, max_length_ratio=1.5, max_length_offset=10):
    """`zoo.recipes.decoding.greedy_search` over NumPy arrays.

    The argmax of the running total of float32 log-probabilities, PAD fed
    back after EOS, the same step limit, and a stop when every example has
    ended.

    Unlike the compiled search, whose loop keeps the batch's shape, the
    model is run only on the examples still decoding (`_worth_dropping`).
    Each example's result is its own (the model's rows are independent), so
    the tokens are the same either way.

    Args:
        model: an `OnnxModel` (or any object with the contract over NumPy
            arrays).
        source: int32 `[B, S]` token ids (or images `[B, H, W, 3]`).
        max_length, max_length_ratio, max_length_offset: the step limit
            (`max_decoding_steps`).

    Returns:
        A `DecodeResult` (the beam fields None).
    """
    source = np.asarray(source)
    batch = source.shape[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    state = _fit_step_caches(model, state, limit)
    tokens = np.full((batch,), model.bos_id, "int32")
    logits, state, attention = model.decode_step(tokens, state, 0)
    hypotheses = np.zeros((batch, limit), "int32")
    alignment = np.zeros((batch, limit, source_width), "float32")
    scores = np.zeros((batch,), "float32")
    lengths = np.zeros((batch,), "int32")
    finished = np.zeros((batch,), bool)
    rows = np.arange(batch)  # the example of each row the model runs
    step = 0
    while True:
        ended = finished[rows]
        best, log_prob = _best_tokens(np.asarray(logits, "float32"))
        tokens = np.where(ended, model.pad_id, best).astype("int32")
        hypotheses[rows, step] = tokens
        alignment[rows, step] = np.where(ended[:, None], 0.0, attention)
        scores[rows] = np.where(ended, scores[rows], scores[rows] + log_prob)
        lengths[rows] += ~ended
        finished[rows] |= tokens == model.eos_id
        step += 1
        if step >= limit or finished.all():
            break
        not_ended = ~finished[rows]
        if _worth_dropping(not_ended):
            state = _keep_rows(state, not_ended)
            rows, tokens = rows[not_ended], tokens[not_ended]
        logits, state, attention = model.decode_step(tokens, state, step)
    # PAD after each end up to the last step, as the compiled search writes
    # it for an example that is no longer run.
    hypotheses[:, :step][np.arange(step) >= lengths[:, None]] = model.pad_id
    return DecodeResult(
        tokens=hypotheses,
        lengths=lengths,
        scores=scores,
        attention=alignment,
        finished=finished,
        num_steps=np.int32(step),
    )


def _worth_dropping(still_running):
    """Whether the searches drop the examples that no longer run from the
    model's rows: once an eighth of them have ended (or are done).

    A step's cost grows with its rows, and in a batch of sentences of
    similar length the last to end (often one that repeats itself up to the
    step limit) would otherwise keep every row running; each drop copies the
    state once, so it waits for an eighth.
    """
    return 8 * np.count_nonzero(~still_running) >= len(still_running)


def _keep_rows(state, rows):
    """The state's entries, of the rows `rows` (a boolean mask) only."""
    return {key: np.asarray(value)[rows] for key, value in state.items()}


def _best_tokens(logits):
    """Each row's most likely token and its log-probability.

    The argmax of the logits is that of the log-probabilities plus the
    running score, so only the chosen token's log-probability is computed,
    not the whole row's (the greedy step runs once per target token).
    """
    best = logits.argmax(axis=-1)
    highest = logits[np.arange(len(logits)), best]
    shifted = logits - highest[:, None]
    np.exp(shifted, out=shifted)
    return best, -np.log(shifted.sum(axis=-1))


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    shifted -= np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return shifted


def _fit_step_caches(model, state, steps):
    """`zoo.recipes.contract.fit_step_caches`: each declared step cache cut
    to its first `steps` slots, all that a search of `steps` steps uses."""
    fitted = dict(state)
    for key, axis in getattr(model, "step_cache_axes", {}).items():
        cut = [slice(None)] * np.ndim(state[key])
        cut[axis] = slice(0, steps)
        fitted[key] = np.ascontiguousarray(state[key][tuple(cut)])
    return fitted


def decode_to_lists(tokens, eos_id, pad_id, include_eos=False):
    """`zoo.recipes.decoding.decode_to_lists`: ids cut at the first EOS."""
    array = np.asarray(tokens)
    if array.ndim == 1:
        sequence = [int(t) for t in array]
        if eos_id in sequence:
            end = sequence.index(eos_id)
            return sequence[: end + 1] if include_eos else sequence[:end]
        while sequence and sequence[-1] == pad_id:
            sequence.pop()
        return sequence
    return [decode_to_lists(row, eos_id, pad_id, include_eos) for row in array]
