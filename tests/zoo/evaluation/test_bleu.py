"""zoo.evaluation.bleu: corpus BLEU, BLEU by source length, and the comparison table.

Pure Python (sacrebleu), so the suite runs it once, not per backend.
"""

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from zoo.evaluation.bleu import LengthBucket
from zoo.evaluation.bleu import bleu_by_length
from zoo.evaluation.bleu import corpus_bleu
from zoo.evaluation.bleu import format_bleu_table

pytestmark = pytest.mark.backend_independent

HYPOTHESES = [
    "the cat sat on the mat",
    "there is a dog in the garden today",
    "he reads a book",
]
REFERENCES = [
    "the cat sat on a mat",
    "a dog is in the garden today",
    "he is reading a book",
]


def _words(n, word="w"):
    return " ".join([word] * n)


def test_perfect_hypotheses_score_100():
    result = corpus_bleu(REFERENCES, REFERENCES)
    assert result.score == pytest.approx(100.0)


def test_hand_computed_case():
    # 13a tokens: unigrams 5/6, bigrams 3/5, trigrams 2/4, 4-grams 1/3,
    # equal lengths so BP = 1.
    result = corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    expected = 100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert result.score == pytest.approx(expected, abs=1e-9)


def test_matches_sacrebleu_called_directly():
    bleu = BLEU()
    direct = bleu.corpus_score(HYPOTHESES, [REFERENCES])
    result = corpus_bleu(HYPOTHESES, REFERENCES)
    assert result.score == pytest.approx(direct.score, abs=1e-12)
    signature = str(bleu.get_signature())
    assert result.signature == signature
    assert "nrefs:1" in signature and "tok:13a" in signature
    assert sacrebleu.__version__ in signature
    # Printed exactly as sacrebleu's command line prints it.
    assert str(result) == direct.format(signature=signature)
    assert str(result).startswith(f"BLEU|{signature} = {direct.score:.2f}")


def test_bleu_options_reach_sacrebleu():
    shouted = [h.upper() for h in HYPOTHESES]
    assert corpus_bleu(shouted, REFERENCES).score < 5
    lowercased = corpus_bleu(shouted, REFERENCES, lowercase=True)
    assert lowercased.score == pytest.approx(corpus_bleu(HYPOTHESES, REFERENCES).score)
    assert "case:lc" in lowercased.signature


def test_multi_reference_transposed_into_streams():
    # Each hypothesis matches its *second* reference exactly: a wrong
    # transposition (references read as streams) would not give 100.
    references = [
        ["a completely different sentence here", HYPOTHESES[0]],
        ["nothing alike at all in any way", HYPOTHESES[1]],
        ["unrelated words only", HYPOTHESES[2]],
    ]
    result = corpus_bleu(HYPOTHESES, references)
    assert result.score == pytest.approx(100.0)
    assert "nrefs:2" in result.signature

    # A non-trivial score agrees with sacrebleu given the streams by hand.
    hypotheses = ["the cat sat on the mat", "a dog in the garden", "a book"]
    streams = [[refs[k] for refs in references] for k in range(2)]
    direct = BLEU().corpus_score(hypotheses, streams)
    assert 0 < direct.score < 100
    assert corpus_bleu(hypotheses, references).score == pytest.approx(direct.score)


def test_variable_number_of_references():
    references = [[REFERENCES[0], HYPOTHESES[0]], [REFERENCES[1]], [REFERENCES[2]]]
    result = corpus_bleu(HYPOTHESES, references)
    direct = BLEU().corpus_score(
        HYPOTHESES,
        [REFERENCES, [HYPOTHESES[0], None, None]],
    )
    assert result.score == pytest.approx(direct.score)
    assert "nrefs:var" in result.signature


@pytest.mark.parametrize(
    "hypotheses, references, error",
    [
        ("one string", ["one string"], TypeError),
        (["a", "b"], ["a"], ValueError),
        (["a"], "a", TypeError),
        (["a", "b"], ["a", ["b"]], TypeError),
        (["a"], [[]], ValueError),
        ([], [], ValueError),
    ],
)
def test_bad_arguments_raise(hypotheses, references, error):
    with pytest.raises(error):
        corpus_bleu(hypotheses, references)


def test_bucket_boundaries_are_closed_on_the_right():
    lengths = [0, 1, 10, 11, 20, 21, 59, 60, 61, 100]
    sources = [_words(n) for n in lengths]
    sentences = [f"sentence number {i} is here" for i in range(len(lengths))]
    rows = bleu_by_length(sources, sentences, sentences)
    assert [row.label for row in rows] == [
        "1-10", "11-20", "21-30", "31-40", "41-50", "51-60", ">60",
    ]
    counts = {row.label: row.count for row in rows}
    # 0, 1 and 10 words -> 1-10; 11 and 20 -> 11-20; 21 -> 21-30;
    # 59 and 60 -> 51-60; 61 and 100 -> the open bucket.
    assert counts == {
        "1-10": 3, "11-20": 2, "21-30": 1, "31-40": 0,
        "41-50": 0, "51-60": 2, ">60": 2,
    }
    assert [(row.low, row.high) for row in rows][0] == (1, 10)
    assert (rows[-1].low, rows[-1].high) == (61, None)


def test_bucket_scores_use_only_their_sentences():
    sources = [_words(5), _words(5), _words(15), _words(70)]
    references = ["a b c d e", "f g h i j", "k l m n o", "p q r s t"]
    hypotheses = ["a b c d e", "f g h i j", "x y z u v", "p q r s t"]
    rows = {row.label: row for row in bleu_by_length(sources, hypotheses, references)}
    assert rows["1-10"].count == 2
    assert rows["1-10"].bleu == pytest.approx(100.0)
    assert rows["11-20"].count == 1
    assert rows["11-20"].bleu == 0.0  # a real zero, not "empty"
    assert rows["21-30"].count == 0 and rows["21-30"].bleu is None
    assert rows[">60"].bleu == pytest.approx(100.0)


def test_a_bucket_scores_corpus_bleu_of_its_sentences_not_their_mean():
    # Partial matches, where a bucket's corpus BLEU (n-gram counts pooled)
    # and the mean of its sentence BLEUs differ; 0 and 100 can't tell them apart.
    sources = [_words(5), _words(6), _words(15), _words(16)]
    references = [
        "the cat sat on the red mat today", "a dog ran in the big park",
        "two birds sing in a tall tree", "the boy reads a long book",
    ]
    hypotheses = [
        "the cat sat on the mat", "a dog ran in a big park",
        "two birds sing in the tree", "a boy reads the long book",
    ]
    rows = {row.label: row for row in bleu_by_length(sources, hypotheses, references)}
    for label, part in (("1-10", slice(0, 2)), ("11-20", slice(2, 4))):
        expected = sacrebleu.corpus_bleu(hypotheses[part], [references[part]]).score
        mean_of_sentences = np.mean(
            [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hypotheses[part], references[part])]
        )
        assert abs(expected - mean_of_sentences) > 1.0  # the case tells them apart
        assert 0.0 < expected < 100.0
        assert rows[label].bleu == pytest.approx(expected, abs=1e-9)
    # The whole-corpus score pools all four.
    assert corpus_bleu(hypotheses, references).score == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references]).score, abs=1e-9
    )


def test_bleu_by_length_with_tokenized_sources_and_several_references():
    # Token lists are counted with len(); "12 tokens" -> 11-20 though the
    # joined string would be 1 word.
    sources = [["tok"] * 12, ["x"]]
    hypotheses = ["the cat sat down", "a dog ran away"]
    references = [["a cat sat down", "the cat sat down"], ["a dog ran away"]]
    rows = {r.label: r for r in bleu_by_length(sources, hypotheses, references)}
    assert rows["11-20"].count == 1 and rows["1-10"].count == 1
    assert rows["11-20"].bleu == pytest.approx(100.0)
    assert rows["1-10"].bleu == pytest.approx(100.0)


def test_custom_bucket_width():
    rows = bleu_by_length([_words(3), _words(4)], ["a b", "c d"], ["a b", "c d"],
                          bucket_width=3, max_length=6)
    assert [(r.label, r.count) for r in rows] == [("1-3", 1), ("4-6", 1), (">6", 0)]


@pytest.mark.parametrize("bucket_width, max_length", [(0, 60), (10, 55), (10, 0)])
def test_bad_buckets_raise(bucket_width, max_length):
    with pytest.raises(ValueError, match="bucket_width|max_length"):
        bleu_by_length(["a"], ["a"], ["a"], bucket_width, max_length)


def _rows(scores, counts):
    labels = ["1-10", "11-20", ">20"]
    bounds = [(1, 10), (11, 20), (21, None)]
    return [
        LengthBucket(label, low, high, count, score)
        for label, (low, high), count, score in zip(labels, bounds, counts, scores)
    ]


def test_format_bleu_table_two_models_side_by_side():
    table = format_bleu_table(
        {
            "RNNsearch-50": _rows([31.234, 0.0, None], [4, 2, 0]),
            "RNNenc|dec": _rows([25.0, 12.349, None], [4, 2, 0]),
        }
    )
    assert table == (
        "| Source words | Sentences | RNNsearch-50 | RNNenc\\|dec |\n"
        "| :-- | --: | --: | --: |\n"
        "| 1-10 | 4 | 31.23 | 25.00 |\n"
        "| 11-20 | 2 | 0.00 | 12.35 |\n"
        "| >20 | 0 | - | - |\n"
    )


def test_format_bleu_table_from_bleu_by_length():
    sources = [_words(5), _words(65)]
    refs = ["a b c d", "e f g h"]
    table = format_bleu_table({"m": bleu_by_length(sources, refs, refs)})
    lines = table.splitlines()
    assert len(lines) == 2 + 7
    assert lines[2] == "| 1-10 | 1 | 100.00 |"
    assert lines[3] == "| 11-20 | 0 | - |"
    assert lines[-1] == "| >60 | 1 | 100.00 |"


def test_format_bleu_table_rejects_mismatched_models():
    with pytest.raises(ValueError, match="different buckets or sentence counts"):
        format_bleu_table({"a": _rows([1, 2, 3], [1, 1, 1]),
                           "b": _rows([1, 2, 3], [1, 2, 0])})
    with pytest.raises(ValueError, match="non-empty"):
        format_bleu_table({})


def test_no_deep_learning_framework_imported():
    import subprocess
    import sys

    code = (
        "import sys, zoo.evaluation.bleu, zoo.evaluation.plots; "
        "print(sorted(m for m in ('tensorflow', 'jax', 'torch', 'keras') "
        "if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert output == "[]"
