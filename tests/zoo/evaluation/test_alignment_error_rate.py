"""Och and Ney's alignment error rate, precision and recall against
hand-computed values, and the gold Pharaoh lines they read."""

import numpy as np
import pytest

from zoo.evaluation.alignment import GoldAlignment
from zoo.evaluation.alignment import alignment_error_rate
from zoo.evaluation.alignment import parse_gold
from zoo.evaluation.alignment import parse_pharaoh
from zoo.evaluation.alignment import peak_links
from zoo.evaluation.alignment import read_gold

pytestmark = pytest.mark.backend_independent


def test_sure_only_gold_has_possible_equal_to_sure():
    gold = parse_gold("0-0 1-1 2-3")
    assert gold == GoldAlignment(frozenset({(0, 0), (1, 1), (2, 3)}), gold.sure)
    # A sure link written twice, once as possible, stays sure.
    assert parse_gold("0?0 0-0").sure == {(0, 0)}


def test_a_perfect_alignment_scores_zero_and_an_empty_one_one():
    gold = parse_gold("0-0 1-1")
    perfect = alignment_error_rate([[(0, 0), (1, 1)]], [gold])
    assert (perfect.aer, perfect.precision, perfect.recall) == (0.0, 1.0, 1.0)
    empty = alignment_error_rate([[]], [gold])
    assert (empty.aer, empty.precision, empty.recall) == (1.0, 0.0, 0.0)


def test_hand_computed_scores_with_possible_links():
    # S = {0-0, 1-1, 2-2}, P = S + {1-2, 3-2}.
    gold = parse_gold("0-0 1-1 2-2 1?2 3?2")
    # A: 0-0 (sure), 1-2 (possible only), 3-3 (wrong), 2-2 (sure).
    links = [(0, 0), (1, 2), (3, 3), (2, 2)]
    scores = alignment_error_rate([links], [gold])
    # |A|=4 |S|=3 |A∩S|=2 |A∩P|=3: AER = 1 - 5/7, P = 3/4, R = 2/3.
    assert scores.aer == pytest.approx(2 / 7)
    assert scores.precision == pytest.approx(3 / 4)
    assert scores.recall == pytest.approx(2 / 3)
    assert (scores.links, scores.sure, scores.possible) == (4, 3, 5)
    # The same links with every gold link sure: a possible hit counts once.
    sure = alignment_error_rate([links], [parse_gold("0-0 1-1 2-2 1-2 3-2")])
    assert sure.aer == pytest.approx(1 - (3 + 3) / (4 + 5))
    assert sure.recall == pytest.approx(3 / 5)


def test_the_corpus_sums_counts_before_dividing():
    golds = [parse_gold("0-0"), parse_gold("0-0 1-1 2-2 3-3")]
    alignments = [[(0, 0)], [(0, 1), (1, 1), (2, 2), (3, 0)]]
    scores = alignment_error_rate(alignments, golds)
    # Sums: |A|=5 |S|=5 |A∩S|=3 = |A∩P|; the mean of per-sentence AERs (0 and 0.5) differs.
    assert scores.aer == pytest.approx(1 - 6 / 10)
    assert scores.precision == pytest.approx(3 / 5) and scores.recall == pytest.approx(3 / 5)


def test_nothing_to_align_scores_zero():
    assert alignment_error_rate([[]], [parse_gold("")]).aer == 0.0


def test_counts_must_match():
    with pytest.raises(ValueError, match="2 alignments for 1 gold"):
        alignment_error_rate([[], []], [parse_gold("")])


@pytest.mark.parametrize("line, item", [("0-0 1:2", "1:2"), ("0-0 a-1", "a-1"), ("-1-2", "-1-2")])
def test_a_bad_link_is_named(line, item):
    for parse in (parse_gold, parse_pharaoh):
        with pytest.raises(ValueError, match=f"'{item}' is not a Pharaoh link"):
            parse(line)


def test_read_gold_names_the_bad_line():
    assert read_gold(["0-0\n", "\n", "1?0 0-1\n"])[2] == parse_gold("0-1 1?0")
    with pytest.raises(ValueError, match=r"^gold\.txt: line 2: '0=1' is not"):
        read_gold(["0-0\n", "0=1\n"], name="gold.txt")


def test_peak_links_skip_pieces_without_a_word_or_without_attention():
    attention = np.array(
        [
            [0.2, 0.7, 0.1],  # word 0 -> piece 1 (word 1)
            [0.5, 0.1, 0.4],  # word 0 again -> piece 0 (word 0)
            [0.0, 0.0, 0.0],  # no attention (RNNencdec): no link
            [0.1, 0.1, 0.8],  # EOS: no word
        ]
    )
    # Source piece 2 is no word (EOS), so row 3 would peak nowhere.
    assert peak_links(attention, [0, 1, None], [0, 0, 1, None]) == [(0, 0), (1, 0)]
