"""Beam search in NumPy: GNMT length and coverage penalties, early or
exact stopping, the n-best list (`zoo.recipes.decoding.beam_search`)."""

import numpy as np

from .search import NEG_INF
from .search import DecodeResult
from .search import _fit_step_caches
from .search import _keep_rows
from .search import _worth_dropping
from .search import log_softmax
from .search import max_decoding_steps
from .search_settings import check_beam_arguments


# The least attention a source position's coverage counts (`zoo.recipes.
# decoding.penalties`): log(0) would be minus infinity.
COVERAGE_FLOOR = 1e-10


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
    """`zoo.recipes.decoding.beam_search` in NumPy: its docstring has the rules.

    The same search step for step: `beam_width` live hypotheses expanded by
    their raw log-probability, candidates that produce EOS set aside in a
    store of `beam_width` finished ones ranked by the GNMT score (length
    penalty `((5 + |Y|) / 6) ** length_penalty`, coverage penalty over the
    non-PAD positions of a token source, every position of an image), the
    `"early"` or `"exact"` stopping rule, done examples frozen (their live
    hypotheses kept, not expanded), and the n-best list filled with those
    live hypotheses where fewer have finished (`beam_finished`). Ties
    go to the lower index, as `keras.ops.top_k` breaks them.

    Args:
        model: an `OnnxModel` (or any object with the contract over NumPy
            arrays).
        source: int32 `[B, S]` token ids (or images `[B, H, W, 3]`).
        beam_width: int >= 1, the hypotheses kept per example.
        length_penalty: float >= 0, GNMT's alpha.
        coverage_penalty: float >= 0, GNMT's beta.
        max_length, max_length_ratio, max_length_offset: the step limit
            (`max_decoding_steps`).
        stopping: `"early"` (default) or `"exact"`.

    Returns:
        A `DecodeResult` with every field set: the best hypothesis of each
        example, its `penalized_scores`, and the n-best list (`beam_*`).
    """
    check_beam_arguments(beam_width, length_penalty, coverage_penalty, stopping)
    width = int(beam_width)
    source = np.asarray(source)
    batch = source.shape[0]
    state = model.encode(source)
    source_width = model.attention_width(state)
    limit = max_decoding_steps(model, source_width, max_length, max_length_ratio, max_length_offset)
    carried = _carried_state_keys(model, state)
    state = _fit_step_caches(model, state, limit)
    state = {key: np.repeat(np.asarray(value), width, axis=0) for key, value in state.items()}
    scorer = _GnmtScorer(
        length_penalty, coverage_penalty, _coverage_mask(source, batch, source_width, model.pad_id)
    )
    # Every beam of an example starts from the same BOS: only the first is
    # live, so the first expansion yields K distinct tokens.
    alive = np.full((batch, width), NEG_INF, "float32")
    alive[:, 0] = 0.0
    # Each live hypothesis' length: the step count, frozen when its example
    # is done.
    alive_lengths = np.zeros((batch, width), "int32")
    # Each live hypothesis' attention summed over its steps, for the
    # coverage penalty only.
    coverage = np.zeros((batch, width, source_width), "float32") if coverage_penalty else None
    history = _BeamHistory(limit, batch, width, source_width)
    store = _FinishedStore(batch, width)
    done = np.zeros((batch,), bool)
    tokens = np.full((batch * width,), model.bos_id, "int32")
    # The example of each group of `width` rows the model runs: done examples
    # are dropped from the state, as greedy search drops ended ones.
    examples = np.arange(batch)
    step = 0
    while step < limit and not done.all():
        logits, state, attention = model.decode_step(tokens, state, step)
        groups = len(examples)
        # A done example's live hypotheses are kept, not expanded.
        was_done = done[examples]
        expandable = np.where(was_done[:, None], np.float32(NEG_INF), alive[examples])
        log_probs = log_softmax(np.asarray(logits, "float32"))
        vocabulary = log_probs.shape[-1]
        totals = expandable[:, :, None] + log_probs.reshape(groups, width, vocabulary)
        top_scores, top = _top_k(totals.reshape(groups, width * vocabulary), width)
        parents, token = np.divmod(top, vocabulary)
        origin = (np.arange(groups)[:, None] * width + parents).reshape(-1)
        # A constant entry (the memory, its mask) is the same for every beam
        # of an example: only the carried ones follow their beam.
        state = {key: value[origin] if key in carried else value for key, value in state.items()}
        # The step's attention is still in the last step's beams: it is
        # stored so, and read through the parents (`_backtrack`).
        attention = np.asarray(attention, "float32").reshape(groups, width, source_width)
        history.write(step, examples, token, parents, attention)
        step_coverage = None
        if coverage is not None:
            step_coverage = np.take_along_axis(
                coverage[examples] + attention, parents[:, :, None], axis=1
            )
            coverage[examples] = np.where(was_done[:, None, None], coverage[examples], step_coverage)

        length = step + 1
        live = top_scores > NEG_INF / 2
        ends = live & (token == model.eos_id)
        penalized = scorer(top_scores, length, step_coverage, examples)
        store.add(examples, np.where(ends, penalized, NEG_INF), top_scores, length)

        step_alive = np.where(live & ~ends, top_scores, np.float32(NEG_INF))
        done[examples] |= _examples_done(
            step_alive, store.keys[examples], scorer, length, limit, stopping == "early"
        )
        # A done example is frozen: its live hypotheses stay as they were at
        # the step it was done (they fill its n-best list), and no token of
        # it is fed on.
        alive[examples] = np.where(was_done[:, None], alive[examples], step_alive)
        alive_lengths[examples] = np.where(was_done[:, None], alive_lengths[examples], length)
        fed = (alive[examples] > NEG_INF / 2) & ~done[examples][:, None]
        tokens = np.where(fed, token, model.pad_id).reshape(-1).astype("int32")
        step += 1
        not_done = ~done[examples]
        if _worth_dropping(not_done):
            rows = np.repeat(not_done, width)
            state = _keep_rows(state, rows)
            examples, tokens = examples[not_done], tokens[rows]
    return _beam_result(history, store, alive, alive_lengths, coverage, scorer, step, model.pad_id)


def _carried_state_keys(model, state):
    """`zoo.recipes.contract.carried_state_keys`: the entries beam search
    reorders; a declared constant entry that `state` lacks is an error (a
    renamed entry would otherwise be reordered by nobody)."""
    missing = [key for key in model.constant_state_keys if key not in state]
    if missing:
        raise ValueError(
            f"{type(model).__name__}.constant_state_keys names {missing}, which the "
            f"state from `encode` does not hold (it holds {list(state)})"
        )
    return [key for key in state if key not in model.constant_state_keys]


def _coverage_mask(source, batch, source_width, pad_id):
    """float32 `[B, S]`: 1 where the coverage penalty counts. PAD positions
    of a token source are left out; every position of another source
    (image regions) counts."""
    if source.ndim == 2 and np.issubdtype(source.dtype, np.integer):
        return (source != pad_id).astype("float32")
    return np.ones((batch, source_width), "float32")


def _top_k(values, k):
    """`keras.ops.top_k` on the last axis of a `[B, N]` array: the k
    largest, best first, and the lower index first among equal ones (as
    `tf.math.top_k`).

    A partial selection, linear in N: a full sort of every beam's scores
    over the whole vocabulary, each step, costs more than the model's own
    step. `argpartition` finds the k-th largest value; every larger value is
    taken, then the values equal to it from the lowest index on, so ties
    break as a stable sort breaks them.
    """
    size = values.shape[-1]
    if k >= size:
        indices = np.argsort(-values, axis=-1, kind="stable")
        return np.take_along_axis(values, indices, axis=-1), indices.astype("int32")
    part = np.argpartition(-values, k - 1, axis=-1)[:, :k]
    kth = np.take_along_axis(values, part, axis=-1).min(axis=-1, keepdims=True)
    above = values > kth
    tied = values == kth
    places_left = k - above.sum(axis=-1, keepdims=True)
    # Rows with more ties than places (a done example's row is all
    # NEG_INF) keep the first ones; counting them is a pass of its own.
    crowded = tied.sum(axis=-1) > places_left[:, 0]
    if crowded.any():
        tied[crowded] &= np.cumsum(tied[crowded], axis=-1) <= places_left[crowded]
    # Exactly k chosen a row, found in index order: a stable sort of them
    # by value keeps the lower index first among ties.
    indices = np.nonzero(above | tied)[1].reshape(len(values), k)
    order = np.argsort(-np.take_along_axis(values, indices, axis=-1), axis=-1, kind="stable")
    indices = np.take_along_axis(indices, order, axis=-1)
    return np.take_along_axis(values, indices, axis=-1), indices.astype("int32")


def _pick(first, second, indices):
    """Entries `indices` `[B, K]` of each example's `[first; second]` (both
    `[B, K]`): index i < K is `first[:, i]`, K + i is `second[:, i]`."""
    return np.take_along_axis(np.concatenate([first, second], axis=1), indices, axis=1)


def _beam_indices(batch, width):
    """int32 `[B, K]`: each beam's index in its example."""
    return np.broadcast_to(np.arange(width, dtype="int32"), (batch, width))


class _GnmtScorer:
    """s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y) for hypotheses `[B, K]`, in
    float32 as `zoo.recipes.decoding.penalties._GnmtScorer` computes it."""

    def __init__(self, alpha, beta, coverage_mask):
        self.alpha = np.float32(alpha)
        self.beta = np.float32(beta)
        self.coverage_mask = coverage_mask[:, None, :]  # [B, 1, S]

    def length_factor(self, length):
        return np.power((np.float32(5.0) + np.float32(length)) / np.float32(6.0), self.alpha)

    def __call__(self, log_probs, length, coverage, examples=None):
        """log_probs `[B, K]`, length an int, coverage `[B, K, S]` (None
        without a coverage penalty); with `examples`, the rows are those
        examples only."""
        score = log_probs
        if self.alpha:
            score = score / self.length_factor(length)
        if self.beta:
            mask = self.coverage_mask if examples is None else self.coverage_mask[examples]
            covered = np.log(np.clip(coverage, np.float32(COVERAGE_FLOOR), np.float32(1.0)))
            score = score + self.beta * np.sum(covered * mask, axis=-1)
        return score

    def best_reachable(self, log_probs, length):
        """The most s(Y, X) that extensions of live hypotheses can reach at
        lengths up to `length` (cp <= 0 is left out)."""
        return log_probs / self.length_factor(length) if self.alpha else log_probs


class _BeamHistory:
    """Back-pointers `[L, B, K]`: the token candidate k of step t produced,
    the beam of step t - 1 it extends, and the attention `[L, B, K, S]` that
    beam k computed at step t (before the step reordered the beams)."""

    def __init__(self, limit, batch, width, source_width):
        self.tokens = np.zeros((limit, batch, width), "int32")
        self.parents = np.zeros((limit, batch, width), "int32")
        self.attention = np.zeros((limit, batch, width, source_width), "float32")

    def write(self, step, examples, tokens, parents, attention):
        """Step `step` of the rows `[E, K]` of `examples`."""
        self.tokens[step, examples] = tokens
        self.parents[step, examples] = parents
        self.attention[step, examples] = attention


class _FinishedStore:
    """The K best finished hypotheses of each example, best first by
    penalised score (NEG_INF in unused places); each is kept as its beam at
    its last step (`lengths - 1`) in the history, never written again."""

    def __init__(self, batch, width):
        self.keys = np.full((batch, width), NEG_INF, "float32")
        self.scores = np.full((batch, width), NEG_INF, "float32")
        self.lengths = np.zeros((batch, width), "int32")
        self.beams = np.zeros((batch, width), "int32")

    def add(self, examples, keys, scores, length):
        """Candidates `[E, K]` of `examples`, with penalised `keys` (NEG_INF
        for those that did not end), compete with their store for its K
        places."""
        groups, width = keys.shape
        self.keys[examples], kept = _top_k(
            np.concatenate([self.keys[examples], keys], axis=1), width
        )
        self.scores[examples] = _pick(self.scores[examples], scores, kept)
        lengths = np.full((groups, width), length, "int32")
        self.lengths[examples] = _pick(self.lengths[examples], lengths, kept)
        self.beams[examples] = _pick(self.beams[examples], _beam_indices(groups, width), kept)


def _examples_done(alive, finished_keys, scorer, length, limit, early):
    """Which examples the stopping rule ends after a step at `length`
    (`zoo.recipes.decoding.beam_search` states the rules)."""
    best_alive = alive.max(axis=1)
    done = (best_alive <= NEG_INF / 2) | (
        finished_keys[:, 0] >= scorer.best_reachable(best_alive, limit)
    )
    if early:
        # The last place is the worst of the K finished ones, NEG_INF while
        # fewer than K have finished.
        worst_finished = finished_keys[:, -1]
        done |= (worst_finished > NEG_INF / 2) & (
            worst_finished >= scorer.best_reachable(best_alive, length)
        )
    return done


def _beam_result(history, store, alive, alive_lengths, coverage, scorer, num_steps, pad_id):
    """The n-best list: finished hypotheses by penalised score, then live
    ones (as the example stopped) to fill it; its first entry is the result."""
    batch, width = alive.shape
    alive_valid = alive > NEG_INF / 2
    alive_keys = np.where(alive_valid, scorer(alive, alive_lengths, coverage), np.float32(NEG_INF))
    num_finished = np.sum(store.keys > NEG_INF / 2, axis=1, keepdims=True)
    _, alive_order = _top_k(alive_keys, width)
    rank = np.arange(width)[None, :]
    from_alive = np.take_along_axis(alive_order, np.clip(rank - num_finished, 0, width - 1), axis=1)
    slot = np.where(rank < num_finished, rank, width + from_alive)  # into [finished; alive]

    keys = _pick(store.keys, alive_keys, slot)
    valid = keys > NEG_INF / 2
    lengths = np.where(valid, _pick(store.lengths, alive_lengths, slot), 0)
    # A live hypothesis ends in its beam at its last step: a done example's
    # beams are not reordered after it.
    beams = _pick(store.beams, _beam_indices(batch, width), slot)
    tokens, attention = _backtrack(history, beams, lengths, pad_id)
    scores = np.where(valid, _pick(store.scores, alive, slot), np.float32(NEG_INF))
    finished = (slot < width) & valid
    return DecodeResult(
        tokens=tokens[:, 0],
        lengths=lengths[:, 0].astype("int32"),
        scores=scores[:, 0],
        attention=attention,
        finished=finished[:, 0],
        num_steps=np.int32(num_steps),
        penalized_scores=keys[:, 0],
        beam_tokens=tokens,
        beam_lengths=lengths.astype("int32"),
        beam_scores=scores,
        beam_penalized_scores=keys,
        beam_finished=finished,
    )


def _backtrack(history, beams, lengths, pad_id):
    """The tokens int32 `[B, K, L]` of the hypotheses that end in `beams`
    `[B, K]` at step `lengths - 1` (PAD after the end), and the attention
    float32 `[B, L, S]` of each example's first one (zero after its end),
    followed from the end back to step 0 through the parents."""
    limit, batch, width = history.tokens.shape
    tokens = np.full((batch, width, limit), pad_id, "int32")
    attention = np.zeros((batch, limit, history.attention.shape[-1]), "float32")
    examples = np.arange(batch)
    beam = beams
    for step in reversed(range(limit)):
        produced = step < lengths
        parent = np.take_along_axis(history.parents[step], beam, axis=1)
        tokens[:, :, step] = np.where(
            produced, np.take_along_axis(history.tokens[step], beam, axis=1), pad_id
        )
        # A step's attention was computed by the beam the hypothesis extends.
        first = history.attention[step, examples, parent[:, 0]]
        attention[:, step] = np.where(produced[:, :1], first, 0.0)
        beam = np.where(produced, parent, beam)
    return tokens, attention
