"""Greedy search: the most probable token at every step, over the contract
that `zoo.recipes.decoding` (the package docstring) describes."""

from keras import ops

from zoo.recipes.contract import fit_step_caches
from zoo.recipes.decoding.decode_result import DecodeResult
from zoo.recipes.decoding.decode_result import _write_step
from zoo.recipes.decoding.decode_result import max_decoding_steps


def greedy_search(
    model,
    source,
    max_length=None,
    max_length_ratio=1.5,
    max_length_offset=10,
):
    """Decode by taking the most probable token at every step.

    Args:
        model: a model with the encode/decode_step contract (the
            docstring of `zoo.recipes.decoding`).
        source: the model's source batch, e.g. int32 `[B, S]` token ids with
            PAD (0) as padding.
        max_length: optional int, the most tokens to produce (EOS included).
        max_length_ratio, max_length_offset: when `max_length` is None the
            limit is `ceil(max_length_ratio * S) + max_length_offset`, with
            `S` the attention width, `model.attention_width(state)` (the
            padded source length of a token source). Either limit is capped
            at `model.max_target_length`.

    Returns:
        A `DecodeResult` (the beam-only fields are None). The loop stops as
        soon as every example has produced EOS.

    Example:

    >>> result = greedy_search(model, source)  # doctest: +SKIP
    >>> decode_to_lists(result)  # token ids, cut at EOS  # doctest: +SKIP
    """
    source = ops.convert_to_tensor(source)
    batch = ops.shape(source)[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    state = fit_step_caches(model, state, limit)
    hypotheses = {
        "tokens": ops.zeros((batch, limit), "int32"),
        "attention": ops.zeros((batch, limit, source_width), "float32"),
        "scores": ops.zeros((batch,), "float32"),
        "lengths": ops.zeros((batch,), "int32"),
        "finished": ops.zeros((batch,), "bool"),
    }
    step = ops.convert_to_tensor(0, "int32")
    tokens = ops.full((batch,), model.bos_id, dtype="int32")

    def cond(step, tokens, state, hypotheses):
        return ops.logical_and(step < limit, ops.logical_not(ops.all(hypotheses["finished"])))

    def body(step, tokens, state, hypotheses):
        logits, state, attention = model.decode_step(tokens, state, step)
        tokens, hypotheses = _greedy_update(model, step, logits, attention, hypotheses)
        return step + 1, tokens, state, hypotheses

    num_steps, _, _, hypotheses = ops.while_loop(cond, body, (step, tokens, state, hypotheses))
    return DecodeResult(
        tokens=hypotheses["tokens"],
        lengths=hypotheses["lengths"],
        scores=hypotheses["scores"],
        attention=hypotheses["attention"],
        finished=hypotheses["finished"],
        num_steps=num_steps,
    )


def _greedy_update(model, step, logits, attention, hypotheses):
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    # The argmax of the running total, not of the step's log-probabilities:
    # the same numbers beam search ranks, so that beam_width=1 is this search
    # to the last bit even where rounding makes two candidates tie.
    totals = ops.expand_dims(hypotheses["scores"], -1) + log_probs
    token = ops.cast(ops.argmax(totals, axis=-1), "int32")
    total = ops.max(totals, axis=-1)
    done = hypotheses["finished"]
    token = ops.where(done, model.pad_id, token)
    attention = ops.where(ops.expand_dims(done, -1), 0.0, ops.cast(attention, "float32"))
    hypotheses = {
        "tokens": _write_step(hypotheses["tokens"], step, token, axis=1),
        "attention": _write_step(hypotheses["attention"], step, attention, axis=1),
        "scores": ops.where(done, hypotheses["scores"], total),
        "lengths": hypotheses["lengths"] + ops.cast(ops.logical_not(done), "int32"),
        "finished": ops.logical_or(done, ops.equal(token, model.eos_id)),
    }
    return token, hypotheses
