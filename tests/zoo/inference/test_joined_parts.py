"""A line translated in parts (split at sentence ends) and joined: the
Python API's `_join_parts` and the ONNX runner's, their alignment and their
n-best lists."""

import numpy as np
import pytest
from scipy.linalg import block_diag

from zoo.evaluation import alignment
from zoo.export import onnx_runner
from zoo.inference import translator

pytestmark = pytest.mark.backend_independent

# Each API's Translation and Hypothesis, its join, and its word alignment of
# a Translation in Pharaoh format.
APIS = {
    "python": (
        translator,
        lambda t: alignment.format_pharaoh(
            alignment.word_alignment(t.alignment, t.source_pieces, t.target_pieces)
        ),
    ),
    "onnx runner": (onnx_runner, onnx_runner.pharaoh_alignment),
}


def parts(api, count, rng):
    """`count` translated sentences of 3 source and 4 target pieces (the
    last one EOS), with random attention."""
    return [
        api.Translation(
            text=f"t{i}",
            source_pieces=[f"s{i}", f"u{i}", "[EOS]"],
            target_pieces=[f"t{i}", f"v{i}", f"w{i}", "[EOS]"],
            alignment=rng.dirichlet(np.ones(3), size=4).astype("float32"),
            score=-1.0,
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("name", APIS)
def test_the_joined_alignment_grows_with_the_line_not_its_square(name):
    # 100,000 words in sentences of 10 once asked for a dense (340000,
    # 100000) matrix; 300 parts show the same: the representation holds
    # the parts' blocks and nothing more.
    api, pharaoh = APIS[name]
    pieces = parts(api, 300, np.random.default_rng(0))
    joined = api._join_parts(pieces)
    assert joined.parts == 300 and joined.alignment.shape == (1200, 900)
    assert joined.alignment.nbytes == sum(p.alignment.nbytes for p in pieces)
    dense = block_diag(*[p.alignment for p in pieces])
    np.testing.assert_array_equal(np.asarray(joined.alignment), dense)
    # The word links, block by block, are those of the dense matrix.
    as_dense = api.Translation(
        joined.text, joined.source_pieces, joined.target_pieces, dense, joined.score
    )
    assert pharaoh(joined) == pharaoh(as_dense) != ""


@pytest.mark.parametrize("name", APIS)
def test_a_joined_entry_is_unfinished_when_a_parts_entry_is(name):
    api = APIS[name][0]
    first, second = parts(api, 2, np.random.default_rng(1))
    first.n_best = [api.Hypothesis("a", -1.0, -0.5), api.Hypothesis("b", -3.0, -2.0, False)]
    second.n_best = [api.Hypothesis("c", -2.0, -1.0), api.Hypothesis("d", -4.0, -3.0)]
    joined = api._join_parts([first, second])
    assert [(h.text, h.score, h.finished) for h in joined.n_best] == [
        ("a c", -3.0, True),
        ("b d", -7.0, False),
    ]


def test_a_joined_alignment_tells_whether_any_weight_is_set_without_the_dense_matrix():
    # `zoo translate --alignments` asks it of every line, to say when a model
    # has no attention.
    zero, one = np.zeros((2, 3)), np.eye(2)
    assert not alignment.BlockAlignment([zero, zero]).any()
    assert alignment.BlockAlignment([zero, one]).any()
