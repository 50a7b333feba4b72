"""The models `zoo serve` decodes with, behind one interface, and
`open_engine`, which opens the one a path holds.

An engine is a class with:

- `kind` and `markers`: what the path is called in messages, and the files
  that tell it apart (`matches`);
- `task`: "translation" or "captioning", the model's;
- `translate(sentences, beam, n_best, alignments, length_penalty)`: one
  result dict per sentence (`result`), for a translation model;
- `caption(images, beam, length_penalty)`: one `{"text", "score"}` per
  image (float32 `[N, S, S, 3]`, `image_size` S), for a captioning model;
- `info()`: what `GET /info` reports of the model;
- `default_beam`: the beam of a request that names none;
- `extras`: which of "n_best" and "alignments" its translations can carry
  (a request for another is refused before it is queued).

Adding one is one subclass of `Engine` and its entry in `ENGINES`.
"""

from pathlib import Path

from zoo import runs
from zoo.errors import ZooUserError
from zoo.export.ctranslate2_runner import layout as ct2_layout
from zoo.export.onnx_runner import layout as onnx_layout

TRANSLATION = "translation"
CAPTIONING = "captioning"


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
    """A translation or captioning model that the server decodes with (see
    the module); a subclass sets the class attributes and `_translate`,
    `_caption`, `_alignment`."""

    kind = "a model"
    markers = ()
    name = None
    extras = ("n_best", "alignments")

    @classmethod
    def matches(cls, path):
        return all((Path(path) / marker).is_file() for marker in cls.markers)

    @classmethod
    def describe(cls):
        return f"{cls.kind} ({', '.join(cls.markers)})"

    def __init__(self, model, task):
        self.model = model  # a Translator or a Captioner
        self.task = task

    def translate(self, sentences, beam=None, n_best=0, alignments=False, length_penalty=None):
        """Translates `sentences` with one search: a result dict each."""
        beam = self.default_beam if beam is None else beam
        translations = self._translate(sentences, beam, n_best, length_penalty)
        return [
            result(t, n_best, self._alignment(t) if alignments else None) for t in translations
        ]

    def caption(self, images, beam=None, length_penalty=None):
        """Captions `images` with one search: `{"text", "score"}` each."""
        beam = self.default_beam if beam is None else beam
        return [
            {"text": c.text, "score": c.score} for c in self._caption(images, beam, length_penalty)
        ]

    @property
    def image_size(self):
        return self.model.image_size

    def info(self):
        about = {
            "engine": self.name,
            "task": self.task,
            "recipe": self.recipe,
            "preset": self.preset,
            "default_beam": self.default_beam,
        }
        if self.task == CAPTIONING:
            return {
                **about,
                "vocabulary_size": self.model.tokenizer.vocabulary_size,
                "image_size": self.image_size,
            }
        return {
            **about,
            "source_vocabulary_size": self.model.source_tokenizer.vocabulary_size,
            "target_vocabulary_size": self.model.target_tokenizer.vocabulary_size,
            "max_source_pieces": self.model.max_source_length,
        }


class RunEngine(Engine):
    """A run directory of `zoo train`, through `zoo.load` (Keras); a request
    that names no beam or length penalty gets the run's own (its preset's
    search settings, as `zoo translate`'s)."""

    name = "run"
    kind = "a run directory"
    markers = (runs.CONFIG, runs.WEIGHTS)

    def __init__(self, path):
        from zoo import extras
        from zoo import registry

        extras.require()  # zoo.load reads the run with the TensorFlow stack
        import zoo

        model = zoo.load(path)
        super().__init__(model, TRANSLATION if hasattr(model, "translate") else CAPTIONING)
        self.recipe = model.config.get("recipe")
        self.preset = model.config.get("preset")
        search = registry.search_of(model.config)
        self.default_beam = search["beam"]
        self.default_length_penalty = search["length_penalty"]

    def _translate(self, sentences, beam, n_best, length_penalty):
        if length_penalty is None:
            length_penalty = self.default_length_penalty
        return self.model.translate(
            sentences, beam=beam, n_best=n_best, length_penalty=length_penalty
        )

    def _caption(self, images, beam, length_penalty):
        if length_penalty is None:
            length_penalty = self.default_length_penalty
        return self.model.caption(images, beam=beam, length_penalty=length_penalty)

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
    markers = (onnx_layout.MANIFEST, onnx_layout.ENCODER)

    def __init__(self, path):
        from zoo.export import onnx_runner

        try:
            model = onnx_runner.load(path)
        except onnx_runner.RunnerError as error:
            raise EngineError(str(error)) from None
        task = CAPTIONING if isinstance(model, onnx_runner.Captioner) else TRANSLATION
        super().__init__(model, task)
        self.recipe = model.manifest.get("recipe")
        self.preset = model.manifest.get("preset")
        self.default_beam = model.search_settings["beam"]
        self.max_batch = model.limits["max_batch"]

    def _in_slices(self, decode, inputs, **search):
        """`decode` over slices of `inputs`: the runner refuses a call of more
        than its manifest's max_batch inputs, which a batch of several
        requests may hold."""
        outputs = []
        for start in range(0, len(inputs), self.max_batch):
            outputs += decode(inputs[start : start + self.max_batch], **search)
        return outputs

    def _translate(self, sentences, beam, n_best, length_penalty):
        return self._in_slices(
            self.model.translate, sentences, beam=beam, n_best=n_best, length_penalty=length_penalty
        )

    def _caption(self, images, beam, length_penalty):
        return self._in_slices(
            self.model.caption, images, beam=beam, length_penalty=length_penalty
        )

    def _alignment(self, translation):
        from zoo.export.onnx_runner import pharaoh_alignment

        return pharaoh_alignment(translation)


class CTranslate2Engine(Engine):
    """A CTranslate2 export folder of `zoo export --format ctranslate2`,
    through its runner (`zoo.export.ctranslate2_runner`: ctranslate2 and
    sentencepiece, no Keras). Its translations carry neither n-best lists
    nor alignments, and its length penalty is CTranslate2's (docs/serving.md)."""

    name = "ctranslate2"
    kind = "a CTranslate2 export folder"
    markers = (ct2_layout.MANIFEST, ct2_layout.MODEL_FILES[0])
    extras = ()

    def __init__(self, path):
        from zoo.export import ctranslate2_runner

        try:
            model = ctranslate2_runner.load(path)
        except ImportError:
            raise EngineError(
                f"{str(path)!r} is a CTranslate2 export, which needs ctranslate2: "
                'pip install "keras-attention-zoo[ctranslate2]"'
            ) from None
        except ctranslate2_runner.RunnerError as error:
            raise EngineError(str(error)) from None
        super().__init__(model, TRANSLATION)
        self.recipe = model.manifest.get("recipe")
        self.preset = model.manifest.get("preset")
        self.default_beam = model.search["beam"]

    def _translate(self, sentences, beam, n_best, length_penalty):
        return self.model.translate(sentences, beam=beam, length_penalty=length_penalty)

    def info(self):
        return {
            "engine": self.name,
            "task": self.task,
            "recipe": self.recipe,
            "preset": self.preset,
            "default_beam": self.default_beam,
            "max_source_pieces": self.model.manifest["training_max_length"],
        }


# Tried in order; a run directory also holds a manifest.json, never an
# encoder.onnx nor a model.bin.
ENGINES = (RunEngine, OnnxEngine, CTranslate2Engine)


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
