"""Translation metrics: corpus BLEU with sacrebleu, and BLEU by source length.

Pure Python (sacrebleu and the standard library): no tensorflow, jax or torch,
so it runs with every Keras backend and on decoded text from anywhere.

BLEU is computed by sacrebleu on *detokenized* text, with its own
tokenization (13a by default), so the scores are comparable across papers and
each result carries sacrebleu's signature (Post, 2018, "A Call for Clarity in
Reporting BLEU Scores").

Example:

>>> result = corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"])
>>> round(result.score, 2)
100.0
>>> rows = bleu_by_length(sources, hypotheses, references)   # doctest: +SKIP
>>> table = format_bleu_table({"RNNsearch": rows, "RNNencdec": baseline_rows})
>>> print(table)   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence

from sacrebleu.metrics import BLEU


@dataclasses.dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score and the sacrebleu signature needed to report it.

    Attributes:
        score: float, BLEU in [0, 100].
        signature: str, sacrebleu's signature, e.g.
            `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`.
        details: the `sacrebleu.metrics.bleu.BLEUScore` itself (n-gram
            precisions, brevity penalty, lengths).

    `str(result)` is the line sacrebleu's command line prints, e.g.
    `BLEU|nrefs:1|...|version:2.6.0 = 53.73 83.3/60.0/50.0/33.3 (BP = 1.000 ...)`.
    """

    score: float
    signature: str
    details: object = dataclasses.field(repr=False, compare=False)

    def __str__(self):
        return self.details.format(signature=self.signature)


@dataclasses.dataclass(frozen=True)
class LengthBucket:
    """BLEU of the sentences whose source length falls in one bucket.

    Attributes:
        label: str, e.g. `"1-10"`, `"11-20"`, or `">60"` for the open bucket.
        low: int, the bucket's first source length (inclusive); the first
            bucket also holds empty (0-word) sources.
        high: int or None, the longest (inclusive); None for the open bucket.
        count: int, number of sentences in the bucket.
        bleu: float or None, corpus BLEU of those sentences; None when the
            bucket is empty (0.0 is a real score, None means "no sentences").
    """

    label: str
    low: int
    high: int | None
    count: int
    bleu: float | None


def corpus_bleu(hypotheses, references, **bleu_options):
    """Corpus BLEU of detokenized hypotheses against detokenized references.

    Args:
        hypotheses: sequence of str, one decoded sentence per segment.
        references: either a sequence of str (one reference per hypothesis)
            or a sequence of sequences of str (several references per
            hypothesis, as in image captioning; the number may vary from
            one hypothesis to the next, sacrebleu's signature then says
            `nrefs:var`).
        **bleu_options: passed to `sacrebleu.metrics.BLEU` (`tokenize`,
            `lowercase`, `smooth_method`, ...).

    Returns:
        A `BleuResult` with `score`, `signature` and sacrebleu's `details`.

    Raises:
        TypeError: a plain string was passed instead of a list of strings, or
            the references mix strings and lists.
        ValueError: the corpus is empty, the hypothesis and reference counts
            differ, or a hypothesis has no reference.
    """
    hypotheses = _check_hypotheses(hypotheses)
    streams = _reference_streams(references, len(hypotheses))
    if not hypotheses:
        raise ValueError("corpus_bleu needs at least one hypothesis; received 0.")
    bleu = BLEU(**bleu_options)
    details = bleu.corpus_score(hypotheses, streams)
    return BleuResult(
        score=float(details.score),
        signature=str(bleu.get_signature()),
        details=details,
    )


def bleu_by_length(
    sources, hypotheses, references, bucket_width=10, max_length=60, **bleu_options
):
    """BLEU per source-length bucket, as in Figure 2 of Bahdanau et al. (2014).

    A source's length is its number of words: whitespace-separated tokens for
    a str, `len()` for an already tokenized sequence (pass tokens to count
    the way your tokenizer does). Buckets are closed on the right:
    `1-10` holds sources of 1 to 10 words, `11-20` of 11 to 20, ..., up to
    `max_length`; a source of exactly 10 words is in `1-10`, one of 11 in
    `11-20`. An empty source (0 words) counts in the first bucket. Sources
    longer than `max_length` go in a final open bucket labelled
    `">{max_length}"`, which is always reported, like every other bucket.

    Args:
        sources: sequence of source sentences (str, or token sequences).
        hypotheses: sequence of str, detokenized translations.
        references: as in `corpus_bleu` (one str, or a list of str, per
            hypothesis).
        bucket_width: int > 0, the number of lengths per bucket.
        max_length: int, a multiple of `bucket_width`; the last closed
            bucket ends there.
        **bleu_options: passed to `sacrebleu.metrics.BLEU`.

    Returns:
        A list of `LengthBucket`, shortest bucket first: `max_length //
        bucket_width` closed buckets then the open one. Empty buckets have
        `count=0` and `bleu=None`.
    """
    if not isinstance(bucket_width, int) or bucket_width <= 0:
        raise ValueError(
            f"bucket_width must be a positive int; received {bucket_width!r}."
        )
    if (
        not isinstance(max_length, int)
        or max_length < bucket_width
        or max_length % bucket_width
    ):
        raise ValueError(
            "max_length must be a positive multiple of bucket_width "
            f"({bucket_width}); received {max_length!r}."
        )
    hypotheses = _check_hypotheses(hypotheses)
    if isinstance(sources, str):
        raise TypeError("sources must be a sequence of sentences, not one str.")
    sources = list(sources)
    if len(sources) != len(hypotheses):
        raise ValueError(
            f"Expected one source per hypothesis; received {len(sources)} "
            f"sources and {len(hypotheses)} hypotheses."
        )
    # Validated once here, on the whole corpus, so a bad reference is
    # reported even when its bucket would otherwise be skipped.
    streams = _reference_streams(references, len(hypotheses))

    n_closed = max_length // bucket_width
    members = [[] for _ in range(n_closed + 1)]
    for index, source in enumerate(sources):
        members[_bucket_index(_source_length(source), bucket_width, n_closed)].append(
            index
        )

    rows = []
    for bucket, indices in enumerate(members):
        if bucket < n_closed:
            low, high = bucket * bucket_width + 1, (bucket + 1) * bucket_width
            label = f"{low}-{high}"
        else:
            low, high = max_length + 1, None
            label = f">{max_length}"
        score = None
        if indices:
            bucket_streams = [[stream[i] for i in indices] for stream in streams]
            bleu = BLEU(**bleu_options)
            score = float(
                bleu.corpus_score(
                    [hypotheses[i] for i in indices], bucket_streams
                ).score
            )
        rows.append(LengthBucket(label, low, high, len(indices), score))
    return rows


def format_bleu_table(columns, precision=2):
    """A Markdown table of `bleu_by_length` results, models side by side.

    Args:
        columns: dict {model name: list of `LengthBucket`}, every model
            scored on the same test set with the same buckets (the table has
            one sentence-count column, so counts must agree).
        precision: int, decimals of the BLEU cells.

    Returns:
        str, a Markdown table: one row per bucket, a `Sentences` column, then
        one BLEU column per model in the dict's order; empty buckets show
        `-`.

    Example:

    | Source words | Sentences | RNNsearch | RNNencdec |
    |:--|--:|--:|--:|
    | 1-10 | 12 | 31.20 | 25.04 |
    | 11-20 | 0 | - | - |
    """
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError(
            "columns must be a non-empty dict {model name: bleu_by_length rows}; "
            f"received {columns!r}."
        )
    names = list(columns)
    reference_name = names[0]
    reference_rows = list(columns[reference_name])
    layout = [(row.label, row.count) for row in reference_rows]
    for name in names[1:]:
        other = [(row.label, row.count) for row in columns[name]]
        if other != layout:
            raise ValueError(
                f"Models {reference_name!r} and {name!r} have different buckets or "
                f"sentence counts ({layout} vs {other}); score every model on the "
                "same sources with the same bucket_width and max_length."
            )

    header = ["Source words", "Sentences"] + [_escape_cell(str(n)) for n in names]
    lines = [
        _table_line(header),
        _table_line([":--"] + ["--:"] * (len(header) - 1)),
    ]
    for position, (label, count) in enumerate(layout):
        cells = [label, str(count)]
        for name in names:
            bleu = columns[name][position].bleu
            cells.append("-" if bleu is None else f"{bleu:.{precision}f}")
        lines.append(_table_line(cells))
    return "\n".join(lines) + "\n"


def _check_hypotheses(hypotheses):
    if isinstance(hypotheses, str):
        raise TypeError(
            "hypotheses must be a sequence of str (one per segment), not one str."
        )
    hypotheses = list(hypotheses)
    for index, hypothesis in enumerate(hypotheses):
        if not isinstance(hypothesis, str):
            raise TypeError(
                f"Each hypothesis must be a detokenized str; hypothesis {index} "
                f"is {type(hypothesis).__name__}: {hypothesis!r}."
            )
    return hypotheses


def _reference_streams(references, n_hypotheses):
    """Transposes per-hypothesis references into sacrebleu's reference streams.

    sacrebleu wants `streams[k][i]` = k-th reference of segment i; a segment
    with fewer references than the others is padded with None, which
    sacrebleu skips.
    """
    if isinstance(references, str):
        raise TypeError(
            "references must be a sequence (one per hypothesis), not one str."
        )
    references = list(references)
    if len(references) != n_hypotheses:
        raise ValueError(
            f"Expected one reference entry per hypothesis; received "
            f"{len(references)} references and {n_hypotheses} hypotheses."
        )
    if all(isinstance(r, str) for r in references):
        return [references]
    per_segment = []
    for index, refs in enumerate(references):
        if isinstance(refs, str) or not isinstance(refs, Sequence):
            raise TypeError(
                "references must be all str (one reference per hypothesis) or all "
                f"lists of str (several); entry {index} is {refs!r}."
            )
        refs = list(refs)
        if not refs or not all(isinstance(r, str) for r in refs):
            raise ValueError(
                f"Hypothesis {index} needs at least one reference str; "
                f"received {refs!r}."
            )
        per_segment.append(refs)
    n_streams = max(len(refs) for refs in per_segment)
    return [
        [refs[k] if k < len(refs) else None for refs in per_segment]
        for k in range(n_streams)
    ]


def _source_length(source):
    if isinstance(source, str):
        return len(source.split())
    return len(source)


def _bucket_index(length, bucket_width, n_closed):
    if length <= 0:
        return 0
    return min((length - 1) // bucket_width, n_closed)


def _escape_cell(text):
    return text.replace("|", "\\|")


def _table_line(cells):
    return "| " + " | ".join(cells) + " |"
