"""ONNX export (tf2onnx) and the onnxruntime runner, against the Keras model.

Each recipe family is exported from a tiny run directory (random weights,
a vocabulary of the synthetic corpus' words): the runner's tokens must equal
the Python API's, and the graphs' state and logits must agree with
`encode` / `decode_step` to 1e-4, at two batch sizes and two source lengths
from the same files.
"""

from pathlib import Path
from typing import Any
from typing import NamedTuple

import keras
import numpy as np
import pytest
import tiny_configs

from zoo.export import onnx_export
from zoo.export import onnx_runner
from zoo import registry
from zoo import runs
from zoo.training import loop as training
from zoo.data import synthetic_corpus

pytestmark = pytest.mark.tensorflow_only

# The shared tiny configs, with room for the longer test sentences.
TINY = {
    **tiny_configs.TINY,
    "transformer": {**tiny_configs.TINY["transformer"], "max_target_length": 40, "max_source_length": 40},
    "show_attend_tell": {**tiny_configs.TINY["show_attend_tell"], "max_target_length": 12},
}
# One recurrent attention recipe, the Transformer (its cache write needs the
# export's ScatterND handler) and the captioner (an image source).
FAMILIES = ["rnnsearch_small", "transformer_small", "show_attend_tell_small"]
# Its export replaces (overwrite=True) a folder holding STALE: every export
# converts for seconds, so the overwrite path is checked on one of them.
OVERWRITTEN = "show_attend_tell_small"
# Its run has one SentencePiece vocabulary for both languages (shared.model).
SENTENCEPIECE = "transformer_small"
STALE = "stale.txt"
# Sentences of at most 8 word pieces: the Python API pads to a multiple of 8,
# so the Keras search is traced for one width only.
SENTENCES = [source for source, _ in synthetic_corpus(6, seed=3, min_length=3, max_length=6)]
IMAGES = np.random.default_rng(0).integers(0, 256, (5, 16, 16, 3), dtype="uint8")
TOLERANCE = 1e-4


def vocabulary(sentences):
    from zoo.data import RESERVED_TOKENS

    words = sorted({word for sentence in sentences for word in sentence.replace(".", " .").split()})
    return list(RESERVED_TOKENS) + words


def write_run(folder, preset):
    """A complete run directory of `preset` at tiny size, random weights."""
    from zoo.data import SentencePieceTokenizer
    from zoo.data import TextTokenizer

    recipe = registry.get_preset(preset)["recipe"]
    pairs = synthetic_corpus(200, seed=1, min_length=3, max_length=12)
    targets = [t for _, t in pairs] + ["a red circle ."]
    sources = [s for s, _ in pairs] + SENTENCES
    if preset == SENTENCEPIECE:
        shared = SentencePieceTokenizer.train(targets + sources, 400)
        target, source = shared, shared
    else:
        target, source = TextTokenizer(vocabulary(targets)), TextTokenizer(vocabulary(sources))
    return training.write_untrained_run(
        folder,
        preset,
        target,
        source,
        model_overrides={**TINY[recipe], "dropout": 0.0},
        training_overrides={"max_length": 10},
    )


class Exported(NamedTuple):
    run_dir: Path
    out: Path
    keras_side: Any  # the Python API's Translator or Captioner
    onnx_side: Any  # onnx_runner's OnnxTranslator or OnnxCaptioner


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """`exports(preset)`: the `Exported` tiny run of `preset`, made once."""
    import zoo

    made = {}

    def export(preset):
        if preset not in made:
            root = tmp_path_factory.mktemp(preset)
            run_dir = write_run(root / "run", preset)
            if preset == OVERWRITTEN:
                (root / "onnx").mkdir()
                (root / "onnx" / STALE).write_text("from an older export")
            out = onnx_export.export_onnx(run_dir, root / "onnx", overwrite=preset == OVERWRITTEN)
            made[preset] = Exported(run_dir, out, zoo.load(run_dir), onnx_runner.load(out))
        return made[preset]

    return export


@pytest.mark.parametrize("preset", FAMILIES)
def test_export_writes_the_graphs_vocabularies_and_manifest(exports, preset):
    out, keras_side = exports(preset).out, exports(preset).keras_side
    manifest = onnx_runner.read_manifest(out)
    # The model's declarations, as written (`zoo.recipes.contract`).
    model = keras_side.model
    spec = model.source_spec
    assert manifest["source"] == {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype}
    source = IMAGES[:1] / 255.0 if model.image_size else np.full((1, 3), model.eos_id, "int32")
    state = model.encode(source)
    assert manifest["state"] == list(state)
    assert manifest["carried_state"] == model.carried_state_keys(state)
    assert manifest["attention_state_key"] == model.attention_state_key
    for name in ("encoder.onnx", "decoder_step.onnx", *manifest["vocabularies"].values()):
        assert (out / name).is_file(), name
    expected = {"target": "target.vocab"}
    if manifest["task"] == "translation":
        expected = {"source": "source.vocab", "target": "target.vocab"}
    if preset == SENTENCEPIECE:  # the run's one file, copied as it is
        expected = {"source": "shared.model", "target": "shared.model"}
        run_file = exports(preset).run_dir / "shared.model"
        assert (out / "shared.model").read_bytes() == run_file.read_bytes()
    assert manifest["vocabularies"] == expected
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".")], "temporary left"


@pytest.mark.parametrize("preset", FAMILIES)
def test_runner_tokens_equal_the_python_api(exports, preset):
    keras_side, onnx_side = exports(preset)[2:]
    if isinstance(onnx_side, onnx_runner.OnnxCaptioner):
        expected = keras_side.caption(IMAGES, batch_size=3)
        got = onnx_side.caption(IMAGES, batch_size=3)
        pieces = [(c.words, c.score) for c in expected], [(c.words, c.score) for c in got]
    else:
        expected = keras_side.translate(SENTENCES, batch_size=4)
        got = onnx_side.translate(SENTENCES, batch_size=4)
        pieces = [(t.target_pieces, t.score) for t in expected], [
            (t.target_pieces, t.score) for t in got
        ]
        assert [t.text for t in got] == [t.text for t in expected]
    assert [p for p, _ in pieces[1]] == [p for p, _ in pieces[0]]
    np.testing.assert_allclose([s for _, s in pieces[1]], [s for _, s in pieces[0]], atol=TOLERANCE)


@pytest.mark.parametrize("preset", FAMILIES)
@pytest.mark.parametrize("batch,length", [(1, 4), (3, 9)])
def test_graphs_agree_with_encode_and_decode_step(exports, preset, batch, length):
    """The same two files at batch 1 and 3 and source lengths 4 and 9."""
    keras_side, onnx_side = exports(preset)[2:]
    model, onnx_model = keras_side.model, onnx_side.model
    rng = np.random.default_rng(batch)
    if onnx_model.image_size:
        source = rng.random((batch, 16, 16, 3)).astype("float32")
    else:
        source = rng.integers(4, 30, (batch, length)).astype("int32")
        source[-1, length // 2 :] = 0  # padding in the last row
    expected_state = model.encode(source)
    state = onnx_model.encode(source)
    assert list(state) == list(expected_state)
    for name in state:
        np.testing.assert_allclose(
            state[name], keras.ops.convert_to_numpy(expected_state[name]), atol=TOLERANCE
        )
    tokens = np.full((batch,), model.bos_id, "int32")
    for step in range(4):
        expected = model.decode_step(tokens, expected_state, step)
        logits, state, attention = onnx_model.decode_step(tokens, state, step)
        expected_logits, expected_state, expected_attention = expected
        np.testing.assert_allclose(
            logits, keras.ops.convert_to_numpy(expected_logits), atol=TOLERANCE
        )
        np.testing.assert_allclose(
            attention, keras.ops.convert_to_numpy(expected_attention), atol=TOLERANCE
        )
        tokens = logits.argmax(axis=-1).astype("int32")


# Beam search is recipes.decoding's own code on both sides: on a token
# source (its step limit computed from the source length) and on the image
# source (its attention width read from the declared state entry).
@pytest.mark.parametrize("preset", ["rnnsearch_small", "show_attend_tell_small"])
def test_beam_search_through_the_runner_equals_the_python_api(exports, preset):
    keras_side, onnx_side = exports(preset)[2:]
    if isinstance(onnx_side, onnx_runner.OnnxCaptioner):
        expected = keras_side.caption(IMAGES[:3], beam=3)
        got = onnx_side.caption(IMAGES[:3], beam=3)
        assert [c.words for c in got] == [c.words for c in expected]
    else:
        expected = keras_side.translate(SENTENCES[:3], beam=3, length_penalty=0.6)
        got = onnx_side.translate(SENTENCES[:3], beam=3, length_penalty=0.6)
        assert [t.target_pieces for t in got] == [t.target_pieces for t in expected]
    np.testing.assert_allclose([x.score for x in got], [x.score for x in expected], atol=TOLERANCE)


# --- refusals -----------------------------------------------------------------


@pytest.fixture
def small_run(exports):
    return exports("rnnsearch_small").run_dir


def assert_one_line(error, *words):
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_incomplete_run_directory_is_refused(small_run, tmp_path):
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    for name in (runs.CONFIG, runs.SOURCE_VOCABULARY, runs.TARGET_VOCABULARY):
        (incomplete / name).write_bytes((small_run / name).read_bytes())
    with pytest.raises(runs.RunDirectoryError) as error:
        onnx_export.export_onnx(incomplete, tmp_path / "out")
    assert_one_line(error, "incomplete", runs.WEIGHTS)
    assert not (tmp_path / "out").exists()


def test_existing_output_is_refused(small_run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("not ours")
    with pytest.raises(onnx_export.OnnxExportError) as error:
        onnx_export.export_onnx(small_run, out)
    assert_one_line(error, str(out), "overwrite=True")
    assert (out / "keep.txt").read_text() == "not ours"


def test_bfloat16_policy_is_refused(small_run, tmp_path):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        with pytest.raises(onnx_export.OnnxExportError) as error:
            onnx_export.export_onnx(small_run, tmp_path / "out")
    finally:
        keras.config.set_dtype_policy(previous)
    assert_one_line(error, "mixed_bfloat16", "float32")
    assert not list(tmp_path.iterdir())


def test_folder_without_manifest_is_refused(tmp_path):
    with pytest.raises(onnx_runner.OnnxFolderError) as error:
        onnx_runner.load(tmp_path)
    assert_one_line(error, "manifest.json", "export_onnx")


def test_overwrite_replaces_an_existing_output(exports):
    out = exports(OVERWRITTEN).out
    assert not (out / STALE).exists()
    assert onnx_runner.read_manifest(out)["preset"] == OVERWRITTEN
    assert sorted(p.name for p in out.parent.iterdir()) == ["onnx", "run"], "temporary left"


def test_slice_update_converts_with_xla_clamping(tmp_path):
    """`keras.ops.slice_update` (XlaDynamicUpdateSlice on TensorFlow) through
    the export's ScatterND handler, including a start that XLA clamps so
    that the update fits (step 9 of a buffer of 6 writes the last column)."""
    import onnxruntime
    import tensorflow as tf

    signature = [
        tf.TensorSpec([None, 6], tf.float32, name="buffer"),
        tf.TensorSpec([None, 1], tf.float32, name="value"),
        tf.TensorSpec([], tf.int32, name="step"),
    ]

    def write(buffer, value, step):
        return {"written": keras.ops.slice_update(buffer, [0, step], value)}

    onnx_export._convert(write, signature, tmp_path / "write.onnx", onnx_export.OPSET)
    session = onnxruntime.InferenceSession(str(tmp_path / "write.onnx"))
    buffer = np.arange(12, dtype="float32").reshape(2, 6)
    value = np.array([[-1.0], [-2.0]], "float32")
    for step in (0, 3, 9):
        expected = keras.ops.convert_to_numpy(write(buffer, value, step)["written"])
        feeds = {"buffer": buffer, "value": value, "step": np.array(step, "int32")}
        (got,) = session.run(["written"], feeds)
        np.testing.assert_array_equal(got, expected)
