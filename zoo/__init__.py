"""keras-attention-zoo: attention layers, the papers' models, and the tools around them.

`zoo.layers` and `zoo.recipes` are backend-agnostic (keras only); the rest of
`zoo` (data pipelines, training, export) may use TensorFlow and says so, and
needs the extra: `pip install "keras-attention-zoo[tensorflow]"`. This module
imports nothing at import time, so `import zoo.layers` loads no more.

    >>> import zoo
    >>> zoo.presets()                      # name -> description
    >>> model = zoo.build("rnnsearch_small")
    >>> translator = zoo.load("runs/rnnsearch_small")
    >>> translator.translate(["a sentence"], beam=5)[0].text
    >>> captioner = zoo.load("runs/show_attend_tell_small")
    >>> captioner.caption_files(["image.png"], beam=3)[0].text
"""

__version__ = "0.1.0"


def presets():
    """The registered presets: {name: one-line description}."""
    from zoo import registry

    return registry.presets()


def build(name, **overrides):
    """The model of preset `name`, constructor arguments overridden."""
    from zoo import registry

    return registry.build(name, **overrides)


def load(run_dir):
    """A run directory of `zoo train`, reopened: a `zoo.inference.translator.Translator`,
    or a `zoo.inference.captioner.Captioner` for a captioning recipe."""
    from zoo.tasks import loading

    return loading.load(run_dir)
