"""ONNX export (tf2onnx) and the runner shipped in the folder, against the
Keras model.

Each recipe family is exported from a tiny run directory (random weights,
a vocabulary of the synthetic corpus' words): the runner's tokens must equal
the Python API's (greedy and beam, n-best lists, scores and alignments to
1e-4), the graphs' state and logits must agree with `encode` /
`decode_step` to 1e-4 at two batch sizes and two source lengths from the
same files, and the folder, copied alone, runs with `python run.py` where
tensorflow, keras and zoo cannot be imported.
"""

import re
from pathlib import Path

import keras
import numpy as np
import pytest
from onnx_exports import FAMILIES
from onnx_exports import IMAGES
from onnx_exports import OVERWRITTEN
from onnx_exports import SENTENCEPIECE
from onnx_exports import SENTENCES
from onnx_exports import STALE
from onnx_exports import TOLERANCE

from zoo import runs
from zoo.export import onnx_export
from zoo.export import onnx_runner

pytestmark = pytest.mark.tensorflow_only


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
    assert manifest["step_cache_axes"] == model.step_cache_axes
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
    # The folder runs on its own: the runner itself (its package's modules,
    # no caches, and run.py), a README, the settings.
    package = Path(onnx_runner.__file__).parent
    shipped = out / onnx_runner.RUNNER_PACKAGE
    assert sorted(p.name for p in shipped.iterdir()) == sorted(p.name for p in package.glob("*.py"))
    for module in package.glob("*.py"):
        assert (shipped / module.name).read_bytes() == module.read_bytes(), module.name
    assert (out / "run.py").read_text() == onnx_runner.layout.RUN_PY
    assert manifest["search"] == {
        "beam": 1, "length_penalty": 0.6, "coverage_penalty": 0.0, "stopping": "early"
    }
    assert manifest["limits"] == onnx_runner.DEFAULT_LIMITS
    readme = (out / "README.md").read_text()
    assert f"max_batch` = {onnx_runner.DEFAULT_LIMITS['max_batch']}" in readme
    assert "python run.py" in readme
    if manifest["task"] == "translation":  # the example is in the run's (synthetic) language
        example = re.search(r"python run.py '(.*)'\n", readme).group(1)
        assert set(re.findall(r"\w+", example)) <= synthetic_source_words(), example
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".")], "temporary left"


def synthetic_source_words():
    """The words of the embedded corpus's source language."""
    from zoo.data import synthetic

    return {
        word
        for group in (
            synthetic.DETERMINERS, synthetic.NOUNS, synthetic.ADJECTIVES,
            synthetic.TRANSITIVE_VERBS, synthetic.INTRANSITIVE_VERBS, synthetic.SPEECH_VERBS,
            synthetic.PREPOSITIONS, synthetic.CONJUNCTIONS,
        )
        for word in group
    }


def assert_same_outputs(got, expected, n_best=False):
    """The runner's translations (or captions) are the Python API's: the
    same pieces and texts, scores and attention to 1e-4 (n-best lists too)."""
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert mine.text == theirs.text
        if isinstance(mine, onnx_runner.Caption):
            assert mine.words == theirs.words
            attention = mine.attention, theirs.attention
        else:
            assert mine.target_pieces == theirs.target_pieces
            assert mine.source_pieces == theirs.source_pieces
            attention = mine.alignment, theirs.alignment
        np.testing.assert_allclose(mine.score, theirs.score, atol=TOLERANCE)
        np.testing.assert_allclose(*attention, atol=TOLERANCE)
        if n_best:
            assert [h.text for h in mine.n_best] == [h.text for h in theirs.n_best]
            for entry, expected_entry in zip(mine.n_best, theirs.n_best):
                np.testing.assert_allclose(entry.score, expected_entry.score, atol=TOLERANCE)
                np.testing.assert_allclose(
                    entry.penalized_score, expected_entry.penalized_score, atol=TOLERANCE
                )


@pytest.mark.parametrize("preset", FAMILIES)
def test_runner_tokens_equal_the_python_api(exports, preset):
    keras_side, onnx_side = exports(preset)[2:]
    if isinstance(onnx_side, onnx_runner.Captioner):
        assert_same_outputs(
            onnx_side.caption(IMAGES, batch_size=3), keras_side.caption(IMAGES, batch_size=3)
        )
    else:
        assert_same_outputs(
            onnx_side.translate(SENTENCES, batch_size=4),
            keras_side.translate(SENTENCES, batch_size=4),
        )


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
    # The runner's searches cut the step caches to their step limit; the
    # step graph takes them so and decodes as the Keras model's whole ones.
    state = onnx_runner._fit_step_caches(onnx_model, state, 5)
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


# Beam search in NumPy (the runner's) against recipes.decoding's (the Python
# API's), with both penalties and the n-best list; on a token source its
# step limit and coverage mask follow the source, on the image source its
# attention width is the declared state entry's.
@pytest.mark.parametrize("preset", FAMILIES)
def test_beam_search_through_the_runner_equals_the_python_api(exports, preset):
    keras_side, onnx_side = exports(preset)[2:]
    if isinstance(onnx_side, onnx_runner.Captioner):
        options = dict(beam=3, length_penalty=0.6)
        assert_same_outputs(
            onnx_side.caption(IMAGES[:3], n_best=3, **options),
            keras_side.caption(IMAGES[:3], **options),
        )
    else:
        options = dict(beam=3, length_penalty=0.6, coverage_penalty=0.2, n_best=3)
        assert_same_outputs(
            onnx_side.translate(SENTENCES[:3], **options),
            keras_side.translate(SENTENCES[:3], **options),
            n_best=True,
        )


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
    with pytest.raises(onnx_runner.ExportFolderError) as error:
        onnx_runner.load(tmp_path)
    assert_one_line(error, "manifest.json", "zoo export RUN_DIR --format onnx")


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


def test_int8_export_quantizes_the_matrix_products(exports, tmp_path, caplog):
    """`quantize="int8"`: integer matrix products in both graphs, the
    manifest says so, the runner still translates every sentence, and
    onnxruntime's advice to pre-process first stays off the console."""
    import onnx

    run_dir = exports("rnnsearch_small").run_dir
    out = onnx_export.export_onnx(run_dir, tmp_path / "int8", quantize="int8")
    assert "pre-processing" not in caplog.text
    manifest = onnx_runner.read_manifest(out)
    assert manifest["quantization"]["quantization"] == "int8-dynamic"
    assert manifest["quantization"]["per_channel"] is True
    for name in ("encoder.onnx", "decoder_step.onnx"):
        ops = {node.op_type for node in onnx.load(out / name).graph.node}
        assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops, (name, ops)
        # Per-channel weights: a weight's scale holds one value per column.
        scales = [
            t for t in onnx.load(out / name).graph.initializer if t.name.endswith("_scale")
        ]
        assert any(np.prod(t.dims) > 1 for t in scales), (name, [t.dims for t in scales])
    translations = onnx_runner.load(out).translate(SENTENCES)
    assert len(translations) == len(SENTENCES)
    assert all(t.target_pieces for t in translations)


def test_layer_norms_reach_onnxruntime_as_one_kernel_each(exports, tmp_path):
    """The export writes each layer norm in the form onnxruntime fuses
    (`onnx_export._fusable_layer_norms`): after the session's graph
    optimizations, both graphs together hold one LayerNormalization node
    per layer norm of the model. (The graphs' agreement with the model, to
    1e-4, is `test_graphs_agree_with_encode_and_decode_step`.)"""
    import onnx
    import onnxruntime

    keras_side, onnx_side = exports("transformer_small")[2:]
    layer_norms = [
        layer
        for layer in keras_side.model._flatten_layers()
        if isinstance(layer, keras.layers.LayerNormalization)
    ]
    fused = 0
    for graph in ("encoder.onnx", "decoder_step.onnx"):
        options = onnxruntime.SessionOptions()
        options.optimized_model_filepath = str(tmp_path / graph)
        onnxruntime.InferenceSession(
            str(onnx_side.model.folder / graph), options, providers=["CPUExecutionProvider"]
        )
        nodes = onnx.load(tmp_path / graph).graph.node
        fused += sum(node.op_type == "LayerNormalization" for node in nodes)
    assert len(layer_norms) > 0
    assert fused == len(layer_norms)


@pytest.mark.parametrize(
    "preset", ["rnnencdec_small", "rnnsearch_small", "luong_local_p_general_small", "gnmt_small"]
)
def test_recurrent_encoders_are_onnx_recurrent_operators(exports, preset):
    """Each GRU or LSTM layer of the encoder is one ONNX operator
    (`zoo.export.onnx_recurrent`), not tf2onnx's per-step `Loop`; the graphs'
    agreement with the model is `test_graphs_agree_with_encode_and_decode_step`."""
    import onnx

    keras_side, onnx_side = exports(preset)[2:]
    cells = {keras.layers.GRUCell: "GRU", keras.layers.LSTMCell: "LSTM"}
    expected = sorted(
        cells[type(layer.cell)]
        for layer in keras_side.model._flatten_layers()
        if isinstance(layer, keras.layers.RNN) and "encoder" in layer.path
    )
    nodes = onnx.load(onnx_side.model.folder / "encoder.onnx").graph.node
    assert not [node.name for node in nodes if node.op_type == "Loop"]
    assert sorted(node.op_type for node in nodes if node.op_type in ("GRU", "LSTM")) == expected
    assert expected


def test_the_decoder_step_runs_on_one_thread_unless_told(exports):
    """The step's small ops run on one intra-op thread, the encoder's on
    onnxruntime's default; options a caller gives apply to both graphs."""
    import onnxruntime

    folder = exports("rnnsearch_small").out
    model = onnx_runner.OnnxModel(folder)
    assert model.decoder.get_session_options().intra_op_num_threads == 1
    assert model.encoder.get_session_options().intra_op_num_threads == 0
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    model = onnx_runner.OnnxModel(folder, session_options=options)
    assert model.decoder.get_session_options().intra_op_num_threads == 2
    assert model.encoder.get_session_options().intra_op_num_threads == 2
