"""The runner's NumPy greedy and beam search against `zoo.recipes.decoding`.

One toy model, written in NumPy float32 (`ToyModel`), is given to both: to
the runner's searches as it is, and to the Keras ones through `KerasToy`,
which converts the tensors the search passes to NumPy and the results back
(tensorflow runs the search's `while_loop` eagerly, so the step is a plain
call). Both searches thus see the very same logits and attention, and every
field of their `DecodeResult` must agree: tokens, lengths, finished flags,
step counts and n-best lists exactly, scores and attention to 1e-5.
"""

import numpy as np
import pytest
from keras import ops

from zoo.export import onnx_runner
from zoo.recipes import decoding

# The Keras search must call the NumPy toy eagerly: jax traces its
# while_loop, and one backend is enough for code that is NumPy on one side.
pytestmark = pytest.mark.tensorflow_only

PAD, BOS, EOS = 0, 2, 3
VOCABULARY = 7
SOURCE_VOCABULARY = 9
DEPTH = 4
MAX_STEPS = 40  # the toy's step embeddings cover this many steps
# Four examples of different lengths, PAD-padded to width 6.
SOURCES = np.array(
    [[4, 7, 1, 5, 6, 8], [8, 5, 0, 0, 0, 0], [6, 6, 4, 1, 0, 0], [7, 0, 0, 0, 0, 0]], "int32"
)
IMAGES = np.random.default_rng(5).uniform(size=(3, 2, 3, 5)).astype("float32")
TOLERANCE = 1e-5
EXACT_FIELDS = (
    *("tokens", "lengths", "finished", "num_steps"),
    *("beam_tokens", "beam_lengths", "beam_finished"),
)


class ToyModel:
    """The recipes' contract over NumPy arrays, deterministic random weights.

    A recurrent state `h` (carried: beam search reorders it) is updated from
    the previous token and the step, attends over a constant memory (the
    embedded source, or projected image regions) with a masked softmax, and
    gives logits `(h + context) @ output` with `eos_bias` added to EOS.
    With `tie=(a, b)` token b always gets token a's logit, so the searches'
    tie-breaking decides between them (or, with EOS, their stopping rules'
    comparisons between a finished and a live hypothesis).
    """

    pad_id, bos_id, eos_id = PAD, BOS, EOS
    constant_state_keys = ("memory", "mask")

    def __init__(self, seed=0, eos_bias=0.0, max_target_length=None, channels=5, tie=None):
        rng = np.random.default_rng(seed)

        def weights(*shape, scale=1.0):
            return (scale * rng.normal(size=shape)).astype("float32")

        self.source_embedding = weights(SOURCE_VOCABULARY, DEPTH)
        self.source_embedding[PAD] = 0.0
        self.pixels = weights(channels, DEPTH)
        self.target_embedding = weights(VOCABULARY, DEPTH)
        self.step_embedding = weights(MAX_STEPS, DEPTH, scale=0.5)
        self.recurrent = weights(DEPTH, DEPTH, scale=0.8)
        self.output = weights(DEPTH, VOCABULARY, scale=2.0)
        self.eos_bias = np.float32(eos_bias)
        self.max_target_length = max_target_length
        self.tie = tie

    def attention_width(self, state):
        return int(state["mask"].shape[1])

    def encode(self, source):
        source = np.asarray(source)
        if source.ndim == 4:  # images [B, H, W, C]: every region counts
            memory = source.reshape(source.shape[0], -1, source.shape[-1]) @ self.pixels
            mask = np.ones(memory.shape[:2], "float32")
        else:
            mask = (source != PAD).astype("float32")
            memory = self.source_embedding[source] * mask[..., None]
        count = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        return {"memory": memory, "mask": mask, "h": memory.sum(axis=1) / count}

    def decode_step(self, previous_tokens, state, step):
        previous = np.asarray(previous_tokens)
        h = np.tanh(
            state["h"] @ self.recurrent
            + self.target_embedding[previous]
            + self.step_embedding[int(step)]
        )
        scores = np.einsum("bsd,bd->bs", state["memory"], h)
        scores = np.where(state["mask"] > 0, scores, -np.inf)
        attention = np.exp(scores - scores.max(axis=1, keepdims=True))
        attention /= attention.sum(axis=1, keepdims=True)
        context = np.einsum("bs,bsd->bd", attention, state["memory"])
        logits = (h + context) @ self.output
        logits[:, EOS] += self.eos_bias
        if self.tie:
            logits[:, self.tie[1]] = logits[:, self.tie[0]]
        state = {**state, "h": h.astype("float32")}
        return logits.astype("float32"), state, attention.astype("float32")


class KerasToy:
    """`ToyModel` for `zoo.recipes.decoding`: tensors in, tensors out."""

    bos_id, eos_id = BOS, EOS
    constant_state_keys = ToyModel.constant_state_keys

    def __init__(self, toy):
        self.toy = toy
        self.pad_id = toy.pad_id
        self.max_target_length = toy.max_target_length

    def attention_width(self, state):
        return int(state["mask"].shape[1])

    def encode(self, source):
        return tensors(self.toy.encode(ops.convert_to_numpy(source)))

    def decode_step(self, previous_tokens, state, step):
        state = {key: ops.convert_to_numpy(value) for key, value in state.items()}
        logits, state, attention = self.toy.decode_step(
            ops.convert_to_numpy(previous_tokens), state, ops.convert_to_numpy(step)
        )
        return ops.convert_to_tensor(logits), tensors(state), ops.convert_to_tensor(attention)


def tensors(arrays):
    return {key: ops.convert_to_tensor(value) for key, value in arrays.items()}


def to_numpy(result):
    return decoding.DecodeResult(*[None if x is None else ops.convert_to_numpy(x) for x in result])


def assert_same_result(ours, theirs):
    """Every field of two `DecodeResult`s; the n-best lists first, entry by
    entry, so that a failure names the example and the entry."""
    if theirs.beam_tokens is not None:
        batch, width = theirs.beam_lengths.shape
        for example, entry in np.ndindex(batch, width):
            where = f"example {example}, n-best entry {entry}"
            np.testing.assert_array_equal(
                ours.beam_tokens[example, entry], theirs.beam_tokens[example, entry], err_msg=where
            )
            assert ours.beam_lengths[example, entry] == theirs.beam_lengths[example, entry], where
            for name in ("beam_scores", "beam_penalized_scores"):
                np.testing.assert_allclose(
                    getattr(ours, name)[example, entry],
                    getattr(theirs, name)[example, entry],
                    rtol=TOLERANCE,
                    atol=TOLERANCE,
                    err_msg=f"{where}, {name}",
                )
    assert ours._fields == theirs._fields
    for name in theirs._fields:
        mine, reference = getattr(ours, name), getattr(theirs, name)
        if reference is None:
            assert mine is None, name
            continue
        mine, reference = np.asarray(mine), np.asarray(reference)
        assert mine.shape == reference.shape, name
        assert mine.dtype == reference.dtype, (name, mine.dtype, reference.dtype)
        if name in EXACT_FIELDS:
            np.testing.assert_array_equal(mine, reference, err_msg=name)
        else:
            np.testing.assert_allclose(
                mine, reference, rtol=TOLERANCE, atol=TOLERANCE, err_msg=name
            )


def both_beam_searches(toy, source, **kwargs):
    ours = onnx_runner.beam_search(toy, source, **kwargs)
    theirs = to_numpy(decoding.beam_search(KerasToy(toy), ops.convert_to_tensor(source), **kwargs))
    return ours, theirs


def both_greedy_searches(toy, source, **kwargs):
    ours = onnx_runner.greedy_search(toy, source, **kwargs)
    source_tensor = ops.convert_to_tensor(source)
    theirs = to_numpy(decoding.greedy_search(KerasToy(toy), source_tensor, **kwargs))
    return ours, theirs


@pytest.mark.parametrize("stopping", ["early", "exact"])
@pytest.mark.parametrize("coverage_penalty", [0.0, 0.2])
@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
@pytest.mark.parametrize("beam_width", [1, 3, 5])
def test_beam_search_is_decodings_on_a_padded_batch(
    beam_width, length_penalty, coverage_penalty, stopping
):
    toy = ToyModel(seed=1, eos_bias=1.0)
    ours, theirs = both_beam_searches(
        toy,
        SOURCES,
        beam_width=beam_width,
        length_penalty=length_penalty,
        coverage_penalty=coverage_penalty,
        stopping=stopping,
        max_length=7,
    )
    assert_same_result(ours, theirs)


@pytest.mark.parametrize("seed, eos_bias", [(5, 6.0), (11, 0.0)])
def test_examples_that_finish_early_and_the_two_stopping_rules(seed, eos_bias):
    # EOS is likely: examples are done at different steps (a done one is
    # frozen while the others go on), the search ends before the step limit,
    # and with a length penalty the early rule ends it sooner than the exact.
    toy = ToyModel(seed=seed, eos_bias=eos_bias)
    results = {}
    for stopping in ("early", "exact"):
        ours, theirs = both_beam_searches(
            toy, SOURCES, beam_width=3, length_penalty=0.6, coverage_penalty=0.2, stopping=stopping
        )
        assert_same_result(ours, theirs)
        assert theirs.finished.all()
        results[stopping] = theirs
    limit = onnx_runner.max_decoding_steps(toy, SOURCES.shape[1])
    assert results["early"].num_steps < results["exact"].num_steps < limit


@pytest.mark.parametrize("beam_width", [2, 3, 5])
def test_ties_go_to_the_lower_index(beam_width):
    toy = ToyModel(seed=8, eos_bias=0.5, tie=(4, 5))
    ours, theirs = both_beam_searches(toy, SOURCES, beam_width=beam_width, max_length=6)
    assert_same_result(ours, theirs)
    assert_same_result(*both_greedy_searches(toy, SOURCES, max_length=6))


def test_the_partial_top_k_is_a_stable_sorts_first_k():
    # Rows of few distinct values (ties at the k-th place), a done
    # example's all-NEG_INF row, and k up to past the row's length.
    from zoo.export.onnx_runner.beam import _top_k

    rng = np.random.default_rng(3)
    rows = [
        rng.integers(-3, 3, size=(4, 23)).astype("float32"),
        rng.normal(size=(3, 40)).astype("float32"),
        np.full((2, 9), onnx_runner.search.NEG_INF, "float32"),
    ]
    rows[1][1, ::3] = onnx_runner.search.NEG_INF
    for values in rows:
        for k in range(1, values.shape[1] + 2):
            expected = np.argsort(-values, axis=-1, kind="stable")[:, :k]
            scores, indices = _top_k(values, k)
            np.testing.assert_array_equal(indices, expected)
            np.testing.assert_array_equal(scores, np.take_along_axis(values, expected, axis=-1))


@pytest.mark.parametrize("length_penalty, stopping", [(0.0, "exact"), (0.6, "early")])
def test_a_live_hypothesis_that_ties_the_finished_ones_ends_the_search(length_penalty, stopping):
    # EOS and token 4 tie at every step: a finished and a live hypothesis
    # then have the same penalised score, and the stopping rules' `>=` ends
    # the example there (a `>` would run it a step longer).
    toy = ToyModel(seed=6, tie=(EOS, 4))
    ours, theirs = both_beam_searches(
        toy, SOURCES, beam_width=2, length_penalty=length_penalty, stopping=stopping, max_length=8
    )
    assert_same_result(ours, theirs)


@pytest.mark.parametrize("stopping", ["early", "exact"])
def test_a_beam_of_five_gives_five_entries_unfinished_ones_marked(stopping):
    # EOS is likely: most examples are done by the stopping rule before the
    # limit with fewer than 5 finished hypotheses; the live ones they held
    # then fill their lists, after the finished ones, without EOS.
    toy = ToyModel(seed=5, eos_bias=6.0)
    ours, theirs = both_beam_searches(
        toy, SOURCES, beam_width=5, length_penalty=0.6, stopping=stopping
    )
    assert_same_result(ours, theirs)
    assert (theirs.beam_lengths > 0).all()
    assert not theirs.beam_finished.all(axis=1).any()  # every list needed filling
    for tokens, lengths, finished in zip(
        theirs.beam_tokens, theirs.beam_lengths, theirs.beam_finished
    ):
        assert finished[0] and sorted(finished, reverse=True) == list(finished)
        ends = tokens[np.arange(len(lengths)), lengths - 1] == EOS
        np.testing.assert_array_equal(ends, finished)


def test_a_search_cut_by_the_step_limit():
    # EOS never wins: the n-best lists hold only live hypotheses at the limit.
    toy = ToyModel(seed=3, eos_bias=-30.0)
    ours, theirs = both_beam_searches(
        toy, SOURCES, beam_width=3, length_penalty=0.6, coverage_penalty=0.2, max_length=5
    )
    assert_same_result(ours, theirs)
    assert theirs.num_steps == 5
    assert not theirs.finished.any()
    assert (theirs.beam_lengths == 5).all()


def test_the_default_step_limit_and_the_models_cap():
    toy = ToyModel(seed=4, eos_bias=-30.0, max_target_length=6)
    ours, theirs = both_beam_searches(
        toy, SOURCES[:2, :3], beam_width=2, max_length_ratio=1.0, max_length_offset=2
    )
    assert_same_result(ours, theirs)
    assert theirs.num_steps == 5  # ceil(1.0 * 3) + 2, under the cap
    ours, theirs = both_beam_searches(toy, SOURCES[:2], beam_width=2)
    assert_same_result(ours, theirs)
    assert theirs.num_steps == 6  # the model's cap


@pytest.mark.parametrize("stopping", ["early", "exact"])
def test_an_image_source_counts_every_position_for_the_coverage(stopping):
    toy = ToyModel(seed=5, eos_bias=1.0)
    ours, theirs = both_beam_searches(
        toy,
        IMAGES,
        beam_width=3,
        length_penalty=0.6,
        coverage_penalty=0.2,
        stopping=stopping,
        max_length=6,
    )
    assert_same_result(ours, theirs)
    assert ours.attention.shape == (3, 6, 6)
    # No region is left out of the first hypothesis' coverage penalty.
    length_factor = ((5.0 + ours.lengths) / 6.0) ** 0.6
    coverage = np.clip(ours.attention.sum(axis=1), 1e-10, 1.0)
    expected = ours.scores / length_factor + 0.2 * np.log(coverage).sum(axis=1)
    np.testing.assert_allclose(ours.penalized_scores, expected, rtol=1e-4)


def test_greedy_search_is_decodings():
    toy = ToyModel(seed=6, eos_bias=1.0)
    assert_same_result(*both_greedy_searches(toy, SOURCES, max_length=7))


class RowCounting:
    """A model whose `decode_step` records how many rows it was given."""

    def __init__(self, model):
        self.model = model
        self.rows = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def decode_step(self, previous_tokens, state, step):
        self.rows.append(len(previous_tokens))
        return self.model.decode_step(previous_tokens, state, step)


def test_greedy_search_runs_only_the_examples_still_decoding():
    # Examples end after 1, 1, 10 and 12 steps: the runner drops the ended
    # ones from the model's rows, the compiled search keeps all 4, and the
    # results are the same. A PAD id other than 0 shows that the dropped
    # examples' tokens are still PAD after their end, not the buffer's zeros.
    model = ToyModel(seed=2, eos_bias=3.0)
    model.pad_id = 1
    toy = RowCounting(model)
    ours = onnx_runner.greedy_search(toy, SOURCES, max_length=12)
    source = ops.convert_to_tensor(SOURCES)
    theirs = to_numpy(decoding.greedy_search(KerasToy(model), source, max_length=12))
    assert_same_result(ours, theirs)
    np.testing.assert_array_equal(theirs.lengths, [1, 10, 12, 1])
    assert toy.rows == [4] + [2] * 9 + [1] * 2


@pytest.mark.parametrize("stopping", ["early", "exact"])
def test_beam_search_runs_only_the_examples_not_done(stopping):
    # The examples are done at different steps: the runner drops them from
    # the model's rows (3 beams each) while the compiled search keeps all 4,
    # and every field of the results, n-best lists included, is the same
    # (the coverage penalty then reads the masks of the examples still run).
    toy = RowCounting(ToyModel(seed=2, eos_bias=3.0))
    kwargs = dict(
        beam_width=3, length_penalty=0.6, coverage_penalty=0.2, stopping=stopping, max_length=12
    )
    ours = onnx_runner.beam_search(toy, SOURCES, **kwargs)
    source = ops.convert_to_tensor(SOURCES)
    theirs = to_numpy(decoding.beam_search(KerasToy(toy.model), source, **kwargs))
    assert_same_result(ours, theirs)
    assert toy.rows[0] == 12 and toy.rows[-1] == 3
    assert toy.rows == sorted(toy.rows, reverse=True)


@pytest.mark.parametrize("eos_bias", [1.0, -30.0])
def test_beam_width_one_is_greedy_search(eos_bias):
    toy = ToyModel(seed=7, eos_bias=eos_bias)
    greedy = onnx_runner.greedy_search(toy, SOURCES, max_length=8)
    beam = onnx_runner.beam_search(toy, SOURCES, beam_width=1, max_length=8)
    for name in greedy._fields[:6]:
        np.testing.assert_array_equal(getattr(beam, name), getattr(greedy, name), err_msg=name)
    np.testing.assert_array_equal(beam.beam_tokens[:, 0], greedy.tokens)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"beam_width": 0},
        {"beam_width": 2.0},
        {"beam_width": True},
        {"length_penalty": -0.5},
        {"length_penalty": "0.6"},
        {"coverage_penalty": -1.0},
        {"stopping": "never"},
        {"stopping": True},
        {"max_length": 0},
        {"max_length": 2.5},
    ],
)
def test_bad_arguments_raise_decodings_errors(kwargs):
    toy = ToyModel()
    with pytest.raises(ValueError) as expected:
        decoding.beam_search(KerasToy(toy), ops.convert_to_tensor(SOURCES), **kwargs)
    with pytest.raises(ValueError) as raised:
        onnx_runner.beam_search(toy, SOURCES, **kwargs)
    assert str(raised.value) == str(expected.value)
    assert "\n" not in str(raised.value)
    if "max_length" in kwargs:
        with pytest.raises(ValueError, match="max_length"):
            onnx_runner.greedy_search(toy, SOURCES, **kwargs)


def test_a_declared_constant_entry_that_the_state_lacks():
    toy = ToyModel()
    toy.constant_state_keys = ("memory", "keys")
    with pytest.raises(ValueError, match=r"constant_state_keys names \['keys'\]"):
        onnx_runner.beam_search(toy, SOURCES)
