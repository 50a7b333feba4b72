"""`Translator`: sentences in, translations out, through CTranslate2."""

import math
from pathlib import Path
from typing import List
from typing import NamedTuple

from .layout import BOS_TOKEN
from .layout import EOS_TOKEN
from .layout import PAD_TOKEN
from .layout import SOURCE_WIDTH_MULTIPLE
from .layout import ExportFolderError
from .layout import RunnerError
from .layout import read_manifest

# The Python API's step limit (`zoo.recipes.decoding.max_decoding_steps`
# with its defaults): ceil(ratio * padded source width) + offset steps.
MAX_LENGTH_RATIO = 1.5
MAX_LENGTH_OFFSET = 10
# Sentences translated at once unless asked otherwise, as the Python API's.
DEFAULT_BATCH_SIZE = 64
# One thread per translation unless asked otherwise: CTranslate2's default
# (a thread per core, up to 4) ran int8 several times slower on the 2-core
# machines measured (docs/performance.md, "`zoo serve` under load").
DEFAULT_THREADS = {"inter_threads": 1, "intra_threads": 1}


class Translation(NamedTuple):
    """One sentence's translation: its text, the target pieces (EOS
    included when produced) and its score: the summed log-probabilities,
    divided by length ** length_penalty in beam search (CTranslate2's)."""

    text: str
    target_pieces: List[str]
    score: float


def load(folder):
    """The `Translator` of an export folder."""
    return Translator(folder)


class Translator:
    """A CTranslate2 export folder, ready to translate.

    Args:
        folder: the export folder (`zoo export RUN_DIR --format ctranslate2`).
        **options: `ctranslate2.Translator` options (`device`,
            `inter_threads`, `intra_threads`, `compute_type`, ...); the
            threads default to `DEFAULT_THREADS`.
    """

    def __init__(self, folder, **options):
        import ctranslate2
        import sentencepiece

        folder = Path(folder)
        self.manifest = read_manifest(folder)
        try:
            self._translator = ctranslate2.Translator(
                str(folder), **{**DEFAULT_THREADS, **options}
            )
        except (RuntimeError, ValueError) as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ExportFolderError(
                f"cannot load the model in {str(folder)!r}: {message}"
            ) from None
        vocabularies = self.manifest["vocabularies"]
        self._source = sentencepiece.SentencePieceProcessor(
            model_file=str(folder / vocabularies["source"])
        )
        self._target = sentencepiece.SentencePieceProcessor(
            model_file=str(folder / vocabularies["target"])
        )

    @property
    def search(self):
        """The export's search defaults: `beam` and `length_penalty`."""
        return self.manifest["search"]

    def translate(self, sentences, beam=None, length_penalty=None, batch_size=DEFAULT_BATCH_SIZE):
        """Translates a list of sentences (greedy for `beam=1`).

        As the Python API does, sentences are decoded in batches of similar
        length and a source longer than the run's `max_length` pieces is
        cut. An empty sentence gives an empty translation (CTranslate2
        decodes nothing for an empty source, where `zoo translate` reads a
        lone EOS).

        Args:
            sentences: a list of str (or one str).
            beam: beam width (default: the manifest's).
            length_penalty: CTranslate2's length penalty alpha (default: the
                manifest's); unlike GNMT's, it divides by length ** alpha.
            batch_size: sentences decoded at once.

        Returns:
            A list of `Translation`, in the order of `sentences`.
        """
        beam = self.search["beam"] if beam is None else beam
        length_penalty = self.search["length_penalty"] if length_penalty is None else length_penalty
        _check_search(beam, length_penalty, batch_size)
        if isinstance(sentences, str):
            sentences = [sentences]
        sources = [self._source_pieces(ids) for ids in self._source.encode(list(sentences))]
        order = sorted(range(len(sources)), key=lambda row: len(sources[row]))
        translations = [None] * len(sources)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            batch = [sources[row] for row in rows]
            results = self._translator.translate_batch(
                batch,
                beam_size=beam,
                # Greedy search scores without a penalty, as `zoo translate`'s.
                length_penalty=length_penalty if beam > 1 else 0.0,
                max_decoding_length=self.step_limit(max(len(s) for s in batch)),
                min_decoding_length=0,
                max_input_length=0,
                return_end_token=True,
                return_scores=True,
            )
            for row, result in zip(rows, results):
                pieces = result.hypotheses[0]
                translations[row] = Translation(self._text(pieces), pieces, result.scores[0])
        return translations

    def _text(self, pieces):
        """The text of a translation's pieces, as `zoo.data`'s tokenizers
        read it: up to the first EOS, without PAD and BOS."""
        if EOS_TOKEN in pieces:
            pieces = pieces[: pieces.index(EOS_TOKEN)]
        return self._target.decode_pieces([p for p in pieces if p not in (PAD_TOKEN, BOS_TOKEN)])

    def _source_pieces(self, ids):
        """A source's pieces, cut to the run's `max_length`."""
        limit = self.manifest["training_max_length"]
        return self._source.id_to_piece(ids[:limit] if limit else ids)

    def step_limit(self, longest):
        """The most target steps for a batch whose longest source has
        `longest` pieces: the Python API's limit for the same batch."""
        width = -(-longest // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE
        steps = math.ceil(MAX_LENGTH_RATIO * width) + MAX_LENGTH_OFFSET
        return min(steps, self.manifest["max_target_length"])


def _check_search(beam, length_penalty, batch_size):
    for name, value in (("beam", beam), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RunnerError(f"{name} must be an int >= 1; received {value!r}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise RunnerError(f"length_penalty must be a number >= 0; received {length_penalty!r}")
    if not length_penalty >= 0:
        raise RunnerError(f"length_penalty must be a number >= 0; received {length_penalty!r}")
