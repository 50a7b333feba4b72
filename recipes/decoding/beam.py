"""Beam search with GNMT's length and coverage penalties, as one loop.

`beam_search` and its private parts: the checked options
(`_BeamSettings`), the search before its first step (`_beam_start`), the
step loop (`_beam_steps`, one step `_BeamUpdate`), and the n-best list
followed back through the history (`_beam_result`, `_backtrack`). The
penalties are in `penalties`; `chunked_beam` runs the same parts as chunks
of steps.

Why not keras-hub's `BeamSampler`: it scores hypotheses by the raw
log-probability only (no GNMT length or coverage penalty), it has no notion of
attention (so it cannot return the alignment matrix nor accumulate coverage),
it keeps finished beams in the beam instead of setting them aside, and it
drives a causal LM through a `next(prompt, cache, index)` callback over a
fixed-length prompt buffer rather than the encode/decode_step contract. The
parts it shares with this module (tile the state, gather it with the beams)
are a few lines each.
"""

from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from zoo.recipes.contract import carried_state_keys
from zoo.recipes.contract import fit_step_caches
from zoo.recipes.decoding.decode_result import DecodeResult
from zoo.recipes.decoding.decode_result import _is_int
from zoo.recipes.decoding.decode_result import _write_step
from zoo.recipes.decoding.decode_result import max_decoding_steps
from zoo.recipes.decoding.penalties import _coverage_mask
from zoo.recipes.decoding.penalties import _GnmtScorer

# A "minus infinity" that stays finite: sums and differences of it never make
# NaN, and anything below NEG_INF / 2 is treated as impossible.
NEG_INF = -1e9
# How beam search decides that an example is done (see `beam_search`).
STOPPING_RULES = ("early", "exact")


def beam_search(
    model,
    source,
    beam_width=4,
    length_penalty=0.0,
    coverage_penalty=0.0,
    max_length=None,
    max_length_ratio=1.5,
    max_length_offset=10,
    stopping="early",
):
    """Beam search with the GNMT length and coverage penalties.

    The search keeps `beam_width` live hypotheses per example and expands
    them by their raw log-probability. A candidate that produces EOS leaves
    the beam for a separate store of `beam_width` finished hypotheses per
    example, ranked by the GNMT score (Wu et al. 2016, eq. 14):

        s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y)
        lp(Y) = ((5 + |Y|) / 6) ** length_penalty
        cp(X; Y) = coverage_penalty * sum_i log(min(sum_j p_ij, 1))

    with `|Y|` counting EOS, `p_ij` the attention of target step j (EOS
    included) on source position i, and the sum over non-padded positions i
    (PAD in a rank-2 token source; every position otherwise). A finished
    hypothesis stays finished: it is never extended, its length and score
    are frozen, and its live slot is refilled by the other beams' candidates.

    When an example is done is set by `stopping`; a done example's search
    is frozen (its live hypotheses are kept as they are, no longer
    expanded), so its result does not depend on the rest of the batch, and
    the loop ends when every example is done or at the step limit. Both
    rules bound what a live hypothesis (log-probability `s`, length `t`) can
    still reach: log-probabilities only fall and `cp <= 0`, so the bounds
    leave the coverage penalty out.

    - `"exact"`: done when no live hypothesis can beat the best finished
      one at any length up to the limit: `lp` grows with the length, so
      the best an extension can reach is `s / lp(limit)`. The chosen
      hypothesis is then the one a search run to the step limit would
      choose; but the bound almost never holds before the limit, so most
      examples run all `limit` steps.
    - `"early"` (the default, the common rule of beam search decoders): also
      done once the example has `beam_width` finished hypotheses and no
      live one beats the worst of them at its current length,
      `s / lp(t)`. With `length_penalty > 0` this can return another
      result than `"exact"`: a live hypothesis' penalised score can still
      rise as it grows (when its next tokens cost less than the growth of
      `lp`), and such a hypothesis is no longer followed. With
      `length_penalty = 0` the two rules are the same (with or without
      the coverage penalty): both bounds are `s`, and the worst finished
      hypothesis beating `s` implies the best one does.

    The chosen hypothesis is the best finished one by `s(Y, X)`, or, for an
    example with none, the best live one at the limit. The n-best list holds
    the finished ones, then the live ones at the example's last step to fill
    it (as OpenNMT-py's does at the limit), marked in `beam_finished`: a
    beam of K always gives K entries, since every candidate that finished at
    the last step entered the finished store.

    With `beam_width=1` (and no penalties) this is exactly `greedy_search`:
    same tokens, same scores.

    Args:
        model: a model with the encode/decode_step contract.
        source: the model's source batch, e.g. int32 `[B, S]` with PAD = 0.
        beam_width: int >= 1, the number of hypotheses kept per example.
        length_penalty: float >= 0, alpha; 0 ranks by log P(Y|X) alone,
            larger values favour longer hypotheses (GNMT used 0.6 - 0.7).
        coverage_penalty: float >= 0, beta; favours hypotheses whose
            attention covers every source word (GNMT used 0.2).
        max_length, max_length_ratio, max_length_offset: the step limit, as
            in `greedy_search`.
        stopping: `"early"` (default) or `"exact"`, when an example is
            done (see above).

    Returns:
        A `DecodeResult` with every field set: the best hypothesis of each
        example, its `penalized_scores`, and the n-best list in the `beam_*`
        fields.

    References:
        Wu et al., "Google's Neural Machine Translation System: Bridging the
        Gap between Human and Machine Translation", 2016, section 7.
    """
    settings = _BeamSettings.checked(beam_width, length_penalty, coverage_penalty, stopping)
    source = ops.convert_to_tensor(source)
    state = model.encode(source)
    limit = max_decoding_steps(
        model, model.attention_width(state), max_length, max_length_ratio, max_length_offset
    )
    step, tokens, state, search, coverage_mask = _beam_start(model, source, state, limit, limit, settings)
    num_steps, _, _, search = _beam_steps(
        model, settings, coverage_mask, limit, limit, step, tokens, state, search
    )
    return _beam_result(search, num_steps, settings, coverage_mask, model.pad_id)


class _BeamSettings(NamedTuple):
    """The checked options of one beam search."""

    width: int
    alpha: float
    beta: float
    early: bool

    @classmethod
    def checked(cls, beam_width, length_penalty, coverage_penalty, stopping):
        if not _is_int(beam_width) or beam_width < 1:
            raise ValueError(
                f"`beam_width` must be a positive int. Received: beam_width={beam_width!r}"
            )
        for name, value in (
            ("length_penalty", length_penalty),
            ("coverage_penalty", coverage_penalty),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or value < 0:
                raise ValueError(f"`{name}` must be a float >= 0. Received: {name}={value!r}")
        if not isinstance(stopping, str) or stopping not in STOPPING_RULES:
            raise ValueError(
                f"`stopping` must be one of {STOPPING_RULES}. Received: stopping={stopping!r}"
            )
        return cls(int(beam_width), float(length_penalty), float(coverage_penalty), stopping == "early")


def _beam_start(model, source, state, limit, cache_steps, settings):
    """The search before its first step: `(step, tokens, state, search,
    coverage_mask)`, with `state` (from `encode`) cut to `cache_steps`
    cache slots and tiled to K rows per example, and buffers for `limit`
    steps."""
    width = settings.width
    batch = ops.shape(source)[0]
    source_width = model.attention_width(state)
    state = fit_step_caches(model, state, cache_steps)
    state = keras.tree.map_structure(lambda x: ops.repeat(x, width, axis=0), state)
    coverage_mask = _coverage_mask(source, batch, source_width, model.pad_id)

    # At step 0 every beam of an example holds the same BOS: only the first
    # is live, so the first expansion yields K distinct tokens.
    first = ops.convert_to_tensor([0.0] + [NEG_INF] * (width - 1), "float32")
    flat = (batch * width,)
    # The history is kept as back-pointers, written once per step and
    # followed back once at the end (`_backtrack`), instead of token and
    # attention buffers `[B*K, L, ...]` that every step reordered and copied
    # into the finished store, a cost that grew with L (docs/performance.md
    # has the timings of both versions).
    search = {
        "alive_scores": ops.reshape(ops.zeros((batch, width), "float32") + first, flat),
        # Each live hypothesis' length: the step count, frozen when its
        # example is done.
        "alive_lengths": ops.zeros(flat, "int32"),
        "history": {
            "tokens": ops.zeros((limit, batch * width), "int32"),
            "parents": ops.zeros((limit, batch * width), "int32"),
            "attention": ops.zeros((limit, batch * width, source_width), "float32"),
        },
        "finished_rows": ops.zeros(flat, "int32"),
        "finished_scores": ops.full(flat, NEG_INF, "float32"),
        "finished_penalized": ops.full(flat, NEG_INF, "float32"),
        "finished_lengths": ops.zeros(flat, "int32"),
        "done": ops.zeros((batch,), "bool"),
    }
    if settings.beta:
        # Only the coverage penalty needs each live hypothesis' attention sum.
        search["alive_coverage"] = ops.zeros((batch * width, source_width), "float32")
    step = ops.convert_to_tensor(0, "int32")
    tokens = ops.full((batch * width,), model.bos_id, dtype="int32")
    return step, tokens, state, search, coverage_mask


def _beam_steps(model, settings, coverage_mask, limit, stop, step, tokens, state, search):
    """Runs the search from `step` until every example is done or `stop`
    (at most the step limit `limit`); returns `(step, tokens, state,
    search)`."""
    batch = ops.shape(search["done"])[0]
    scorer = _GnmtScorer(settings.alpha, settings.beta, coverage_mask, batch, settings.width)
    carried = carried_state_keys(model, state)
    update = _BeamUpdate(model, carried, batch, settings.width, limit, scorer, settings.early)

    def cond(step, tokens, state, search):
        return ops.logical_and(step < stop, ops.logical_not(ops.all(search["done"])))

    def body(step, tokens, state, search):
        logits, state, attention = model.decode_step(tokens, state, step)
        tokens, state, search = update(step, logits, attention, state, search)
        return step + 1, tokens, state, search

    return ops.while_loop(cond, body, (step, tokens, state, search))


class _BeamUpdate:
    """One beam-search step after `decode_step`: expand, set aside the
    finished candidates, reorder the live beams and their state."""

    def __init__(self, model, carried, batch, width, limit, scorer, early):
        self.model = model
        self.early = early
        self.carried = carried
        self.batch = batch
        self.width = width
        self.limit = limit
        self.scorer = scorer

    def __call__(self, step, logits, attention, state, search):
        batch, width = self.batch, self.width
        # A done example's live hypotheses are kept, not expanded.
        was_done = ops.repeat(search["done"], width)  # [B*K]
        expandable = ops.where(was_done, NEG_INF, search["alive_scores"])
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        vocabulary = ops.shape(log_probs)[-1]
        totals = ops.expand_dims(expandable, -1) + log_probs
        totals = ops.reshape(totals, (batch, width * vocabulary))
        top_scores, top = ops.top_k(totals, width)  # [B, K], best first
        top = ops.cast(top, "int32")
        origin = _flat_indices(batch, width, top // vocabulary)
        token = ops.reshape(top % vocabulary, (-1,))

        # The state follows its beam: one gather per tensor.
        def reorder(x):
            return ops.take(x, origin, axis=0)

        # An entry the model declares constant (the encoder's memory,
        # projected keys, masks) still holds what `encode` tiled: the same
        # for every beam of an example, so reordering it would only copy it.
        state = {
            key: reorder(value) if key in self.carried else value for key, value in state.items()
        }
        # Candidate r of this step extends row `origin[r]` of the last one;
        # `attention` is still in the last step's rows (see `_backtrack`).
        history = {
            "tokens": _write_step(search["history"]["tokens"], step, token, axis=0),
            "parents": _write_step(search["history"]["parents"], step, origin, axis=0),
            "attention": _write_step(search["history"]["attention"], step, attention, axis=0),
        }
        alive_coverage = None
        if "alive_coverage" in search:
            alive_coverage = reorder(search["alive_coverage"]) + reorder(
                ops.cast(attention, "float32")
            )
            alive_coverage = ops.where(
                ops.expand_dims(was_done, -1), search["alive_coverage"], alive_coverage
            )

        length = step + 1
        token = ops.reshape(token, (batch, width))
        live = top_scores > NEG_INF / 2
        ends = ops.logical_and(live, ops.equal(token, self.model.eos_id))
        penalized = self.scorer(top_scores, length, alive_coverage)

        # Candidates that produced EOS compete with the finished store (by
        # the penalised score) for its K places. A finished hypothesis is
        # kept as its last row in the history, never written again.
        finished_keys = ops.reshape(search["finished_penalized"], (batch, width))
        pool_keys = ops.concatenate([finished_keys, ops.where(ends, penalized, NEG_INF)], axis=1)
        kept_keys, kept = ops.top_k(pool_keys, width)
        kept = _flat_indices(batch, 2 * width, ops.cast(kept, "int32"))

        def keep(finished, candidates):
            return ops.take(_interleave(finished, candidates, batch, width), kept, axis=0)

        lengths = ops.full((batch * width,), 1, "int32") * length
        new_search = {
            "history": history,
            "finished_rows": keep(
                search["finished_rows"], ops.arange(batch * width, dtype="int32")
            ),
            "finished_scores": keep(search["finished_scores"], ops.reshape(top_scores, (-1,))),
            "finished_penalized": ops.reshape(kept_keys, (-1,)),
            "finished_lengths": keep(search["finished_lengths"], lengths),
        }

        still_alive = ops.logical_and(live, ops.logical_not(ends))
        alive_scores = ops.where(still_alive, top_scores, NEG_INF)
        best_alive = ops.max(alive_scores, axis=1)
        best_finished = kept_keys[:, 0]
        done = ops.logical_or(
            best_alive <= NEG_INF / 2,
            best_finished >= self.scorer.best_reachable(best_alive, self.limit),
        )
        if self.early:
            # kept_keys is best first: its last column is the worst of the
            # K finished ones, NEG_INF while fewer than K have finished.
            worst_finished = kept_keys[:, -1]
            done = ops.logical_or(
                done,
                ops.logical_and(
                    worst_finished > NEG_INF / 2,
                    worst_finished >= self.scorer.best_reachable(best_alive, length),
                ),
            )
        done = ops.logical_or(search["done"], done)
        # A done example is frozen: its live hypotheses stay as they were at
        # the step it was done (they fill its n-best list), and no token of
        # it is fed on.
        alive_scores = ops.where(was_done, search["alive_scores"], ops.reshape(alive_scores, (-1,)))
        alive_lengths = ops.where(was_done, search["alive_lengths"], length)
        new_search.update(
            {"alive_scores": alive_scores, "alive_lengths": alive_lengths, "done": done}
        )
        if alive_coverage is not None:
            new_search["alive_coverage"] = alive_coverage
        fed = ops.logical_and(alive_scores > NEG_INF / 2, ops.logical_not(ops.repeat(done, width)))
        next_tokens = ops.where(fed, ops.reshape(token, (-1,)), self.model.pad_id)
        return next_tokens, state, new_search


def _beam_result(search, num_steps, settings, coverage_mask, pad_id):
    """The n-best list: finished hypotheses by penalised score, then live
    ones (as the example stopped) to fill it; its first entry is the result."""
    width = settings.width
    batch = ops.shape(search["done"])[0]
    limit = ops.shape(search["history"]["tokens"])[0]
    scorer = _GnmtScorer(settings.alpha, settings.beta, coverage_mask, batch, width)
    alive_scores = ops.reshape(search["alive_scores"], (batch, width))
    alive_valid = alive_scores > NEG_INF / 2
    alive_lengths = search["alive_lengths"]
    alive_keys = scorer(
        alive_scores, ops.reshape(alive_lengths, (batch, width)), search.get("alive_coverage")
    )
    alive_keys = ops.where(alive_valid, alive_keys, NEG_INF)
    finished_keys = ops.reshape(search["finished_penalized"], (batch, width))
    num_finished = ops.sum(ops.cast(finished_keys > NEG_INF / 2, "int32"), axis=1, keepdims=True)
    _, alive_order = ops.top_k(alive_keys, width)
    rank = ops.expand_dims(ops.arange(width, dtype="int32"), 0)
    from_alive = ops.take_along_axis(
        ops.cast(alive_order, "int32"), ops.clip(rank - num_finished, 0, width - 1), axis=1
    )
    slot = ops.where(rank < num_finished, rank, width + from_alive)  # into [finished; alive]
    chosen = _flat_indices(batch, 2 * width, slot)

    def pick(finished, alive):
        return ops.take(_interleave(finished, alive, batch, width), chosen, axis=0)

    def per_example(x):
        return ops.reshape(x, (batch, width) + tuple(ops.shape(x)[1:]))

    keys = pick(search["finished_penalized"], ops.reshape(alive_keys, (-1,)))
    valid = keys > NEG_INF / 2
    lengths = ops.where(valid, pick(search["finished_lengths"], alive_lengths), 0)
    # A live hypothesis' last row is its slot at its last step: a done
    # example's slots are not reordered after it.
    rows = pick(search["finished_rows"], ops.arange(batch * width, dtype="int32"))
    tokens, attention = _backtrack(search["history"], rows, lengths, batch, width, limit, pad_id)
    log_probs = ops.where(valid, pick(search["finished_scores"], search["alive_scores"]), NEG_INF)
    finished = pick(
        ops.ones((batch * width,), "bool"),
        ops.zeros((batch * width,), "bool"),
    )
    finished = ops.logical_and(finished, valid)
    keys, lengths, log_probs, finished = (
        per_example(x) for x in (keys, lengths, log_probs, finished)
    )
    return DecodeResult(
        tokens=tokens[:, 0],
        lengths=lengths[:, 0],
        scores=log_probs[:, 0],
        attention=attention,
        finished=finished[:, 0],
        num_steps=num_steps,
        penalized_scores=keys[:, 0],
        beam_tokens=tokens,
        beam_lengths=lengths,
        beam_scores=log_probs,
        beam_penalized_scores=keys,
        beam_finished=finished,
    )


def _backtrack(history, rows, lengths, batch, width, limit, pad_id):
    """The tokens of the hypotheses that end in `rows` `[B*K]` (rows of the
    history at their last step, `lengths - 1`), and the attention of each
    example's first one.

    The history holds, for every step t, the token `tokens[t, r]` that
    candidate r produced, the row `parents[t, r]` of step t - 1 that it
    extends, and the attention `attention[t, p]` that row p computed at step
    t (the rows are those before step t reordered them). A hypothesis is
    followed from its end back to step 0 through `parents` alone, and its
    tokens and attention are then gathered in one go.

    Returns tokens int32 `[B, K, L]` (PAD after each end, and for length 0)
    and attention float32 `[B, L, S]` (zero after the end).
    """
    produced = ops.expand_dims(ops.arange(limit, dtype="int32"), 1) < lengths  # [L, B*K]

    def back(rows, step):
        parents, produced = step[0], step[1] > 0
        return ops.where(produced, ops.take(parents, rows, axis=0), rows), rows

    # path[t, e]: the row of hypothesis e at step t. The parents and the
    # produced flags are scanned as one stacked sequence: keras' TensorFlow
    # scan fails on several sequences whose length is unknown (the step
    # limit of a source of unknown length).
    steps = ops.stack([history["parents"], ops.cast(produced, "int32")], axis=1)  # [L, 2, B*K]
    _, path = ops.scan(back, rows, steps, reverse=True)
    flat = batch * width
    at_step = ops.expand_dims(ops.arange(limit, dtype="int32") * flat, 1)  # [L, 1]
    tokens = ops.take(ops.reshape(history["tokens"], (-1,)), ops.reshape(path + at_step, (-1,)))
    tokens = ops.where(produced, ops.reshape(tokens, (limit, flat)), pad_id)
    tokens = ops.reshape(ops.transpose(tokens), (batch, width, limit))

    # The first hypothesis of each example: its attention at step t is that
    # of the row it extended.
    best = path[:, ::width]
    best_rows = ops.take_along_axis(history["parents"], best, axis=1)  # [L, B]
    source_width = ops.shape(history["attention"])[-1]
    attention = ops.take(
        ops.reshape(history["attention"], (-1, source_width)),
        ops.reshape(best_rows + at_step, (-1,)),
        axis=0,
    )
    attention = ops.reshape(attention, (limit, batch, source_width))
    attention = ops.where(ops.expand_dims(produced[:, ::width], -1), attention, 0.0)
    return tokens, ops.transpose(attention, (1, 0, 2))


def _flat_indices(batch, group, indices):
    """Rows of a `[B * group, ...]` tensor: `indices` `[B, K]` -> `[B * K]`."""
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * group, -1)
    return ops.reshape(offsets + indices, (-1,))


def _interleave(first, second, batch, width):
    """Two `[B * K, ...]` tensors -> `[B * 2K, ...]`, each example's K rows
    of `first` followed by its K rows of `second`."""
    rest = tuple(ops.shape(first)[1:])
    pool = ops.concatenate(
        [ops.reshape(first, (batch, width) + rest), ops.reshape(second, (batch, width) + rest)],
        axis=1,
    )
    return ops.reshape(pool, (batch * 2 * width,) + rest)
