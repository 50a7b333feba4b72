"""The synthetic corpus's gold word alignments: opt-in, leaving the pairs
as they were, every link on a word, and the links of pairs checked by hand."""

import doctest
import hashlib
import json

import pytest

from zoo.data.synthetic import corpus
from zoo.data.synthetic import TARGET_LEXICON
from zoo.data.synthetic import synthetic_corpus
from zoo.data.synthetic import synthetic_splits
from zoo.evaluation.alignment import parse_gold

pytestmark = pytest.mark.backend_independent


def digest(value):
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def test_alignments_leave_the_pairs_byte_for_byte_as_before():
    # The digests of the corpus written before alignments existed (main at 0ea68ef).
    assert digest(synthetic_corpus(300, seed=0)) == (
        "20226fbcfaed20b477396eb2c8b539a068a2b333c28278dd7e9c62e3f918c584"
    )
    assert digest(synthetic_splits(200, 30, 30, seed=3)) == (
        "cf223eb32d70d84692e79052dfcd5839925b27fbca1ec0424ea267ad5e8d896c"
    )
    aligned = synthetic_corpus(300, seed=0, with_alignments=True)
    assert [pair[:2] for pair in aligned] == synthetic_corpus(300, seed=0)
    splits = synthetic_splits(200, 30, 30, seed=3, with_alignments=True)
    plain = synthetic_splits(200, 30, 30, seed=3)
    assert {name: [p[:2] for p in pairs] for name, pairs in splits.items()} == plain


# Hand-checked: adjectives after the noun, mirrored; a subordinate verb
# moved to the end; coordination. Word i of the source, j of the target.
HAND_CHECKED = [
    (
        (1, 2, 4, 6),
        "a ship watches a sad road.",
        "une tigik rosebe una sufud lisul.",
        # a-une ship-tigik watches-rosebe a-una sad-lisul road.-sufud; the
        # last words share the period: a possible link.
        "0-0 1-1 2-2 3-3 4-5 5-4 5?5",
    ),
    (
        (400, 0, 10, 16, 365),
        "a sad queen near this bird helps the boat because the student paints a white fish.",
        "une nutim lisul pres esto guvek tulone da ponis vel do rozar una telos gelol degeko.",
        # sad queen -> queen sad; in the because clause "paints" (12) ends it
        # (15), and "white fish." (14, 15) becomes "fish white" (13, 14).
        "0-0 1-2 2-1 3-3 4-4 5-5 6-6 7-7 8-8 9-9 10-10 11-11 12-15 13-12 14-14 15-13 15?15",
    ),
    (
        (60, 5, 6, 12, 56),
        "the rabbit sleeps and the ball runs because every quiet ball smiles.",
        "do fegek dokupo ku do peres puvefo vel ogno peres pitol niboto.",
        # "quiet ball" -> "ball quiet"; the intransitive verb is last anyway.
        "0-0 1-1 2-2 3-3 4-4 5-5 6-6 7-7 8-8 9-10 10-9 11-11",
    ),
]


@pytest.mark.parametrize("where, source, target, alignment", HAND_CHECKED)
def test_hand_checked_alignments(where, source, target, alignment):
    size, seed, min_length, max_length, *index = where
    pairs = synthetic_corpus(size, seed, min_length, max_length, with_alignments=True)
    assert pairs[index[0] if index else 0] == (source, target, alignment)


def translations(source_word):
    """Every target form of a source word (a verb's or determiner's genders)."""
    lexicon = TARGET_LEXICON
    for table in (lexicon.verbs, lexicon.determiners):
        if source_word in table:
            return set(table[source_word].values())
    for table in (lexicon.nouns, lexicon.adjectives, lexicon.function_words):
        if source_word in table:
            return {table[source_word]}
    raise AssertionError(f"{source_word!r} is no source word")


def test_every_sure_link_joins_a_word_to_its_translation_one_to_one():
    pairs = synthetic_splits(150, 0, 150, seed=4, with_alignments=True)
    for source, target, line in pairs["train"] + pairs["test"]:
        source_words = source.removesuffix(".").split()
        target_words = target.removesuffix(".").split()
        gold = parse_gold(line)
        for i, j in gold.possible:  # every link is on a word of the pair
            assert 0 <= i < len(source_words) and 0 <= j < len(target_words), (source, line)
        # One sure link per word on each side: a permutation.
        assert sorted(j for _, j in gold.sure) == list(range(len(target_words))), line
        assert sorted(i for i, _ in gold.sure) == list(range(len(source_words))), line
        for i, j in gold.sure:
            assert target_words[j] in translations(source_words[i]), (source, target, (i, j))
        # The only possible-only link is the two last words, which share ".".
        extra = gold.possible - gold.sure
        assert extra <= {(len(source_words) - 1, len(target_words) - 1)}


def test_docstring_examples_run():
    result = doctest.testmod(corpus, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_in_order_pairs_are_those_whose_words_keep_their_places():
    """`GoldAlignment.in_order` (the pairs a monotonic attention can follow)
    against the grammar: an adjective always moves behind its noun; without
    adjectives and subordinate clauses every word keeps its place."""
    pairs = synthetic_splits(0, 0, 300, seed=5, with_alignments=True)["test"]
    in_order = [parse_gold(line).in_order for _, _, line in pairs]
    for (source, _, line), flag in zip(pairs, in_order):
        assert flag == all(i == j for i, j in parse_gold(line).sure), line
        words = source.removesuffix(".").split()
        if any(word in TARGET_LEXICON.adjectives for word in words):
            assert not flag, source
        elif "because" not in words and "that" not in words:
            assert flag, source
    assert 0 < sum(in_order) < len(in_order)
    assert not any(parse_gold(alignment).in_order for *_, alignment in HAND_CHECKED)
