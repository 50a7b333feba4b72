"""A trained translation model with its tokenizers: translate and evaluate text."""

from dataclasses import dataclass

import keras
import numpy as np

from zoo.evaluation import bleu as evaluation
from zoo.inference.search_cache import SearchCache
from zoo.recipes import decoding

# A batch's sources are padded to a multiple of this width, so that a
# compiled search is retraced for few distinct shapes. The exported
# `translate` signature pads the same way: the padded width sets the step
# limit (`decoding.max_decoding_steps`), so both give the same translations.
SOURCE_WIDTH_MULTIPLE = 8


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
    """

    text: str
    source_pieces: list
    target_pieces: list
    alignment: np.ndarray
    score: float


class Translator(SearchCache):
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
        self._searches = {}

    @property
    def max_source_length(self):
        return self.config.get("training", {}).get("max_length")

    def _search(self, beam, length_penalty, coverage_penalty):
        return self.cached_search(beam, length_penalty, coverage_penalty)

    def _encode_sources(self, sentences):
        ids = self.source_tokenizer.encode(list(sentences))
        limit = self.max_source_length
        if limit:
            ids = [sentence[:limit] for sentence in ids]
        return [sentence or [self.model.eos_id] for sentence in ids]

    def _decode_batch(self, source_ids, beam, length_penalty, coverage_penalty):
        longest = max(len(s) for s in source_ids)
        width = -(-longest // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE
        source = np.zeros((len(source_ids), width), "int32")
        for row, ids in enumerate(source_ids):
            source[row, : len(ids)] = ids
        result = self._search(beam, length_penalty, coverage_penalty)(source)
        return (
            decoding.decode_to_lists(result, self.model.eos_id, self.model.pad_id, include_eos=True),
            keras.ops.convert_to_numpy(result.attention),
            keras.ops.convert_to_numpy(result.scores),
        )

    def translate(
        self, sentences, beam=1, length_penalty=0.6, coverage_penalty=0.0, batch_size=64
    ):
        """Translates a list of sentences (greedy for `beam=1`).

        Sentences are decoded in batches of similar length. Returns a list of
        `Translation`, in the order of `sentences`.
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        source_ids = self._encode_sources(sentences)
        order = np.argsort([len(s) for s in source_ids], kind="stable")
        translations = [None] * len(source_ids)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            tokens, attention, scores = self._decode_batch(
                [source_ids[i] for i in rows], beam, length_penalty, coverage_penalty
            )
            for k, row in enumerate(rows):
                source = source_ids[row]
                target = tokens[k]
                translations[row] = Translation(
                    text=self.target_tokenizer.decode(target),
                    source_pieces=[self.source_tokenizer.id_to_token(i) for i in source],
                    target_pieces=[self.target_tokenizer.id_to_token(i) for i in target],
                    alignment=attention[k, : len(target), : len(source)],
                    score=float(scores[k]),
                )
        return translations

    def evaluate(self, pairs, beam=1, length_penalty=0.6, batch_size=64):
        """BLEU of the translations of `pairs` ((source, reference) tuples).

        The detokenized translations are scored against the references as
        given, by sacreBLEU: cased BLEU (the score WMT reports, signature
        `case:mixed`), and lowercased BLEU beside it (`case:lc`). A run whose
        tokenizer lowercases (WordPiece) can only produce lowercase text, so
        its cased BLEU is low on cased references; its lowercased BLEU is the
        one to compare with lowercased results.

        Returns a dict with `bleu` (cased) and `bleu_lowercased` (each a
        `zoo.evaluation.bleu.BleuResult`), `by_length` (cased BLEU per
        source-length bucket) and `hypotheses`.
        """
        sources = [source for source, _ in pairs]
        references = [target for _, target in pairs]
        hypotheses = [
            t.text
            for t in self.translate(
                sources, beam=beam, length_penalty=length_penalty, batch_size=batch_size
            )
        ]
        return {
            "bleu": evaluation.corpus_bleu(hypotheses, references),
            "bleu_lowercased": evaluation.corpus_bleu(hypotheses, references, lowercase=True),
            "by_length": evaluation.bleu_by_length(sources, hypotheses, references),
            "hypotheses": hypotheses,
        }
