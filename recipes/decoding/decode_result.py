"""What every search returns, and what greedy and beam search share.

`DecodeResult`, the result of every search; `max_decoding_steps`, the step
limit (the length of its buffers); `decode_to_lists`, its token ids as
python lists cut at EOS. The search modules of this package also import two
private helpers from here: `_write_step` (one step into a buffer) and
`_is_int` (for their argument checks).
"""

import math
from typing import Any
from typing import NamedTuple

import numpy as np
from keras import ops

from zoo.recipes.contract import EOS_ID
from zoo.recipes.contract import PAD_ID


class DecodeResult(NamedTuple):
    """What `greedy_search` and `beam_search` return (a NamedTuple, so it is
    a pytree on JAX, a nest on TensorFlow, and `_asdict()` gives a dict for
    serving signatures).

    `L` is the step limit (see `max_decoding_steps`), `S` the attention width
    (the padded source length), `K` the beam width.

    Attributes:
        tokens: int32 `[B, L]`, the chosen hypothesis of each example, without
            BOS, with EOS where it was produced and PAD after it.
        lengths: int32 `[B]`, the number of produced tokens, EOS included.
        scores: float32 `[B]`, the sum of the log-probabilities of the
            produced tokens, log P(Y | X).
        attention: float32 `[B, L, S]`, the attention of each produced token
            over the source (the alignment matrix), zero after the end.
        finished: bool `[B]`, whether the hypothesis ended with EOS (False
            when it was cut by the step limit).
        num_steps: int32 scalar, the number of decoding steps run (fewer than
            `L` when every example ended early).
        penalized_scores: beam search only: float32 `[B]`, the GNMT score
            `log P(Y|X) / lp(Y) + cp(X; Y)` that chose the hypothesis.
        beam_tokens: beam search only: int32 `[B, K, L]`, the n-best list,
            best first: finished hypotheses by penalised score, then (only to
            fill the list) the unfinished ones that the beam held when the
            example stopped (at the step limit or by the stopping rule), by
            penalised score. Unused slots hold PAD.
        beam_lengths: beam search only: int32 `[B, K]` (0 for unused slots).
        beam_scores: beam search only: float32 `[B, K]`, log P(Y|X) of each
            entry (NEG_INF for unused slots).
        beam_penalized_scores: beam search only: float32 `[B, K]`.
        beam_finished: beam search only: bool `[B, K]`, whether each entry
            ended with EOS (False for the unfinished ones and unused slots).
    """

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


def max_decoding_steps(
    model,
    source_length,
    max_length=None,
    max_length_ratio=1.5,
    max_length_offset=10,
):
    """The step limit of a search: the length of the output buffers.

    `max_length` when given, else `ceil(max_length_ratio * source_length) +
    max_length_offset` (at least 1); either way capped at
    `model.max_target_length` when the model sets it (a Transformer cannot
    decode past its key/value cache).

    Args:
        model: the model; only `max_target_length` is read.
        source_length: the padded source length, a python int or (under
            `tf.function` with an unknown length) a scalar tensor.
        max_length, max_length_ratio, max_length_offset: as in `greedy_search`.

    Returns:
        A python int, or an int32 scalar tensor when `source_length` is one.
    """
    if max_length is not None:
        if not _is_int(max_length) or max_length < 1:
            raise ValueError(
                f"`max_length` must be a positive int or None. Received: max_length={max_length!r}"
            )
        limit = int(max_length)
    elif isinstance(source_length, (int, np.integer)):
        limit = max(1, math.ceil(max_length_ratio * int(source_length)) + int(max_length_offset))
    else:
        scaled = ops.ceil(max_length_ratio * ops.cast(source_length, "float32"))
        limit = ops.maximum(ops.cast(scaled, "int32") + int(max_length_offset), 1)
    cap = getattr(model, "max_target_length", None)
    if cap is not None:
        limit = min(limit, int(cap)) if isinstance(limit, int) else ops.minimum(limit, int(cap))
    return limit


def decode_to_lists(tokens, eos_id=EOS_ID, pad_id=PAD_ID, include_eos=False):
    """Token ids as python lists, cut at the first EOS, for detokenizing.

    Args:
        tokens: a `DecodeResult` (its `tokens` are used) or an int array of
            any rank whose last axis is time, such as `result.beam_tokens`.
        eos_id: the end token; everything after the first one is dropped.
        pad_id: trailing PAD of a sequence without EOS is dropped too (it is
            the unused tail of the buffer).
        include_eos: keep the EOS token itself.

    Returns:
        Nested python lists of ints, one list per sequence, e.g.
        `[[5, 9, 4], [7]]` for `[B, L]` tokens.
    """
    if isinstance(tokens, DecodeResult):
        tokens = tokens.tokens
    array = np.asarray(ops.convert_to_numpy(tokens))
    if array.ndim == 0:
        raise ValueError(f"`tokens` must have a time axis. Received a scalar: {array!r}")

    def cut(sequence):
        sequence = [int(t) for t in sequence]
        if eos_id in sequence:
            end = sequence.index(eos_id)
            return sequence[: end + 1] if include_eos else sequence[:end]
        while sequence and sequence[-1] == pad_id:
            sequence.pop()
        return sequence

    if array.ndim == 1:
        return cut(array)
    return [decode_to_lists(row, eos_id, pad_id, include_eos) for row in array]


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _write_step(buffer, step, value, axis):
    """`buffer[step] = value` along the step axis `axis` of `buffer`: 1 for
    greedy's `[B, L, ...]` buffers, 0 for beam's time-major `[L, B, ...]`
    history; `value` is the buffer without that axis."""
    start = [0] * len(buffer.shape)
    start[axis] = step
    return ops.slice_update(buffer, start, ops.expand_dims(ops.cast(value, buffer.dtype), axis))
