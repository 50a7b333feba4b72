"""Greedy and beam search against brute force in NumPy, on a toy model.

The toy (`ToyTranslator`, a `keras.Model`) follows the recipes' contract:
its logits depend on the step, the previous token and a small recurrent
state; its attention is a masked softmax of a table score plus a dot product
with the source memory. `NumpyToy` is the same model in float64 NumPy, one
example at a time, so that greedy decoding and exhaustive search over every
hypothesis can be computed independently of the code under test. With the
random parts set to zero the toy is a pure table (step, previous token) ->
(next-token distribution, attention), for hand-made cases.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers import masked_softmax
from zoo.recipes.contract import SequenceGenerator
from zoo.recipes.decoding import ChunkedBeamSearch
from zoo.recipes.decoding import DecodeResult
from zoo.recipes.decoding import beam_search
from zoo.recipes.decoding import decode_to_lists
from zoo.recipes.decoding import greedy_search
from zoo.recipes.decoding import max_decoding_steps

PAD, BOS, EOS = 0, 2, 3
TABLE_STEPS = 32  # the toy's tables cover this many steps
TABLE_WIDTH = 8  # ... and source positions


class ToyTranslator(SequenceGenerator):
    """A keras.Model with the encode / decode_step contract and fixed weights."""

    constant_state_keys = ("memory", "mask", "source_length")
    attention_state_key = "mask"

    def __init__(self, params, max_target_length=None, **kwargs):
        super().__init__(
            params["logit_table"].shape[-1],
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            max_target_length=max_target_length,
            **kwargs,
        )
        self.params = params
        self.tables = {
            name: keras.Variable(value.astype("float32"), trainable=False, name=name)
            for name, value in params.items()
        }

    def encode(self, source):
        source = ops.cast(source, "int32")
        mask = ops.cast(ops.not_equal(source, PAD), "float32")
        memory = ops.take(self.tables["source_embedding"], source, axis=0) * mask[..., None]
        count = ops.sum(mask, axis=1, keepdims=True)
        return {
            "memory": memory,
            "mask": mask,
            "h": ops.sum(memory, axis=1) / ops.maximum(count, 1.0),
            "source_length": ops.cast(count[:, 0], "int32"),  # an int tensor rides along
        }

    def decode_step(self, previous_tokens, state, step):
        previous = ops.cast(previous_tokens, "int32")
        h = ops.tanh(
            ops.matmul(state["h"], self.tables["recurrent"])
            + ops.take(self.tables["target_embedding"], previous, axis=0)
        )
        memory = state["memory"]
        width = ops.shape(memory)[1]
        table = ops.take(ops.take(self.tables["attention_table"], step, axis=0), previous, axis=0)
        scores = table[:, :width] + ops.sum(memory * h[:, None, :], axis=-1)
        attention = masked_softmax(scores, state["mask"] > 0)
        context = ops.sum(attention[..., None] * memory, axis=1)
        logits = ops.take(ops.take(self.tables["logit_table"], step, axis=0), previous, axis=0)
        logits = logits + ops.matmul(h + context, self.tables["output"])
        return logits, dict(state, h=h), attention


class ToyCaptioner(ToyTranslator):
    """The same decoder over float features `[B, R, D]` (image regions):
    a source that is not token ids, with no padding."""

    def encode(self, source):
        mask = ops.ones(ops.shape(source)[:2], "float32")
        return {
            "memory": source,
            "mask": mask,
            "h": ops.mean(source, axis=1),
            "source_length": ops.cast(ops.sum(mask, axis=1), "int32"),
        }


class NumpyToy:
    """`ToyTranslator` in float64 NumPy, one unbatched example at a time."""

    def __init__(self, params):
        self.p = {name: value.astype("float64") for name, value in params.items()}

    def encode(self, source_row):
        if np.asarray(source_row).ndim == 2:  # ToyCaptioner's features
            mask = np.ones(len(source_row), bool)
            return {"memory": source_row, "mask": mask, "h": source_row.mean(0)}
        mask = np.asarray(source_row) != PAD
        memory = self.p["source_embedding"][source_row] * mask[:, None]
        return {"memory": memory, "mask": mask, "h": memory.sum(0) / max(mask.sum(), 1)}

    def step(self, previous, state, step):
        p = self.p
        h = np.tanh(state["h"] @ p["recurrent"] + p["target_embedding"][previous])
        memory = state["memory"]
        scores = p["attention_table"][step, previous, : len(memory)] + memory @ h
        scores = np.where(state["mask"], scores, -np.inf)
        attention = np.exp(scores - scores.max()) * state["mask"]
        attention /= attention.sum()
        logits = p["logit_table"][step, previous] + (h + attention @ memory) @ p["output"]
        log_probs = logits - logits.max()
        log_probs -= np.log(np.exp(log_probs).sum())
        return log_probs, dict(state, h=h), attention


def random_params(seed, vocabulary=5, depth=4, source_vocabulary=9):
    rng = np.random.default_rng(seed)
    logit_table = 1.5 * rng.normal(size=(TABLE_STEPS, vocabulary, vocabulary))
    logit_table[..., EOS] += 0.5  # hypotheses end, but not all at once
    source_embedding = rng.normal(size=(source_vocabulary, depth))
    source_embedding[PAD] = 0.0
    return {
        "logit_table": logit_table,
        "attention_table": rng.normal(size=(TABLE_STEPS, vocabulary, TABLE_WIDTH)),
        "source_embedding": source_embedding,
        "target_embedding": rng.normal(size=(vocabulary, depth)),
        "recurrent": 0.7 * rng.normal(size=(depth, depth)),
        "output": rng.normal(size=(depth, vocabulary)),
    }


def table_params(rows, vocabulary=6, default=None, attention=None, source_vocabulary=9):
    """A pure table toy: `rows[(step, previous)] = {token: probability}`; the
    rest of a row's mass is spread evenly over the other tokens. Rows not
    given use `default`. `attention[(step, previous)]` = attention scores."""
    default = {EOS: 0.9} if default is None else default

    def log_row(probabilities):
        rest = (1.0 - sum(probabilities.values())) / (vocabulary - len(probabilities))
        return np.log([probabilities.get(token, rest) for token in range(vocabulary)])

    logit_table = np.tile(log_row(default), (TABLE_STEPS, vocabulary, 1))
    for (step, previous), probabilities in rows.items():
        logit_table[step, previous] = log_row(probabilities)
    attention_table = np.zeros((TABLE_STEPS, vocabulary, TABLE_WIDTH))
    for (step, previous), scores in (attention or {}).items():
        attention_table[step, previous, : len(scores)] = scores
    return {
        "logit_table": logit_table,
        "attention_table": attention_table,
        "source_embedding": np.zeros((source_vocabulary, 4)),
        "target_embedding": np.zeros((vocabulary, 4)),
        "recurrent": np.zeros((4, 4)),
        "output": np.zeros((4, vocabulary)),
    }


# Brute force in NumPy ---------------------------------------------------------


def gnmt_score(log_prob, attention, mask, alpha, beta):
    """Wu et al. 2016, eq. 14, for one hypothesis with attention `[T, S]`."""
    length_factor = ((5.0 + len(attention)) / 6.0) ** alpha
    coverage = np.minimum(np.sum(attention, axis=0), 1.0)
    return log_prob / length_factor + beta * np.sum(np.log(np.maximum(coverage, 1e-10))[mask])


def numpy_greedy(toy, source_row, limit):
    state = toy.encode(source_row)
    previous, tokens, score, attentions = BOS, [], 0.0, []
    for step in range(limit):
        log_probs, state, attention = toy.step(previous, state, step)
        previous = int(np.argmax(log_probs))
        tokens.append(previous)
        score += log_probs[previous]
        attentions.append(attention)
        if previous == EOS:
            break
    return tokens, score, np.array(attentions)


def exhaustive_search(toy, source_row, limit, alpha=0.0, beta=0.0):
    """Every hypothesis that ends with EOS within `limit` tokens, best first,
    as (penalised score, log-probability, tokens, attention)."""
    mask = np.asarray(source_row) != PAD
    found = []

    def expand(previous, state, tokens, log_prob, attentions):
        step = len(tokens)
        log_probs, state, attention = toy.step(previous, state, step)
        for token in range(len(log_probs)):
            path = tokens + [token]
            total = log_prob + log_probs[token]
            history = attentions + [attention]
            if token == EOS:
                history = np.array(history)
                found.append((gnmt_score(total, history, mask, alpha, beta), total, path, history))
            elif step + 1 < limit:
                expand(token, state, path, total, history)

    expand(BOS, toy.encode(source_row), [], 0.0, [])
    return sorted(found, key=lambda hypothesis: -hypothesis[0])


def to_numpy(result):
    return DecodeResult(*[None if x is None else ops.convert_to_numpy(x) for x in result])


def padded(rows):
    width = max(len(row) for row in rows)
    return np.array([row + [PAD] * (width - len(row)) for row in rows], "int32")


SOURCES = [[4, 7, 1, 5, 6], [8, 2], [3, 6, 6]]


# Greedy -----------------------------------------------------------------------


def test_greedy_matches_numpy_on_a_padded_batch():
    params = random_params(seed=0)
    source = padded(SOURCES)
    result = to_numpy(greedy_search(ToyTranslator(params), source, max_length=7))
    toy = NumpyToy(params)
    assert result.tokens.shape == (3, 7) and result.attention.shape == (3, 7, 5)
    assert result.penalized_scores is None and result.beam_tokens is None
    for i, row in enumerate(source):
        tokens, score, attention = numpy_greedy(toy, row, limit=7)
        n = len(tokens)
        np.testing.assert_array_equal(result.tokens[i], tokens + [PAD] * (7 - n))
        assert result.lengths[i] == n
        assert result.finished[i] == (tokens[-1] == EOS)
        np.testing.assert_allclose(result.scores[i], score, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.attention[i, :n], attention, atol=1e-5)
        assert not result.attention[i, n:].any()
    # This seed gives different lengths; the loop ran as long as the longest.
    assert len(set(result.lengths.tolist())) > 1
    expected_steps = 7 if not result.finished.all() else result.lengths.max()
    assert result.num_steps == expected_steps


def test_greedy_stops_when_every_sequence_has_ended():
    # BOS -> 1 -> EOS is near certain; the limit is far away.
    params = table_params({(0, BOS): {1: 0.99}, (1, 1): {EOS: 0.99}})
    result = to_numpy(greedy_search(ToyTranslator(params), padded(SOURCES), max_length=20))
    assert result.num_steps == 2
    np.testing.assert_array_equal(result.tokens[:, :3], [[1, EOS, PAD]] * 3)
    assert not result.tokens[:, 2:].any() and not result.attention[:, 2:].any()
    np.testing.assert_array_equal(result.lengths, [2, 2, 2])
    assert decode_to_lists(result) == [[1], [1], [1]]


def test_step_limit_follows_max_length_the_ratio_and_the_model_cap():
    never_ends = table_params({}, default={EOS: 1e-12})
    source = padded(SOURCES)  # S = 5: ceil(1.5 * 5) + 10 = 18 steps
    model = ToyTranslator(never_ends)
    assert max_decoding_steps(model, 5) == 18
    assert max_decoding_steps(model, 5, max_length_ratio=2.0, max_length_offset=1) == 11
    assert max_decoding_steps(model, 5, max_length_offset=0) == 8
    for kwargs, limit in [({}, 18), ({"max_length": 4}, 4)]:
        result = to_numpy(greedy_search(model, source, **kwargs))
        assert result.tokens.shape == (3, limit)
        assert result.num_steps == limit
        np.testing.assert_array_equal(result.lengths, [limit] * 3)
        assert not result.finished.any()
    capped = ToyTranslator(never_ends, max_target_length=6)
    assert max_decoding_steps(capped, 5) == max_decoding_steps(capped, 5, max_length=9) == 6
    for result in (greedy_search(capped, source, max_length=9), beam_search(capped, source, 2)):
        result = to_numpy(result)
        assert result.tokens.shape == (3, 6) and result.attention.shape == (3, 6, 5)
        assert result.num_steps == 6
        np.testing.assert_array_equal(result.lengths, [6] * 3)
        assert not result.finished.any()
    with pytest.raises(ValueError, match="max_length"):
        greedy_search(model, source, max_length=0)


# Beam search ------------------------------------------------------------------


@pytest.mark.parametrize("stopping", ["early", "exact"])
def test_beam_width_one_is_exactly_greedy(stopping):
    params = random_params(seed=1)
    model = ToyTranslator(params)
    source = padded(SOURCES)
    greedy = to_numpy(greedy_search(model, source, max_length=8))
    beam = to_numpy(beam_search(model, source, beam_width=1, max_length=8, stopping=stopping))
    for field in ("tokens", "lengths", "scores", "finished", "num_steps"):
        np.testing.assert_array_equal(getattr(beam, field), getattr(greedy, field), err_msg=field)
    np.testing.assert_allclose(beam.attention, greedy.attention, atol=1e-7)


@pytest.mark.parametrize("alpha, beta", [(0.0, 0.0), (0.6, 0.3)])
def test_a_wide_beam_finds_the_exhaustive_optimum(alpha, beta):
    params = random_params(seed=3)
    toy = NumpyToy(params)
    source = padded([[4, 7, 1], [8, 5]])
    limit, vocabulary = 3, 5
    # Wide enough to keep every candidate at every step: search is exact.
    width = vocabulary * (vocabulary - 1) ** (limit - 1)
    result = to_numpy(
        beam_search(ToyTranslator(params), source, width, alpha, beta, max_length=limit)
    )
    if alpha == beta == 0.0:
        greedy = to_numpy(greedy_search(ToyTranslator(params), source, max_length=limit))
    compared = 0
    for i, row in enumerate(source):
        ranked = exhaustive_search(toy, row, limit, alpha, beta)
        penalized, log_prob, tokens, attention = ranked[0]
        n = len(tokens)
        np.testing.assert_array_equal(result.tokens[i, :n], tokens)
        assert result.lengths[i] == n and result.finished[i]
        np.testing.assert_allclose(result.scores[i], log_prob, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.penalized_scores[i], penalized, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.attention[i, :n], attention, atol=1e-5)
        assert not result.attention[i, n:].any()
        # The n-best list starts with every finished hypothesis, in the
        # exhaustive ranking (the beam is wider than their number).
        assert width > len(ranked)
        np.testing.assert_allclose(
            result.beam_penalized_scores[i, : len(ranked)],
            [hypothesis[0] for hypothesis in ranked],
            rtol=1e-5,
            atol=1e-5,
        )
        for k, (_, _, tokens, _) in enumerate(ranked[:3]):
            np.testing.assert_array_equal(result.beam_tokens[i, k, : len(tokens)], tokens)
        # Among hypotheses that end, the best is at least as likely as
        # greedy's (a greedy hypothesis cut by the limit does not compete).
        if alpha == beta == 0.0 and greedy.finished[i]:
            assert result.scores[i] >= greedy.scores[i] - 1e-6
            compared += 1
    assert compared or alpha or beta


def test_beam_search_escapes_the_greedy_garden_path():
    # Greedy takes 1 (0.5) and is then spread thin; 4 (0.4) ends at 0.99.
    params = table_params(
        {(0, BOS): {1: 0.5, 4: 0.4}, (1, 1): {5: 0.2, EOS: 0.19}, (1, 4): {EOS: 0.99}}
    )
    model = ToyTranslator(params)
    source = padded([[5, 6]])
    greedy = to_numpy(greedy_search(model, source, max_length=6))
    beam = to_numpy(beam_search(model, source, beam_width=2, max_length=6))
    assert decode_to_lists(greedy) == [[1, 5]]
    assert decode_to_lists(beam) == [[4]]
    np.testing.assert_allclose(beam.scores, [math.log(0.4 * 0.99)], rtol=1e-5)
    assert beam.scores[0] > greedy.scores[0]


def test_length_penalty_favours_longer_hypotheses():
    # [EOS] has probability 0.5; [1, 4, EOS] 0.48 * 0.95 * 0.95 = 0.433:
    # shorter wins on log-probability, longer once divided by lp(Y).
    params = table_params({(0, BOS): {EOS: 0.5, 1: 0.48}, (1, 1): {4: 0.95}, (2, 4): {EOS: 0.95}})
    model = ToyTranslator(params)
    source = padded([[5, 6, 7]])
    toy = NumpyToy(params)
    chosen = {}
    for alpha in (0.0, 1.0):
        result = to_numpy(beam_search(model, source, 3, length_penalty=alpha, max_length=6))
        chosen[alpha] = decode_to_lists(result, include_eos=True)[0]
        assert chosen[alpha] == exhaustive_search(toy, source[0], 6, alpha)[0][2]
    assert chosen == {0.0: [EOS], 1.0: [1, 4, EOS]}
    log_prob = math.log(0.48 * 0.95**2)
    np.testing.assert_allclose(result.penalized_scores, [log_prob / (8 / 6)], rtol=1e-5)
    np.testing.assert_allclose(result.scores, [log_prob], rtol=1e-5)


def test_coverage_penalty_prefers_the_hypothesis_that_covers_the_source():
    # [1, EOS] (0.49) looks at the first source word twice; [4, EOS] (0.441)
    # looks at both. The source has two padding positions, which must not
    # count: they get no attention in either hypothesis.
    params = table_params(
        {(0, BOS): {1: 0.5, 4: 0.45}, (1, 1): {EOS: 0.98}, (1, 4): {EOS: 0.98}},
        attention={(0, BOS): [8.0, 0.0], (1, 1): [8.0, 0.0], (1, 4): [0.0, 8.0]},
    )
    model = ToyTranslator(params)
    source = padded([[5, 6, 0, 0]])
    toy = NumpyToy(params)
    for beta, expected in [(0.0, [1]), (1.0, [4])]:
        result = to_numpy(beam_search(model, source, 2, coverage_penalty=beta, max_length=5))
        assert decode_to_lists(result) == [expected]
        best = exhaustive_search(toy, source[0], 5, beta=beta)[0]
        np.testing.assert_allclose(result.penalized_scores, [best[0]], rtol=1e-5)
        assert not result.attention[0, :, 2:].any()
    # Penalised with the padding left out: close to log P alone.
    assert abs(result.penalized_scores[0] - math.log(0.45 * 0.98)) < 1e-2


def test_beam_search_stops_early_and_pads_after_the_end():
    params = table_params({(0, BOS): {1: 0.99}, (1, 1): {EOS: 0.99}})
    result = to_numpy(beam_search(ToyTranslator(params), padded(SOURCES), 3, max_length=20))
    assert result.num_steps == 2
    assert result.tokens.shape == (3, 20) and result.attention.shape == (3, 20, 5)
    np.testing.assert_array_equal(result.tokens[:, :2], [[1, EOS]] * 3)
    assert not result.tokens[:, 2:].any() and not result.attention[:, 2:].any()
    # Each produced token's attention sums to one over the real source words.
    lengths = [len(row) for row in SOURCES]
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(result.attention[i, :2, :n].sum(-1), 1.0, rtol=1e-5)
        assert not result.attention[i, :, n:].any()


@pytest.mark.parametrize("stopping", ["early", "exact"])
def test_the_n_best_list_is_filled_with_the_unfinished_hypotheses_of_a_done_beam(stopping):
    # [EOS] (0.9) finishes at step 0 and no live hypothesis can beat it: the
    # search stops there with one finished hypothesis, and the two live ones
    # it held, [1] and [4], fill the list of three, marked unfinished.
    params = table_params({(0, BOS): {EOS: 0.9, 1: 0.05, 4: 0.03}})
    model, source = ToyTranslator(params), padded([[5, 6]])
    options = dict(max_length=6, stopping=stopping)
    whole = to_numpy(beam_search(model, source, 3, **options))
    assert whole.num_steps == 1
    assert decode_to_lists(whole.beam_tokens, include_eos=True) == [[[EOS], [1], [4]]]
    np.testing.assert_array_equal(whole.beam_lengths, [[1, 1, 1]])
    np.testing.assert_array_equal(whole.beam_finished, [[True, False, False]])
    np.testing.assert_allclose(whole.beam_scores, np.log([[0.9, 0.05, 0.03]]), rtol=1e-5)
    assert decode_to_lists(whole, include_eos=True) == [[EOS]] and whole.finished.all()
    chunked = ChunkedBeamSearch(model, 3, chunk_steps=1, **options)(source)
    assert_same_search(chunked, whole)


def test_beam_search_on_a_padded_batch_matches_one_example_at_a_time():
    params = random_params(seed=3)
    model = ToyTranslator(params)
    batch = to_numpy(beam_search(model, padded(SOURCES), 3, length_penalty=0.6, max_length=6))
    # The most padded example, alone: its result must not depend on the rest.
    row = SOURCES[1]
    alone = to_numpy(beam_search(model, padded([row]), 3, length_penalty=0.6, max_length=6))
    np.testing.assert_array_equal(batch.tokens[1], alone.tokens[0])
    np.testing.assert_array_equal(batch.beam_tokens[1], alone.beam_tokens[0])
    np.testing.assert_allclose(batch.scores[1], alone.scores[0], rtol=1e-5)
    np.testing.assert_allclose(batch.attention[1, :, : len(row)], alone.attention[0], atol=1e-6)
    assert not batch.attention[1, :, len(row) :].any()
    # The examples end at different steps; those done early stayed frozen.
    assert len(set(batch.lengths.tolist())) > 1


def test_a_source_of_image_features():
    """Captioning: the source is float `[B, R, D]`; the attention (and the
    ratio limit) is over the R regions, and coverage counts all of them."""
    params = random_params(seed=5)
    features = np.random.default_rng(5).normal(size=(2, 3, 4)).astype("float32")
    model = ToyCaptioner(params)
    greedy = to_numpy(greedy_search(model, features))
    # ceil(1.5 * 3) + 10 steps
    assert greedy.tokens.shape == (2, 15) and greedy.attention.shape == (2, 15, 3)
    for i in range(2):
        tokens, _, attention = numpy_greedy(NumpyToy(params), features[i].astype("float64"), 15)
        np.testing.assert_array_equal(greedy.tokens[i, : len(tokens)], tokens)
        np.testing.assert_allclose(greedy.attention[i, : len(tokens)], attention, atol=1e-5)
    beam = to_numpy(beam_search(model, features, beam_width=2, coverage_penalty=0.5, max_length=4))
    assert beam.attention.shape == (2, 4, 3)
    for i in range(2):
        n = beam.lengths[i]
        coverage = np.minimum(beam.attention[i, :n].sum(0), 1.0)
        expected = beam.scores[i] + 0.5 * np.sum(np.log(coverage))
        np.testing.assert_allclose(beam.penalized_scores[i], expected, rtol=1e-5)


def test_beam_search_rejects_bad_arguments():
    model = ToyTranslator(random_params(seed=0))
    source = padded(SOURCES)
    for kwargs, name in [
        ({"beam_width": 0}, "beam_width"),
        ({"beam_width": 2.0}, "beam_width"),
        ({"length_penalty": -0.5}, "length_penalty"),
        ({"coverage_penalty": -1.0}, "coverage_penalty"),
        ({"stopping": "never"}, "stopping='never'"),
        ({"stopping": True}, "stopping=True"),
    ]:
        with pytest.raises(ValueError, match=name):
            beam_search(model, source, **kwargs)


# Helpers and compilation ------------------------------------------------------


def test_decode_to_lists_cuts_at_eos():
    tokens = np.array([[5, 6, EOS, PAD], [7, EOS, 8, PAD], [4, 4, 4, 4], [9, PAD, PAD, PAD]])
    assert decode_to_lists(tokens) == [[5, 6], [7], [4, 4, 4, 4], [9]]
    assert decode_to_lists(tokens, include_eos=True)[:2] == [[5, 6, EOS], [7, EOS]]
    assert decode_to_lists(tokens[None])[0] == decode_to_lists(tokens)  # e.g. beam_tokens
    assert decode_to_lists(tokens[0]) == [5, 6]


def test_search_compiles_as_the_translator_compiles_it():
    """Greedy and beam search (with and without the coverage penalty)
    compiled as `zoo.Translator` compiles them (`compile_inference`:
    tf.function with relaxed shapes, jax.jit, eager torch) and as a serving
    signature traces them (unknown batch and source length), with the
    default step limit computed from the source length, on two batches of
    different widths: each gives the eager result."""
    from zoo.inference.search_choice import compile_inference

    model = ToyTranslator(random_params(seed=4))

    def search(source):
        greedy = greedy_search(model, source)
        results = [greedy.tokens, greedy.attention]
        # One graph for both penalties: tracing and compiling it is the
        # test's cost.
        for coverage_penalty in (0.0, 0.2):
            beam = beam_search(
                model, source, 2, length_penalty=0.6, coverage_penalty=coverage_penalty
            )
            results += [beam.tokens, beam.penalized_scores, beam.attention, beam.beam_tokens]
        return results

    compiled = [compile_inference(search)]
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        signature = [tf.TensorSpec([None, None], tf.int32)]
        compiled.append(tf.function(search, input_signature=signature))
    batches = [padded(SOURCES), padded([[5, 1, 6, 2, 8, 4, 7, 3], [6], [7, 7, 1], [2, 4]])]
    expected = [[ops.convert_to_numpy(x) for x in search(source)] for source in batches]
    for function in compiled:
        for source, eager_results in zip(batches, expected, strict=True):
            graph_results = function(source)
            assert len(graph_results) == len(eager_results)
            for eager, graph in zip(eager_results, graph_results):
                graph = ops.convert_to_numpy(graph)
                assert graph.shape == eager.shape
                np.testing.assert_allclose(graph, eager, atol=1e-6)
    # The step limit follows each batch's width: ceil(1.5 * S) + 10.
    assert [tuple(compiled[-1](source)[0].shape) for source in batches] == [(3, 18), (4, 22)]


# Beam search in chunks ----------------------------------------------------------


def assert_same_search(chunked, whole):
    """Two beam searches of one batch agree: tokens, lengths and ends
    exactly, scores and attention up to rounding."""
    exact_fields = ("tokens", "lengths", "finished", "num_steps")
    for name in exact_fields + ("beam_tokens", "beam_lengths", "beam_finished"):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(whole, name), err_msg=name)
    for name in ("scores", "penalized_scores", "attention", "beam_scores", "beam_penalized_scores"):
        np.testing.assert_allclose(
            getattr(chunked, name), getattr(whole, name), rtol=1e-5, atol=1e-6, err_msg=name
        )


CHUNKED_CASES = [
    # (seed, alpha, beta, stopping, chunk_steps)
    (3, 0.6, 0.0, "early", 1),
    (3, 0.6, 0.0, "early", 2),
    (7, 0.0, 0.0, "exact", 3),
    (2, 0.6, 0.5, "early", 4),
    (9, 0.6, 0.5, "exact", 100),
]


@pytest.mark.parametrize("seed, alpha, beta, stopping, chunk_steps", CHUNKED_CASES)
def test_beam_search_in_chunks_is_beam_search(seed, alpha, beta, stopping, chunk_steps):
    model = ToyTranslator(random_params(seed=seed))
    sources = padded(SOURCES + [[5, 1, 6, 2, 8, 4, 7, 3], [6], [7, 7, 1], [2, 4]])
    options = dict(length_penalty=alpha, coverage_penalty=beta, max_length=9, stopping=stopping)
    whole = to_numpy(beam_search(model, sources, 3, **options))
    chunked = ChunkedBeamSearch(model, 3, chunk_steps=chunk_steps, **options)(sources)
    # The examples end at different steps, so some leave the batch early.
    assert len(set(whole.lengths.tolist())) > 1
    assert_same_search(chunked, whole)


def test_beam_search_in_chunks_compiles_as_the_translator_compiles_it():
    """Compiled as `zoo.Translator` compiles it (tf.function with relaxed
    shapes, eager torch), over batches of other sizes and widths, with the
    default step limit: each gives `beam_search`'s result."""
    from zoo.inference.search_choice import compile_inference

    if keras.backend.backend() == "jax":
        pytest.skip("under jax.jit every batch size compiles: the translators use beam_search")
    model = ToyTranslator(random_params(seed=4))
    search = ChunkedBeamSearch(model, 2, length_penalty=0.6, chunk_steps=3, compile=compile_inference)
    batches = [padded(SOURCES), padded([[5, 1, 6, 2, 8, 4, 7, 3], [6], [7, 7, 1], [2, 4]])]
    steps = []
    for source in batches:
        whole = to_numpy(beam_search(model, source, 2, length_penalty=0.6))
        chunked = search(source)
        assert_same_search(chunked, whole)
        steps.append(int(chunked.num_steps))
    assert min(steps) > 3  # each batch ran more than one chunk


def test_beam_search_in_chunks_rejects_bad_arguments():
    model = ToyTranslator(random_params(seed=0))
    with pytest.raises(ValueError, match="chunk_steps"):
        ChunkedBeamSearch(model, 2, chunk_steps=0)
    with pytest.raises(ValueError, match="beam_width"):
        ChunkedBeamSearch(model, 0)


# Stopping rules ---------------------------------------------------------------


def test_early_stopping_stops_once_the_beam_has_finished_with_the_exact_result():
    # [EOS] (0.6) and [1, EOS] (0.39 * 0.6) finish by step 1; the live [1, 1]
    # (0.39 * 0.3) then loses to both at its length, but only loses to
    # [EOS] at the step limit once it has fallen far enough (by 0.9 a step).
    rows = {(0, BOS): {EOS: 0.6, 1: 0.39}, (1, 1): {EOS: 0.6, 1: 0.3}}
    params = table_params(rows, default={1: 0.9})
    model = ToyTranslator(params)
    source = padded([[5, 6]])
    alpha, limit = 1.0, 30

    def search(stopping):
        return to_numpy(beam_search(model, source, 2, alpha, max_length=limit, stopping=stopping))

    early, exact = search("early"), search("exact")
    assert early.num_steps == 2
    # The exact rule's step: the first whose best live hypothesis, [1] * n,
    # bounded at the limit, can't beat [EOS].
    lp_limit = ((5.0 + limit) / 6.0) ** alpha
    best_live = [math.log(0.39 * 0.3 * 0.9 ** (n - 2)) / lp_limit for n in range(limit)]
    n = next(n for n in range(2, limit) if best_live[n] <= math.log(0.6))
    assert exact.num_steps == n > 2
    for field in ("tokens", "lengths", "scores", "penalized_scores", "beam_tokens", "beam_scores"):
        np.testing.assert_allclose(getattr(early, field), getattr(exact, field), err_msg=field)
    assert decode_to_lists(early.beam_tokens, include_eos=True) == [[[EOS], [1, EOS]]]


@pytest.mark.parametrize("seed, beta", [(3, 0.0), (2, 0.5), (9, 0.5)])
def test_early_stopping_without_length_penalty_is_the_exact_rule(seed, beta):
    model = ToyTranslator(random_params(seed))
    source = padded(SOURCES)
    results = [
        to_numpy(beam_search(model, source, 2, 0.0, beta, max_length=12, stopping=stopping))
        for stopping in ("early", "exact")
    ]
    assert results[0].num_steps < 12  # the bound holds before the limit
    for field, early, exact in zip(DecodeResult._fields, *results):
        np.testing.assert_array_equal(early, exact, err_msg=field)


def test_early_stopping_misses_a_hypothesis_that_the_length_penalty_lifts():
    # With alpha = 2, [1, 1, 1, 1, EOS] (0.45 * 0.45 * 0.99 ** 3) beats [EOS]
    # (0.5) by lp(5); but at step 1 [1, 1] (0.45 * 0.45) loses at its length
    # to both finished [EOS] and [1, EOS] (0.45 * 0.5).
    rows = {(0, BOS): {EOS: 0.5, 1: 0.45}, (1, 1): {EOS: 0.5, 1: 0.45}, (4, 1): {EOS: 0.99}}
    rows.update({(step, 1): {1: 0.99} for step in (2, 3)})
    model = ToyTranslator(table_params(rows))
    source = padded([[5, 6]])

    def search(stopping):
        return to_numpy(beam_search(model, source, 2, 2.0, max_length=6, stopping=stopping))

    early, exact = search("early"), search("exact")
    assert early.num_steps == 2 and decode_to_lists(early, include_eos=True) == [[EOS]]
    assert decode_to_lists(exact, include_eos=True) == [[1, 1, 1, 1, EOS]]
    expected = math.log(0.45 * 0.45 * 0.99**3) / (10.0 / 6.0) ** 2
    np.testing.assert_allclose(exact.penalized_scores, [expected], rtol=1e-5)
    assert expected > early.penalized_scores[0] == pytest.approx(math.log(0.5))
