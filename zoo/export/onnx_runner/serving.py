"""`Translator` and `Captioner` over an `OnnxModel`, and `load`, which
gives the one an export folder holds."""

import re
from pathlib import Path

import numpy as np

from .alignment import BlockAlignment
from .beam import beam_search
from .images import load_image
from .layout import CAPTIONING
from .layout import DEFAULT_LIMITS
from .layout import SOURCE_WIDTH_MULTIPLE
from .layout import InputError
from .layout import RequestTooLarge
from .layout import RunnerError
from .results import Caption
from .results import Hypothesis
from .results import Translation
from .search import decode_to_lists
from .search import greedy_search
from .search_settings import check_search
from .search_settings import DEFAULT_SEARCH
from .session import OnnxModel
from .tokenizers import load_tokenizers


# `zoo.inference.translator.Translator` and `zoo.inference.captioner.Captioner`
# over an `OnnxModel`: the same batching, padding, splitting and step limits,
# so that the same sentences give the same tokens.

# Where an over-long input is split: after ". ! ?" followed by white space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text):
    """`text` split after each ". ! ?" that white space follows."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


def _padded(width):
    return -(-width // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE


def _join_parts(parts):
    """One `Translation` of the translations of a source's parts, in order
    (`zoo.inference.translator._join_parts`)."""
    if len(parts) == 1:
        return parts[0]
    n_best = None
    if parts[0].n_best is not None:
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
        alignment=BlockAlignment(p.alignment for p in parts),
        score=sum(p.score for p in parts),
        n_best=n_best,
        parts=len(parts),
        cut_parts=sum(p.cut_parts for p in parts),
    )


class _Server:
    """What the translator and the captioner share: the model, the
    manifest's limits and search settings, and the search itself."""

    def __init__(self, model, manifest):
        self.model = model
        self.manifest = manifest
        self.limits = {**DEFAULT_LIMITS, **(manifest.get("limits") or {})}
        self.search_settings = {**DEFAULT_SEARCH, **(manifest.get("search") or {})}

    def settings(self, beam, length_penalty, coverage_penalty, stopping, n_best):
        """The search settings of a request: each one given, else the
        manifest's; checked, with one-line errors."""
        given = {
            "beam": beam,
            "length_penalty": length_penalty,
            "coverage_penalty": coverage_penalty,
            "stopping": stopping,
        }
        settings = check_search(
            {k: self.search_settings[k] if v is None else v for k, v in given.items()}
        )
        beam = settings["beam"]
        if n_best > beam:
            raise RunnerError(f"n_best {n_best} needs a beam of {n_best} or more (beam is {beam})")
        return settings

    def check_request(self, count, what):
        limit = self.limits["max_batch"]
        if count > limit:
            raise RequestTooLarge(
                f"the request has {count} {what}, more than this export's max_batch={limit}; "
                "send at most that many a request"
            )

    def search(self, source, settings, max_length=None):
        if settings["beam"] == 1:
            return greedy_search(self.model, source, max_length=max_length)
        return beam_search(
            self.model,
            source,
            beam_width=settings["beam"],
            length_penalty=settings["length_penalty"],
            coverage_penalty=settings["coverage_penalty"],
            max_length=max_length,
            stopping=settings["stopping"],
        )

    def n_best_lists(self, result, rows, n_best, tokens, scores):
        """Per row, up to `n_best` `(tokens, score, penalized_score,
        finished)`."""
        if not n_best:
            return None
        eos, pad = self.model.eos_id, self.model.pad_id
        if result.beam_tokens is None:  # greedy: its one hypothesis
            return [
                [(t, float(s), float(s), bool(f))] for t, s, f in zip(tokens, scores, result.finished)
            ]
        beam_tokens = decode_to_lists(result.beam_tokens, eos, pad)
        return [
            [
                (
                    beam_tokens[row][k],
                    float(result.beam_scores[row, k]),
                    float(result.beam_penalized_scores[row, k]),
                    bool(result.beam_finished[row, k]),
                )
                for k in range(n_best)
                if result.beam_lengths[row, k] > 0  # an unused slot: the beam held fewer
            ]
            for row in range(rows)
        ]


class Translator(_Server):
    """An export folder's translation model and tokenizers (see `load`).

    Args:
        model: an `OnnxModel`.
        source_tokenizer, target_tokenizer: see `load_tokenizer`.
        manifest: the folder's manifest dict.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, manifest):
        super().__init__(model, manifest)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    @property
    def max_source_length(self):
        """The most source pieces a sentence is read as (the training cut)."""
        return self.manifest.get("training_max_length")

    def _encode_sources(self, sentences):
        """For each sentence, the `(ids, cut)` of its parts (as the Python
        API's `Translator._encode_sources`)."""
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

    def translate(
        self,
        sentences,
        beam=None,
        length_penalty=None,
        coverage_penalty=None,
        n_best=0,
        stopping=None,
        batch_size=64,
        progress=None,
    ):
        """Translates a list of sentences: one request, at most the
        manifest's `max_batch` sentences.

        Sentences are decoded in batches of similar length. A sentence
        longer than the manifest's `training_max_length` pieces is split
        after ". ! ?" and white space, its parts translated and joined
        (`Translation.parts`); a part still longer is cut
        (`Translation.cut_parts`).

        Args:
            sentences: a list of str (or one str).
            beam, length_penalty, coverage_penalty, stopping: the search;
                None takes the manifest's (`zoo export`'s options).
            n_best: when positive, each `Translation.n_best` holds the
                `n_best` best hypotheses (at most `beam`).
            batch_size: sentences decoded at once.
            progress: optional callable, called with the number of
                sentences finished as each batch ends.

        Returns:
            A list of `Translation`, in the order of `sentences`.

        Raises:
            RequestTooLarge: more than `max_batch` sentences.
            RunnerError: a bad search setting.
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = list(sentences)
        self.check_request(len(sentences), "sentences")
        settings = self.settings(beam, length_penalty, coverage_penalty, stopping, n_best)
        units = self._encode_sources(sentences)
        owners = [(row, k) for row, parts in enumerate(units) for k in range(len(parts))]
        remaining = [len(parts) for parts in units]
        order = np.argsort([len(units[row][k][0]) for row, k in owners], kind="stable")
        decoded = [[None] * len(parts) for parts in units]
        for start in range(0, len(order), batch_size):
            batch = [owners[i] for i in order[start : start + batch_size]]
            translations = self._decode_batch([units[row][k] for row, k in batch], settings, n_best)
            finished = 0
            for (row, k), translation in zip(batch, translations):
                decoded[row][k] = translation
                remaining[row] -= 1
                finished += remaining[row] == 0
            if progress is not None:
                progress(finished)
        return [_join_parts(parts) for parts in decoded]

    def _decode_batch(self, units, settings, n_best):
        width = _padded(max(len(ids) for ids, _ in units))
        source = np.zeros((len(units), width), "int32")
        for row, (ids, _) in enumerate(units):
            source[row, : len(ids)] = ids
        result = self.search(source, settings)
        tokens = decode_to_lists(result.tokens, self.model.eos_id, self.model.pad_id, include_eos=True)
        lists = self.n_best_lists(result, len(units), n_best, tokens, result.scores)
        decode, pieces = self.target_tokenizer.decode, self.target_tokenizer.ids_to_tokens
        translations = []
        for i, (source_ids, cut) in enumerate(units):
            target = tokens[i]
            translations.append(
                Translation(
                    text=decode(target),
                    source_pieces=self.source_tokenizer.ids_to_tokens(source_ids),
                    target_pieces=pieces(target),
                    alignment=np.asarray(result.attention[i, : len(target), : len(source_ids)]),
                    score=float(result.scores[i]),
                    n_best=None
                    if lists is None
                    else [Hypothesis(decode(t), s, p, f) for t, s, p, f in lists[i]],
                    cut_parts=int(cut),
                )
            )
        return translations


class Captioner(_Server):
    """An export folder's captioning model and caption tokenizer (see `load`)."""

    def __init__(self, model, tokenizer, manifest):
        super().__init__(model, manifest)
        self.tokenizer = tokenizer

    @property
    def image_size(self):
        return self.model.image_size

    def caption(
        self,
        images,
        beam=None,
        length_penalty=None,
        coverage_penalty=None,
        n_best=0,
        stopping=None,
        batch_size=64,
        progress=None,
    ):
        """Captions images: uint8 (0-255) or float (0-1) `[N, S, S, 3]`, or
        a list of image file paths (read by `load_image`); one request, at
        most the manifest's `max_batch` images. The search arguments are
        `Translator.translate`'s. Returns a list of `Caption`."""
        count = len(images)
        self.check_request(count, "images")
        settings = self.settings(beam, length_penalty, coverage_penalty, stopping, n_best)
        if not isinstance(images, np.ndarray) and all(isinstance(i, (str, Path)) for i in images):
            images = np.stack([load_image(path, self.image_size, self.limits) for path in images])
        images = self._as_batch(images)
        grid = tuple(self.model.grid_shape)
        max_length = self.manifest.get("training_max_length")
        captions = []
        for start in range(0, count, batch_size):
            batch = images[start : start + batch_size]
            result = self.search(batch, settings, max_length=max_length)
            eos, pad = self.model.eos_id, self.model.pad_id
            tokens = decode_to_lists(result.tokens, eos, pad, include_eos=True)
            lists = self.n_best_lists(result, len(batch), n_best, tokens, result.scores)
            for k, ids in enumerate(tokens):
                steps = len(ids)
                captions.append(
                    Caption(
                        text=self.tokenizer.decode(ids),
                        words=self.tokenizer.ids_to_tokens(ids),
                        attention=np.asarray(result.attention[k, :steps]).reshape((steps,) + grid),
                        score=float(result.scores[k]),
                        n_best=None
                        if lists is None
                        else [
                            Hypothesis(self.tokenizer.decode(t), s, p, f)
                            for t, s, p, f in lists[k]
                        ],
                    )
                )
            if progress is not None:
                progress(len(batch))
        return captions

    def _as_batch(self, images):
        """Images as float32 `[N, S, S, 3]` in [0, 1] (uint8 scaled by 1/255),
        or a one-line error naming the shape expected."""
        images = np.asarray(images)
        expected = (self.image_size, self.image_size, 3)
        if images.ndim != 4 or images.shape[1:] != expected:
            raise InputError(
                f"images must have shape [N, {self.image_size}, {self.image_size}, 3] "
                f"(or be image file paths); received {images.shape}"
            )
        if images.dtype == np.uint8:
            return images.astype("float32") / 255.0
        return images.astype("float32")


def load(folder, providers=None, session_options=None):
    """An export folder as a `Translator` or a `Captioner`.

    Args:
        folder: an export folder.
        providers, session_options: see `OnnxModel`.

    Returns:
        A `Translator` for a translation export, a `Captioner` for a
        captioning one.
    """
    model = OnnxModel(folder, providers, session_options)
    manifest = model.manifest
    tokenizers = load_tokenizers(model.folder, manifest["vocabularies"])
    if manifest["task"] == CAPTIONING:
        return Captioner(model, tokenizers["target"], manifest)
    return Translator(model, tokenizers["source"], tokenizers["target"], manifest)
