"""The `export` suite: per-sentence greedy latency of the SavedModel and
onnxruntime serving paths against the Keras Python API (TensorFlow only)."""

import contextlib
import tempfile
from pathlib import Path

EXPORT_PRESET = "rnnsearch_small"
SENTENCES = 8


def bench_export(runner):
    """Per-sentence greedy latency: the SavedModel `translate` signature and
    the onnxruntime runner, each against the Keras Python API.

    One untrained run of `EXPORT_PRESET` (vocabularies from the synthetic
    corpus): untrained, every sentence decodes to its step limit on all
    three sides, which keeps the comparison equal (the worst case of a
    trained model). The three sides' translations are compared first.
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        runner.skip(
            "export", "SavedModel and ONNX are exported with TensorFlow; use --backend tensorflow"
        )
        return
    with _exported_sides(runner.size) as (sentences, sides):
        for batch in runner.size.search_batches:
            # Batch 1: SENTENCES sentences, one call each.
            groups = [[s] for s in sentences[:SENTENCES]] if batch == 1 else [sentences[:batch]]
            _bench_sides(runner, batch, groups, sides)


@contextlib.contextmanager
def _exported_sides(size):
    """Yields `(sentences, sides)`: test sentences of the synthetic corpus,
    and each side's `translate(sentences) -> texts` (Keras, SavedModel,
    onnxruntime) of one untrained run, exported to a temporary folder."""
    import tensorflow as tf

    import zoo
    from zoo import data
    from zoo.export import saved_model as export
    from zoo.export import onnx_export
    from zoo.export import onnx_runner
    from zoo import registry
    from zoo.training import untrained as training

    pairs = data.synthetic_splits(500, 0, 64, seed=0)
    recipe = registry.get_preset(EXPORT_PRESET)["recipe"]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        run_dir = training.write_untrained_run(
            folder / "run",
            EXPORT_PRESET,
            data.TextTokenizer.train([t for _, t in pairs["train"]], size.vocabulary_size),
            data.TextTokenizer.train([s for s, _ in pairs["train"]], size.vocabulary_size),
            model_overrides=size.model_overrides.get(recipe, {}),
        )
        python_side = zoo.load(run_dir)
        saved_model_dir = export.export_saved_model(run_dir, folder / "saved_model")
        served = tf.saved_model.load(str(saved_model_dir))
        onnx_side = onnx_runner.load(onnx_export.export_onnx(run_dir, folder / "onnx"))

        def saved_model(group):
            outputs = served.signatures["translate"](text=tf.constant(group))
            return [text.decode() for text in outputs["translation"].numpy()]

        sides = {
            "Keras": _texts(python_side),
            "SavedModel translate": saved_model,
            "onnxruntime runner": _texts(onnx_side),
        }
        yield [source for source, _ in pairs["test"]], sides


def _texts(translator):
    """`translate(sentences) -> texts` of a Python-side translator, one call."""
    return lambda group: [t.text for t in translator.translate(group, batch_size=len(group))]


def _bench_sides(runner, batch, groups, sides):
    """Times each served side against Keras over `groups` of sentences, one
    call per group, per sentence."""
    count = sum(len(group) for group in groups)

    def over_groups(translate):
        return lambda: [text for group in groups for text in translate(group)]

    keras_api = over_groups(sides["Keras"])
    expected = keras_api()
    for name in ("SavedModel translate", "onnxruntime runner"):
        side = over_groups(sides[name])
        same = side() == expected
        runner.pair(
            "export",
            f"{name} vs Keras Translator.translate, batch {batch}",
            f"{EXPORT_PRESET}, untrained",
            "graph",
            side,
            keras_api,
            note=f"per sentence, greedy; same translations: {'yes' if same else 'NO'}",
            scale=1 / count,
            details={"same_translations": same},
        )
