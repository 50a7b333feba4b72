"""The models `zoo serve` decodes with, behind one interface, and
`open_engine`, which opens the one a path holds.

An engine is a class with:

- `kind` and `markers`: what the path is called in messages, and the files
  that tell it apart (`matches`);
- `translate(sentences, beam, n_best, alignments, length_penalty)`: one
  result dict per sentence (`result`);
- `info()`: what `GET /info` reports of the model;
- `default_beam`: the beam of a request that names none.

Adding one (a CTranslate2 folder, say) is one subclass of `Engine` and its
entry in `ENGINES`.
"""

from pathlib import Path

from zoo import runs
from zoo.errors import ZooUserError


class EngineError(ZooUserError):
    """A path that no engine serves, or a model that `zoo serve` cannot serve."""


def result(translation, n_best, alignment):
    """One sentence's answer: `text` and `score` (log P(Y|X)), with
    `n_best` (a list of hypotheses) when asked for and `alignment` (Pharaoh
    `i-j` word links) when not None."""
    answer = {"text": translation.text, "score": translation.score}
    if n_best:
        answer["n_best"] = [
            {
                "text": hypothesis.text,
                "score": hypothesis.score,
                "penalized_score": hypothesis.penalized_score,
                "finished": hypothesis.finished,
            }
            for hypothesis in translation.n_best
        ]
    if alignment is not None:
        answer["alignment"] = alignment
    return answer


class Engine:
    """A translation model that the server decodes with (see the module)."""

    kind = "a model"
    markers = ()
    name = None

    @classmethod
    def matches(cls, path):
        return all((Path(path) / marker).is_file() for marker in cls.markers)

    @classmethod
    def describe(cls):
        return f"{cls.kind} ({', '.join(cls.markers)})"

    def __init__(self, translator):
        self.translator = translator

    def translate(self, sentences, beam=None, n_best=0, alignments=False, length_penalty=None):
        """Translates `sentences` with one search: a result dict each."""
        beam = self.default_beam if beam is None else beam
        translations = self._translate(sentences, beam, n_best, length_penalty)
        return [
            result(t, n_best, self._alignment(t) if alignments else None) for t in translations
        ]

    def info(self):
        source = self.translator.source_tokenizer
        target = self.translator.target_tokenizer
        return {
            "engine": self.name,
            "recipe": self.recipe,
            "preset": self.preset,
            "source_vocabulary_size": source.vocabulary_size,
            "target_vocabulary_size": target.vocabulary_size,
            "max_source_pieces": self.translator.max_source_length,
            "default_beam": self.default_beam,
        }


class RunEngine(Engine):
    """A run directory of `zoo train`, through `zoo.load` (Keras)."""

    name = "run"
    kind = "a run directory"
    markers = (runs.CONFIG, runs.WEIGHTS)
    default_beam = 1
    # `Translator.translate`'s own default.
    default_length_penalty = 0.6

    def __init__(self, path):
        from zoo import extras

        extras.require()  # zoo.load reads the run with the TensorFlow stack
        import zoo

        translator = zoo.load(path)
        if not hasattr(translator, "translate"):
            raise EngineError(
                f"{str(path)!r} is a captioning run; `zoo serve` serves translation models"
            )
        super().__init__(translator)
        self.recipe = translator.config.get("recipe")
        self.preset = translator.config.get("preset")

    def _translate(self, sentences, beam, n_best, length_penalty):
        if length_penalty is None:
            length_penalty = self.default_length_penalty
        return self.translator.translate(
            sentences, beam=beam, n_best=n_best, length_penalty=length_penalty
        )

    def _alignment(self, translation):
        from zoo.evaluation import alignment

        links = alignment.word_alignment(
            translation.alignment, translation.source_pieces, translation.target_pieces
        )
        return alignment.format_pharaoh(links)


class OnnxEngine(Engine):
    """An ONNX export folder of `zoo export --format onnx`, through its
    runner (`zoo.export.onnx_runner`: onnxruntime, no Keras)."""

    name = "onnx"
    kind = "an ONNX export folder"
    markers = ("manifest.json", "encoder.onnx")

    def __init__(self, path):
        from zoo.export import onnx_runner

        try:
            translator = onnx_runner.load(path)
        except onnx_runner.RunnerError as error:
            raise EngineError(str(error)) from None
        if not isinstance(translator, onnx_runner.Translator):
            raise EngineError(
                f"{str(path)!r} is a captioning export; `zoo serve` serves translation models"
            )
        super().__init__(translator)
        self.recipe = translator.manifest.get("recipe")
        self.preset = translator.manifest.get("preset")
        self.default_beam = translator.search_settings["beam"]
        self.max_batch = translator.limits["max_batch"]

    def _translate(self, sentences, beam, n_best, length_penalty):
        # The runner refuses a call of more than its manifest's max_batch
        # sentences, which a batch of several requests may hold.
        translations = []
        for start in range(0, len(sentences), self.max_batch):
            translations += self.translator.translate(
                sentences[start : start + self.max_batch],
                beam=beam,
                n_best=n_best,
                length_penalty=length_penalty,
            )
        return translations

    def _alignment(self, translation):
        from zoo.export.onnx_runner import pharaoh_alignment

        return pharaoh_alignment(translation)


# Tried in order; a run directory also holds a manifest.json, never an encoder.onnx.
ENGINES = (RunEngine, OnnxEngine)


def engine_class(path):
    """The class of `ENGINES` that serves `path`, or a one-line error naming
    what each expects."""
    path = Path(path)
    expected = " or ".join(engine.describe() for engine in ENGINES)
    if not path.is_dir():
        raise EngineError(f"{str(path)!r} is not a folder; `zoo serve` serves {expected}")
    for engine in ENGINES:
        if engine.matches(path):
            return engine
    raise EngineError(f"{str(path)!r} holds no model that `zoo serve` serves: expected {expected}")


def open_engine(path):
    """The engine that serves `path`, its model loaded."""
    return engine_class(path)(path)
