"""A trained translation model with its tokenizers: translate and evaluate text."""

import re
from dataclasses import dataclass

import keras
import numpy as np

from zoo.evaluation import alignment as word_alignment
from zoo.evaluation import bleu as evaluation
from zoo.inference.search_choice import choose_search
from zoo.inference.search_choice import compile_inference
from zoo.inference.search_settings import SearchSettings
from zoo.recipes import decoding
from zoo.training.config import trained_max_length

# A batch's sources are padded to a multiple of this width, so that a
# compiled search is retraced for few distinct shapes. The exported
# `translate` signature pads the same way: the padded width sets the step
# limit (`decoding.max_decoding_steps`), so both give the same translations.
SOURCE_WIDTH_MULTIPLE = 8


@dataclass
class Hypothesis:
    """One entry of a beam's n-best list.

    Attributes:
        text: the detokenized translation.
        score: log-probability of the translation, log P(Y | X).
        penalized_score: the score the beam ranked it by (GNMT's
            `log P / lp(Y) + cp`; equal to `score` for greedy search).
        finished: whether it ended with EOS; False for a hypothesis the
            beam still held unfinished when the search stopped, which fills
            a list where fewer than K finished (`DecodeResult.beam_finished`).
    """

    text: str
    score: float
    penalized_score: float
    finished: bool = True


@dataclass
class Translation:
    """One translated sentence.

    Attributes:
        text: the detokenized translation.
        source_pieces: the source word pieces the model read.
        target_pieces: the word pieces it produced (EOS included when produced).
        alignment: float array `[len(target_pieces), len(source_pieces)]`,
            the attention of each produced piece over the source pieces.
        score: log-probability of the translation.
        n_best: the `Hypothesis` list, best first, when `translate` was
            asked for one (`n_best > 0`); else None.
        parts: how many sentences the source was translated as: more than
            1 when it was longer than the model's limit and split at
            sentence ends (the fields above then join the parts' own: texts
            joined by a space, pieces concatenated, scores summed, and the
            alignment a `zoo.evaluation.alignment.BlockAlignment` of the
            parts' own, which `np.asarray` makes dense).
        cut_parts: how many of those parts were still longer than the
            limit and cut after its last piece.
    """

    text: str
    source_pieces: list
    target_pieces: list
    alignment: np.ndarray
    score: float
    n_best: list = None
    parts: int = 1
    cut_parts: int = 0


# Where a long input is split: after ". ! ?" followed by white space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _padded(width, limit=None):
    """`width` rounded up to a multiple of `SOURCE_WIDTH_MULTIPLE`, but no
    more than `limit` (a model's positional table may hold no more)."""
    width = -(-width // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE
    return min(width, limit) if limit else width


def split_sentences(text):
    """`text` split after each ". ! ?" that white space follows."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


def _join_parts(parts):
    """One `Translation` of the translations of a source's parts, in order."""
    if len(parts) == 1:
        return parts[0]
    n_best = None
    if parts[0].n_best is not None:
        # The k-th entry joins each part's k-th best (its last, where its
        # list is shorter): each part's list is sorted, so this one is too.
        n_best = []
        for k in range(max(len(p.n_best) for p in parts)):
            entries = [p.n_best[min(k, len(p.n_best) - 1)] for p in parts]
            n_best.append(
                Hypothesis(
                    text=" ".join(h.text for h in entries if h.text),
                    score=sum(h.score for h in entries),
                    penalized_score=sum(h.penalized_score for h in entries),
                    finished=all(h.finished for h in entries),
                )
            )
    return Translation(
        text=" ".join(p.text for p in parts if p.text),
        source_pieces=[piece for p in parts for piece in p.source_pieces],
        target_pieces=[piece for p in parts for piece in p.target_pieces],
        alignment=word_alignment.BlockAlignment(p.alignment for p in parts),
        score=sum(p.score for p in parts),
        n_best=n_best,
        parts=len(parts),
        cut_parts=sum(p.cut_parts for p in parts),
    )


class Translator:
    """A translation model, its tokenizers and its run configuration.

    Args:
        model: a recipe model (the encode / decode_step contract).
        source_tokenizer, target_tokenizer: `zoo.data.TextTokenizer`s
            (WordPiece) or `zoo.data.SentencePieceTokenizer`s.
        config: the run's config dict (see `zoo.runs`).
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, config=None):
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.config = config or {}
        self._searches = {}  # `choose_search`'s cache
        self._teacher_forced_attention = None

    @property
    def max_source_length(self):
        return trained_max_length(self.config)

    def _encode_sources(self, sentences):
        """The parts each sentence is decoded as: for each sentence a list
        of `(ids, cut)`; a sentence longer than `max_source_length` is split
        at sentence ends, and a part still longer is cut (`cut` True). An
        empty sentence is read as a lone EOS, as the exported signature
        reads it."""
        sentences = list(sentences)
        limit = self.max_source_length
        units = []
        for sentence, ids in zip(sentences, self.source_tokenizer.encode(sentences)):
            if limit and len(ids) > limit:
                parts = split_sentences(sentence)
                part_ids = self.source_tokenizer.encode(parts) if len(parts) > 1 else [ids]
                units.append([(p[:limit] or [self.model.eos_id], len(p) > limit) for p in part_ids])
            else:
                units.append([(ids or [self.model.eos_id], False)])
        return units

    def _decode_batch(self, search, source_ids, n_best=0):
        """Decodes one batch with `search` (`choose_search`'s): `(tokens,
        attention, scores, n_best)`, where `n_best` holds, per row, up to
        `n_best` `(tokens, score, penalized_score, finished)` of the beam,
        best first (None when not asked)."""
        longest = max(len(s) for s in source_ids)
        width = _padded(longest)
        source = np.zeros((len(source_ids), width), "int32")
        for row, ids in enumerate(source_ids):
            source[row, : len(ids)] = ids
        result = search(source)
        eos, pad = self.model.eos_id, self.model.pad_id
        tokens = decoding.decode_to_lists(result, eos, pad, include_eos=True)
        scores = keras.ops.convert_to_numpy(result.scores)
        lists = None
        if n_best and result.beam_tokens is None:  # greedy: its one hypothesis
            finished = keras.ops.convert_to_numpy(result.finished)
            lists = [[(t, float(s), float(s), bool(f))] for t, s, f in zip(tokens, scores, finished)]
        elif n_best:
            beam_tokens = decoding.decode_to_lists(result.beam_tokens, eos, pad)
            lengths = keras.ops.convert_to_numpy(result.beam_lengths)
            beam_scores = keras.ops.convert_to_numpy(result.beam_scores)
            penalized = keras.ops.convert_to_numpy(result.beam_penalized_scores)
            finished = keras.ops.convert_to_numpy(result.beam_finished)
            lists = [
                [
                    (
                        beam_tokens[row][k],
                        float(beam_scores[row, k]),
                        float(penalized[row, k]),
                        bool(finished[row, k]),
                    )
                    for k in range(n_best)
                    if lengths[row, k] > 0  # an unused slot: the beam held fewer
                ]
                for row in range(len(source_ids))
            ]
        return tokens, keras.ops.convert_to_numpy(result.attention), scores, lists

    def translate(
        self,
        sentences,
        beam=1,
        length_penalty=0.6,
        coverage_penalty=0.0,
        batch_size=64,
        n_best=0,
        progress=None,
        stopping="early",
    ):
        """Translates a list of sentences (greedy for `beam=1`).

        Sentences are decoded in batches of similar length. A sentence longer
        than the run's `max_length` source pieces is split after ". ! ?"
        followed by a space, its parts are translated as sentences and
        joined (`Translation.parts`); a part still longer is cut after the
        limit's last piece (`Translation.cut_parts`).

        Args:
            sentences: a list of str (or one str).
            beam: beam width; 1 is greedy search.
            length_penalty, coverage_penalty: GNMT's penalties (beam search).
            batch_size: sentences decoded at once.
            n_best: when positive, each `Translation.n_best` holds the
                `n_best` best hypotheses of the beam (at most `beam`).
            progress: optional callable, called with the number of
                sentences finished as each batch ends.
            stopping: beam search's rule, "early" or "exact" (see
                `zoo.recipes.decoding.beam_search`).

        Returns:
            A list of `Translation`, in the order of `sentences`.

        Raises:
            zoo.inference.search_settings.SearchSettingsError: a search
                argument out of range (a `ValueError`).
        """
        settings = SearchSettings(beam, length_penalty, coverage_penalty, stopping, n_best)
        search = choose_search(self.model, settings, self._searches)
        if isinstance(sentences, str):
            sentences = [sentences]
        units = self._encode_sources(sentences)
        owners = [(row, k) for row, parts in enumerate(units) for k in range(len(parts))]
        remaining = [len(parts) for parts in units]
        order = np.argsort([len(units[row][k][0]) for row, k in owners], kind="stable")
        decoded = [[None] * len(parts) for parts in units]
        for start in range(0, len(order), batch_size):
            batch = [owners[i] for i in order[start : start + batch_size]]
            tokens, attention, scores, lists = self._decode_batch(
                search, [units[row][k][0] for row, k in batch], settings.n_best
            )
            finished = 0
            for i, (row, k) in enumerate(batch):
                source, cut = units[row][k]
                target = tokens[i]
                decoded[row][k] = Translation(
                    text=self.target_tokenizer.decode(target),
                    source_pieces=[self.source_tokenizer.id_to_token(t) for t in source],
                    target_pieces=[self.target_tokenizer.id_to_token(t) for t in target],
                    alignment=attention[i, : len(target), : len(source)],
                    score=float(scores[i]),
                    n_best=None
                    if lists is None
                    else [
                        Hypothesis(self.target_tokenizer.decode(t), s, p, f)
                        for t, s, p, f in lists[i]
                    ],
                    cut_parts=int(cut),
                )
                remaining[row] -= 1
                finished += remaining[row] == 0
            if progress is not None:
                progress(finished)
        return [_join_parts(parts) for parts in decoded]

    def evaluate(
        self,
        pairs,
        beam=1,
        length_penalty=0.6,
        batch_size=64,
        progress=None,
        stopping="early",
        coverage_penalty=0.0,
    ):
        """BLEU of the translations of `pairs` ((source, reference) tuples).

        The detokenized translations are scored against the references as
        given, by sacreBLEU: cased BLEU (the score WMT reports, signature
        `case:mixed`), and lowercased BLEU beside it (`case:lc`). A run whose
        tokenizer lowercases (WordPiece) can only produce lowercase text, so
        its cased BLEU is low on cased references; its lowercased BLEU is the
        one to compare with lowercased results.
        `progress`, `stopping` and `coverage_penalty` are `translate`'s.

        Returns a dict with `bleu` (cased) and `bleu_lowercased` (each a
        `zoo.evaluation.bleu.BleuResult`), `by_length` (cased BLEU per
        source-length bucket) and `hypotheses`.
        """
        sources = [source for source, _ in pairs]
        references = [target for _, target in pairs]
        hypotheses = [
            t.text
            for t in self.translate(
                sources,
                beam=beam,
                length_penalty=length_penalty,
                coverage_penalty=coverage_penalty,
                batch_size=batch_size,
                progress=progress,
                stopping=stopping,
            )
        ]
        return {
            "bleu": evaluation.corpus_bleu(hypotheses, references),
            "bleu_lowercased": evaluation.corpus_bleu(hypotheses, references, lowercase=True),
            "by_length": evaluation.bleu_by_length(sources, hypotheses, references),
            "hypotheses": hypotheses,
        }

    def _pieces_by_word(self, tokenizer, sentences, limit):
        """`(ids, word of each piece)` of each sentence, encoded word by word
        (its space-separated words) and cut after `limit` pieces, so that
        each piece's word is known whatever the tokenizer splits."""
        words = [sentence.split() for sentence in sentences]
        flat = tokenizer.encode([word for sentence in words for word in sentence])
        encoded, start = [], 0
        for sentence in words:
            ids, owners = [], []
            for k, word_ids in enumerate(flat[start : start + len(sentence)]):
                ids += word_ids
                owners += [k] * len(word_ids)
            start += len(sentence)
            encoded.append((ids[:limit], owners[:limit]))
        return encoded

    def attention_alignments(self, pairs, batch_size=64):
        """The word alignment of each `(source, target)` pair by the model's
        attention, with the target fed in (teacher forcing).

        Each target word is linked to the source word of its pieces'
        attention peak (`zoo.evaluation.alignment.peak_links`); words are
        the space-separated words of each side, the units gold alignments
        in Pharaoh format count. Pieces after the run's `max_length` (on
        either side) are not read, so they link nothing. The attention is
        the model's `attention_weights`: for the Transformer the last
        decoder layer's cross-attention averaged over its heads.

        Args:
            pairs: a list of `(source, target)` str pairs (more items, such
                as a gold alignment, are ignored).
            batch_size: pairs run at once.

        Returns:
            A list of sorted `(source_word, target_word)` link lists.
        """
        limits = [self.max_source_length, getattr(self.model, "max_source_length", None)]
        source_limit = min([limit for limit in limits if limit] or [None])
        limits = [self.max_source_length, getattr(self.model, "max_target_length", None)]
        target_limit = min([limit for limit in limits if limit] or [None])
        sources = self._pieces_by_word(
            self.source_tokenizer, [pair[0] for pair in pairs], source_limit
        )
        targets = self._pieces_by_word(
            self.target_tokenizer, [pair[1] for pair in pairs], target_limit
        )
        if self._teacher_forced_attention is None:
            model = self.model
            self._teacher_forced_attention = compile_inference(
                lambda source, target_in: model.attention_weights(
                    {"source": source, "target_in": target_in}
                )
            )
        # Batches of similar length pad little; the widths are rounded up so
        # that the compiled function is traced for few shapes.
        order = np.argsort([len(ids) for ids, _ in targets], kind="stable")
        alignments = [None] * len(pairs)
        for start in range(0, len(pairs), batch_size):
            rows = order[start : start + batch_size]
            batch = [(sources[i], targets[i]) for i in rows]
            width = _padded(max([1] + [len(ids) for (ids, _), _ in batch]), source_limit)
            length = _padded(max([1] + [len(ids) for _, (ids, _) in batch]), target_limit)
            source = np.full((len(batch), width), self.model.pad_id, "int32")
            target_in = np.full((len(batch), length), self.model.pad_id, "int32")
            for row, ((source_ids, _), (target_ids, _)) in enumerate(batch):
                # An empty source is read as a lone EOS, as `translate` reads it.
                source[row, : max(1, len(source_ids))] = source_ids or [self.model.eos_id]
                target_in[row, 0] = self.model.bos_id
                target_in[row, 1 : len(target_ids)] = target_ids[:-1]
            attention = keras.ops.convert_to_numpy(
                self._teacher_forced_attention(source, target_in)
            )
            for k, ((_, source_words), (_, target_words)) in enumerate(batch):
                alignments[rows[k]] = word_alignment.peak_links(
                    attention[k, : len(target_words), : len(source_words)],
                    source_words,
                    target_words,
                )
        return alignments

    def alignment_scores(self, pairs, golds, batch_size=64):
        """The alignment error rate (Och and Ney 2003), precision and recall
        of `attention_alignments(pairs)` against `golds` (one
        `zoo.evaluation.alignment.GoldAlignment` per pair): an
        `AlignmentScores`."""
        alignments = self.attention_alignments(pairs, batch_size=batch_size)
        return word_alignment.alignment_error_rate(alignments, golds)
