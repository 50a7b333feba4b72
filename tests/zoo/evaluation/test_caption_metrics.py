"""zoo.evaluation.caption_metrics: BLEU-1..4, CIDEr-D and METEOR.

Pure Python and NumPy, so the suite runs it once, not per backend.
"""

import shutil

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from zoo.evaluation import caption_metrics
from zoo.evaluation.caption_metrics import MeteorUnavailable
from zoo.evaluation.caption_metrics import caption_bleu
from zoo.evaluation.caption_metrics import caption_scores
from zoo.evaluation.caption_metrics import cider_d
from zoo.evaluation.caption_metrics import meteor

pytestmark = pytest.mark.backend_independent

REFERENCES = [
    [
        "a red circle above a blue square",
        "a red circle and a blue square",
        "a blue square below a red circle",
    ],
    ["a small green triangle", "a green triangle on the left"],
    ["two large circles", "a large yellow circle and a large red circle"],
]
HYPOTHESES = ["a red circle above a blue square", "a green circle", "a large red circle"]

# Reference values from coco-caption's scorers, pycocoevalcap 1.2 (PyPI),
# installed in a throw-away venv:
#   python3 -m venv /tmp/cocoenv && /tmp/cocoenv/bin/pip install pycocoevalcap
#   gts = {i: refs for i, refs in enumerate(REFERENCES)}
#   res = {i: [hyp] for i, hyp in enumerate(HYPOTHESES)}
#   Cider().compute_score(gts, res)[0]      (Cider is CIDEr-D: n = 1..4,
#   Meteor().compute_score(gts, res)[0]      sigma = 6, clipping)
COCO_CIDER_D = 3.624458047514795
# The first hypothesis with "red" said three times: clipping takes back the gain.
COCO_CIDER_D_REPEATED_WORD = 2.9511905480155924
# The first hypothesis 16 words long: the Gaussian length penalty.
COCO_CIDER_D_LONG = 2.145040276286688
COCO_METEOR = 0.3825260687722404


# ---------------------------------------------------------------- BLEU


def test_bleu_n_matches_sacrebleu_with_all_references():
    scores = caption_bleu(HYPOTHESES, REFERENCES)
    # sacrebleu's reference streams: streams[k][i] = k-th reference of image i.
    streams = [
        [refs[k] if k < len(refs) else None for refs in REFERENCES] for k in range(3)
    ]
    for n in range(1, 5):
        bleu = BLEU(max_ngram_order=n)
        direct = bleu.corpus_score(HYPOTHESES, streams)
        assert scores[f"bleu{n}"] == pytest.approx(direct.score, abs=1e-12)
        assert scores["signature"] == str(bleu.get_signature())
    assert "nrefs:var" in scores["signature"]
    # The n-gram order reached sacrebleu: four different scores.
    assert len({scores[f"bleu{n}"] for n in range(1, 5)}) == 4


def test_bleu1_hand_computed_against_the_best_reference():
    # "a green circle": "a" and "green" appear in the references (2 of 3
    # unigrams); its length 3 is closer to the 4-word reference, so
    # BP = exp(1 - 4/3).
    scores = caption_bleu(["a green circle"], [REFERENCES[1]])
    assert scores["bleu1"] == pytest.approx(100 * 2 / 3 * np.exp(1 - 4 / 3))


def test_a_hypothesis_equal_to_one_reference_scores_100():
    scores = caption_bleu([refs[-1] for refs in REFERENCES], REFERENCES)
    assert [scores[f"bleu{n}"] for n in range(1, 5)] == pytest.approx([100.0] * 4)


def test_references_must_be_lists_per_image():
    with pytest.raises(TypeError, match="list of str; entry 0"):
        caption_bleu(["a red circle"], ["a red circle"])
    with pytest.raises(ValueError, match="needs at least one reference"):
        cider_d(["a red circle"], [[]])
    with pytest.raises(ValueError, match="1 reference lists and 2 hypotheses"):
        cider_d(["a", "b"], [["a"]])


# ---------------------------------------------------------------- CIDEr-D


def test_cider_d_matches_coco_caption():
    assert cider_d(HYPOTHESES, REFERENCES) == pytest.approx(COCO_CIDER_D, abs=1e-12)


def test_cider_d_clips_repeated_words_and_penalises_length():
    repeated = ["a red red red circle above a blue square"] + HYPOTHESES[1:]
    long = [
        "a red circle above a blue square and a blue square below a red circle"
    ] + HYPOTHESES[1:]
    assert cider_d(repeated, REFERENCES) == pytest.approx(
        COCO_CIDER_D_REPEATED_WORD, abs=1e-12
    )
    assert cider_d(long, REFERENCES) == pytest.approx(COCO_CIDER_D_LONG, abs=1e-12)
    assert cider_d(repeated, REFERENCES) < COCO_CIDER_D
    assert cider_d(long, REFERENCES) < COCO_CIDER_D


def test_cider_d_of_perfect_captions():
    # Every 1- to 4-gram has non-zero IDF (each image has its own words):
    # cosine 1 at every order, no length penalty, times 10.
    assert cider_d(
        ["a red circle on the left", "a blue square on the right"],
        [["a red circle on the left"], ["a blue square on the right"]],
    ) == pytest.approx(10.0)
    # 3-word captions have no 4-grams, so that order adds 0: 10 * 3/4
    # (coco-caption gives 7.500000000000001).
    assert cider_d(
        ["a red circle", "a blue square"], [["a red circle"] * 2, ["a blue square"] * 3]
    ) == pytest.approx(7.5)
    # One image: every n-gram is in every image's references, IDF log(1/1) = 0.
    assert cider_d(["a red circle"], [["a red circle", "a red circle on top"]]) == 0.0


# ---------------------------------------------------------------- METEOR


def test_meteor_is_skipped_with_a_reason_without_java(monkeypatch):
    monkeypatch.setattr(caption_metrics.shutil, "which", lambda name: None)
    with pytest.raises(MeteorUnavailable, match=r"^METEOR skipped: no Java runtime"):
        meteor(HYPOTHESES, REFERENCES)
    scores = caption_scores(HYPOTHESES, REFERENCES)
    assert "meteor" not in scores
    assert scores["meteor_skipped"].startswith("METEOR skipped: no Java runtime")
    # The other metrics are still there.
    assert scores["cider_d"] == pytest.approx(COCO_CIDER_D, abs=1e-12)
    assert scores["bleu4"] == pytest.approx(caption_bleu(HYPOTHESES, REFERENCES)["bleu4"])


def test_meteor_is_skipped_without_a_jar(tmp_path):
    missing = tmp_path / "meteor-1.5.jar"
    if shutil.which("java") is None:
        pytest.skip("no java on PATH; the no-java case is tested above")
    with pytest.raises(MeteorUnavailable, match=r"^METEOR skipped: no jar at .*meteor-1\.5\.jar"):
        meteor(HYPOTHESES, REFERENCES, jar_path=missing)


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH (the no-java case is tested above)")
def test_meteor_matches_coco_caption():
    """pycocoevalcap's jar, installed with the development set-up, run with
    Java (about 15 s: the JVM loads the paraphrase table) gives coco-caption's
    METEOR."""
    assert caption_metrics._bundled_meteor_jar() is not None, "pycocoevalcap is not installed"
    scores = caption_scores(HYPOTHESES, REFERENCES)
    assert "meteor_skipped" not in scores
    assert scores["meteor"] == pytest.approx(COCO_METEOR, abs=1e-9)
