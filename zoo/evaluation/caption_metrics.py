"""Caption metrics for Show, Attend and Tell.

Xu et al. (2015) report BLEU-1 to BLEU-4 and METEOR, the COCO leaderboard
adds CIDEr-D; this module computes all three on decoded captions
(`zoo.evaluation.localisation` measures where the decoder looked).

Pure Python, NumPy and sacrebleu (METEOR runs the METEOR 1.5 jar with Java
when both are available): no tensorflow, jax or torch, so it runs with every
Keras backend.

Captions are compared word by word on whitespace, as the scorers of the
coco-caption toolkit do after its PTB tokenizer: pass lower-cased text with
punctuation split off (the synthetic captions already are).

Example:

>>> hypotheses = ["a red circle above a blue square", "a green circle"]
>>> references = [["a red circle above a blue square", "a red circle and a blue square"],
...               ["a small green triangle", "a green triangle on the left"]]
>>> scores = caption_scores(hypotheses, references)   # doctest: +SKIP
>>> scores["bleu4"], scores["cider_d"], scores.get("meteor_skipped")  # doctest: +SKIP

References:
    Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption Generation
    with Visual Attention", https://arxiv.org/abs/1502.03044.
    Vedantam, Zitnick and Parikh, 2015, "CIDEr: Consensus-based Image
    Description Evaluation", https://arxiv.org/abs/1411.5726.
    Chen et al., 2015, "Microsoft COCO Captions: Data Collection and
    Evaluation Server" (the coco-caption toolkit, CIDEr-D),
    https://github.com/tylin/coco-caption.
    Denkowski and Lavie, 2014, "Meteor Universal: Language Specific
    Translation Evaluation for Any Target Language".
"""

from __future__ import annotations

import collections
import importlib.util
import math
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

import numpy as np

from zoo.evaluation.bleu import _check_hypotheses
from zoo.evaluation.bleu import corpus_bleu

# CIDEr-D's settings in coco-caption: n-grams of 1 to 4 words and the
# standard deviation (in words) of the Gaussian length penalty.
_CIDER_MAX_N = 4
_CIDER_SIGMA = 6.0


class MeteorUnavailable(RuntimeError):
    """METEOR can't run here: no `java` on PATH or no METEOR 1.5 jar.

    The message starts with "METEOR skipped: " and says what is missing.
    """


def caption_bleu(hypotheses, references, **bleu_options):
    """Corpus BLEU-1 to BLEU-4 of captions, each against all its references.

    BLEU-n is sacrebleu's BLEU with `max_ngram_order=n` (the geometric mean
    of the 1- to n-gram precisions times the brevity penalty), on the
    0-100 scale. Scores follow sacrebleu's conventions (13a tokenization,
    exponential smoothing, closest reference length), so they are close to,
    not identical with, coco-caption's BLEU (PTB tokenizer, no smoothing).

    Args:
        hypotheses: sequence of str, one generated caption per image.
        references: sequence of sequences of str, the reference captions of
            each image (their number may vary from image to image).
        **bleu_options: passed to `sacrebleu.metrics.BLEU` (`tokenize`,
            `lowercase`, `smooth_method`, ...).

    Returns:
        dict: `"bleu1"` to `"bleu4"` (float, 0-100) and `"signature"`
        (str, sacrebleu's signature; the same for every n, since sacrebleu's
        signature does not record the n-gram order, which the key names).

    Raises:
        TypeError, ValueError: as `zoo.evaluation.bleu.corpus_bleu`.

    Example:

    >>> scores = caption_bleu(["a red circle on the left"],
    ...                       [["a red circle on the left", "a circle"]])
    >>> round(scores["bleu1"], 2), round(scores["bleu4"], 2)
    (100.0, 100.0)
    """
    hypotheses, references = _check_corpus(hypotheses, references)
    scores = {}
    for n in range(1, 5):
        result = corpus_bleu(
            hypotheses, references, max_ngram_order=n, **bleu_options
        )
        scores[f"bleu{n}"] = result.score
    scores["signature"] = result.signature
    return scores


def cider_d(hypotheses, references):
    """CIDEr-D of a corpus, as coco-caption's `Cider` scorer computes it.

    Each caption becomes, for n = 1..4, a vector of TF-IDF weights of its
    n-grams: term frequency times `log(N / df)`, where N is the number of
    images and df the number of images whose references contain the n-gram
    (n-grams seen in no reference count df = 1). For each reference, the
    similarity at order n is the cosine of the two vectors with the
    hypothesis weights clipped by the reference weights (CIDEr-D's "clipping",
    so repeating a word earns nothing), times the Gaussian length penalty
    `exp(-(len_hyp - len_ref)^2 / (2 * 6^2))`. An image's score is 10 times
    the mean over n of the similarities averaged over its references, and
    CIDEr-D is the mean over images.

    The IDF is computed from the references of the corpus being scored, so
    scores depend on the corpus: with one image every n-gram has IDF 0 and
    the score is 0; a perfect caption scores 10 only if it has 4-grams whose
    IDF is not 0.

    Args:
        hypotheses: sequence of str, one generated caption per image.
        references: sequence of sequences of str, the reference captions of
            each image.

    Returns:
        float, CIDEr-D (0 to 10 for captions whose n-grams all appear in their
        references; the reported numbers are often this times 100).

    Raises:
        TypeError, ValueError: an input is not a list of str per image, the
            counts differ, or an image has no reference.

    Example:

    >>> cider_d(["a red circle on the left", "a blue square on the right"],
    ...         [["a red circle on the left"], ["a blue square on the right"]])
    10.0

    References:
        Vedantam et al., 2015 (CIDEr); `pycocoevalcap/cider/cider_scorer.py`
        of coco-caption (CIDEr-D).
    """
    hypotheses, references = _check_corpus(hypotheses, references)
    hypothesis_counts = [_ngram_counts(h) for h in hypotheses]
    reference_counts = [[_ngram_counts(r) for r in refs] for refs in references]

    document_frequency = collections.Counter()
    for refs in reference_counts:
        document_frequency.update(set().union(*refs))
    log_images = math.log(len(hypotheses))

    def tf_idf(counts):
        return {
            ngram: count * (log_images - math.log(max(1, document_frequency[ngram])))
            for ngram, count in counts.items()
        }

    scores = []
    for hypothesis, refs in zip(hypothesis_counts, reference_counts):
        hypothesis_vector = tf_idf(hypothesis)
        similarity = np.zeros(_CIDER_MAX_N)
        for ref in refs:
            similarity += _clipped_cosines(hypothesis_vector, tf_idf(ref)) * (
                _length_penalty(_length(hypothesis) - _length(ref))
            )
        scores.append(10.0 * similarity.mean() / len(refs))
    return float(np.mean(scores))


def meteor(hypotheses, references, jar_path=None):
    """Corpus METEOR 1.5, as coco-caption runs it (`-l en -norm`).

    Runs `java -jar meteor-1.5.jar - - -stdio -l en -norm` once for the whole
    corpus, scores each caption against all its references, and returns the
    jar's corpus-level score (from the summed statistics, not the mean of the
    captions' scores), as coco-caption reports it.

    Args:
        hypotheses: sequence of str, one generated caption per image.
        references: sequence of sequences of str, the reference captions of
            each image.
        jar_path: optional path of `meteor-1.5.jar` (its `data/` folder with
            the paraphrase table beside it). By default, the jar bundled with
            the `pycocoevalcap` package, if that is installed.

    Returns:
        float, METEOR in [0, 1].

    Raises:
        MeteorUnavailable: no `java` on PATH, or no jar (message
            "METEOR skipped: ...").
        RuntimeError: the jar stopped before answering (its stderr is in the
            message).

    Example:

    >>> meteor(["a red circle"], [["a red circle", "a red disc"]])  # doctest: +SKIP
    1.0
    """
    hypotheses, references = _check_corpus(hypotheses, references)
    java = shutil.which("java")
    if java is None:
        raise MeteorUnavailable(
            "METEOR skipped: no Java runtime (`java`) on PATH; install a JRE to "
            "score METEOR."
        )
    jar = pathlib.Path(jar_path) if jar_path is not None else _bundled_meteor_jar()
    if jar is None:
        raise MeteorUnavailable(
            "METEOR skipped: no METEOR 1.5 jar; pass jar_path, or `pip install "
            "pycocoevalcap`, which bundles meteor-1.5.jar."
        )
    if not jar.is_file():
        raise MeteorUnavailable(f"METEOR skipped: no jar at {jar}.")

    command = [java, "-jar", "-Xmx2G", jar.name, "-", "-", "-stdio", "-l", "en", "-norm"]
    # stderr goes to a file, not a pipe nobody reads, which could fill and
    # block the jar; it is shown only if the jar dies.
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as errors:
        # cwd: the jar finds its paraphrase table relative to its folder.
        with subprocess.Popen(
            command, cwd=jar.parent, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=errors, text=True, encoding="utf-8",
        ) as process:
            try:
                # One request, one answer line, in turn: writing everything
                # first could fill both pipes and deadlock on a large corpus.
                statistics = [
                    _ask_meteor(process, errors, " ||| ".join(
                        ["SCORE", *map(_meteor_text, refs), _meteor_text(hyp)]
                    ))
                    for hyp, refs in zip(hypotheses, references)
                ]
                _ask_meteor(process, errors, " ||| ".join(["EVAL", *statistics]))
                # EVAL answers one line per caption (already read: the first
                # by _ask_meteor), then the corpus score.
                for _ in range(len(hypotheses) - 1):
                    _read_meteor_line(process, errors)
                return float(_read_meteor_line(process, errors))
            finally:
                process.stdin.close()
                process.kill()


def caption_scores(hypotheses, references, meteor_jar_path=None):
    """BLEU-1..4, CIDEr-D and METEOR of a corpus of captions, in one dict.

    Args:
        hypotheses: sequence of str, one generated caption per image.
        references: sequence of sequences of str, the reference captions of
            each image.
        meteor_jar_path: optional path of `meteor-1.5.jar`, as in `meteor`.

    Returns:
        dict with `"bleu1"` to `"bleu4"` (0-100), `"bleu_signature"` (str),
        `"cider_d"` (float), and either `"meteor"` (float in [0, 1]) or,
        when METEOR can't run here, `"meteor_skipped"` (str, the reason).

    Example:

    >>> caption_scores(hypotheses, references)   # doctest: +SKIP
    {'bleu1': 71.3, ..., 'bleu_signature': 'nrefs:var|...', 'cider_d': 3.62,
     'meteor_skipped': 'METEOR skipped: no METEOR 1.5 jar; ...'}
    """
    bleu = caption_bleu(hypotheses, references)
    scores = {f"bleu{n}": bleu[f"bleu{n}"] for n in range(1, 5)}
    scores["bleu_signature"] = bleu["signature"]
    scores["cider_d"] = cider_d(hypotheses, references)
    try:
        scores["meteor"] = meteor(hypotheses, references, jar_path=meteor_jar_path)
    except MeteorUnavailable as unavailable:
        scores["meteor_skipped"] = str(unavailable)
    return scores


def _check_corpus(hypotheses, references):
    hypotheses = _check_hypotheses(hypotheses)
    if isinstance(references, str):
        raise TypeError("references must be a sequence (one list per caption), not one str.")
    references = list(references)
    if len(references) != len(hypotheses):
        raise ValueError(
            f"Expected one reference list per hypothesis; received "
            f"{len(references)} reference lists and {len(hypotheses)} hypotheses."
        )
    if not hypotheses:
        raise ValueError("Caption metrics need at least one hypothesis; received 0.")
    for index, refs in enumerate(references):
        if isinstance(refs, str) or not isinstance(refs, Sequence):
            raise TypeError(
                f"Each image's references must be a list of str; entry {index} is {refs!r}."
            )
        if not refs or not all(isinstance(r, str) for r in refs):
            raise ValueError(
                f"Hypothesis {index} needs at least one reference str; received {refs!r}."
            )
    return hypotheses, [list(refs) for refs in references]


def _ngram_counts(caption):
    words = caption.split()
    return collections.Counter(
        tuple(words[i:i + n])
        for n in range(1, _CIDER_MAX_N + 1)
        for i in range(len(words) - n + 1)
    )


def _length(counts):
    # Words, where coco-caption counts bigrams (words - 1): the difference of
    # two lengths is the same unless a caption is empty, and an empty caption
    # has a zero vector, so its similarity is 0 whatever the penalty.
    return sum(count for ngram, count in counts.items() if len(ngram) == 1)


def _clipped_cosines(hypothesis, reference):
    """CIDEr-D's similarity at each n: sum min(g_h, g_r) * g_r / (|g_h| |g_r|)."""
    similarity = np.zeros(_CIDER_MAX_N)
    for n in range(1, _CIDER_MAX_N + 1):
        hyp = {g: v for g, v in hypothesis.items() if len(g) == n}
        ref = {g: v for g, v in reference.items() if len(g) == n}
        norms = math.hypot(*hyp.values()) * math.hypot(*ref.values())
        if norms:
            overlap = sum(min(v, ref.get(g, 0.0)) * ref.get(g, 0.0) for g, v in hyp.items())
            similarity[n - 1] = overlap / norms
    return similarity


def _length_penalty(length_difference):
    return math.exp(-(length_difference ** 2) / (2 * _CIDER_SIGMA ** 2))


def _bundled_meteor_jar():
    """pycocoevalcap's meteor-1.5.jar, found without importing the package."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        jar = pathlib.Path(folder) / "meteor" / "meteor-1.5.jar"
        if jar.is_file():
            return jar
    return None


def _meteor_text(caption):
    # "|||" separates fields and a newline ends a request in the jar's protocol.
    return " ".join(caption.replace("|||", " ").split())


def _ask_meteor(process, errors, request):
    process.stdin.write(request + "\n")
    process.stdin.flush()
    return _read_meteor_line(process, errors)


def _read_meteor_line(process, errors):
    line = process.stdout.readline()
    if not line:
        errors.seek(0)
        raise RuntimeError(f"METEOR stopped without answering: {errors.read()[-2000:]}")
    return line.strip()

