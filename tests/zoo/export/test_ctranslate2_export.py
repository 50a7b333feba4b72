"""CTranslate2 export of the Transformer, and the runner shipped in the folder,
against the Keras model.

Two tiny Transformer runs with one SentencePiece vocabulary (random weights,
sharpened as the ONNX tests sharpen them): `transformer_multi30k`'s, which
shares one embedding between the source, the target and the output, and
`transformer_small`'s, which has an output projection of its own. CTranslate2's
teacher-forced log-probabilities must equal the Keras model's to 1e-5, its
greedy and beam translations (length penalty 0) the Python API's, and the
folder, copied alone, runs where tensorflow, keras and zoo cannot be imported.
"""

import json
import shutil

import ctranslate2
import keras
import numpy as np
import pytest
from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import untrained_rnnsearch_run
from onnx_exports import SENTENCES
from onnx_exports import TINY
from onnx_exports import TOLERANCE
from onnx_exports import sharpen_weights
from test_onnx_runner_alone import ALONE_SCRIPT
from test_onnx_runner_alone import run_alone

import zoo
from zoo.data import SentencePieceTokenizer
from zoo.data import synthetic_corpus
from zoo.export import ctranslate2_export
from zoo.export import ctranslate2_runner
from zoo.training import untrained

pytestmark = pytest.mark.tensorflow_only

SHARED_EMBEDDINGS = "transformer_multi30k"
OWN_PROJECTION = "transformer_small"
PRESETS = [SHARED_EMBEDDINGS, OWN_PROJECTION]
# float32 against float32, through other kernels.
LOG_PROB_TOLERANCE = 1e-5
# int8 weights of a model 8 wide, sharpened: rounding errors do not average
# out over so few inputs, so the bound is a share of the log-probabilities'
# size, which a wrong mapping misses by the whole of it.
INT8_RELATIVE_TOLERANCE = 0.2
LENGTH_PENALTY = 0.6


class Exported:
    """A tiny run, its float32 and int8 exports, and both sides loaded."""

    def __init__(self, root, preset):
        self.run_dir = write_shared_run(root / "run", preset)
        self.out = ctranslate2_export.export_ctranslate2(
            self.run_dir, root / "ct2", beam=2, length_penalty=LENGTH_PENALTY
        )
        self.int8 = ctranslate2_export.export_ctranslate2(
            self.run_dir, root / "ct2_int8", quantize="int8"
        )
        self.keras_side = zoo.load(self.run_dir)
        self.runner = ctranslate2_runner.load(self.out)


def write_shared_run(folder, preset):
    """A tiny run directory of `preset` with one SentencePiece vocabulary
    for both languages, random weights sharpened."""
    pairs = synthetic_corpus(200, seed=1, min_length=3, max_length=12)
    sentences = [t for _, t in pairs] + [s for s, _ in pairs] + SENTENCES
    shared = SentencePieceTokenizer.train(sentences, 400)
    run_dir = untrained.write_untrained_run(
        folder,
        preset,
        shared,
        shared,
        model_overrides={**TINY["transformer"], "dropout": 0.0},
        training_overrides={"max_length": 10},
    )
    sharpen_weights(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """`exports(preset)`: the `Exported` tiny run of `preset`, made once."""
    made = {}

    def export(preset):
        if preset not in made:
            made[preset] = Exported(tmp_path_factory.mktemp(preset), preset)
        return made[preset]

    return export


def keras_log_probs(model, source_ids, target_ids):
    """The Keras model's teacher-forced log-probability of each target token
    and of the EOS after them."""
    target_in = np.array([[model.bos_id] + target_ids], "int32")
    logits = model({"source": np.array([source_ids], "int32"), "target_in": target_in})
    log_probs = keras.ops.convert_to_numpy(keras.ops.log_softmax(logits, axis=-1))[0]
    return log_probs[np.arange(len(target_ids) + 1), target_ids + [model.eos_id]]


def ct2_log_probs(folder, translator, sources, targets):
    """CTranslate2's `score_batch` log-probabilities of the same targets."""
    pieces = translator.source_tokenizer.id_to_token
    scored = ctranslate2.Translator(str(folder)).score_batch(
        [[pieces(i) for i in ids] for ids in sources],
        [[pieces(i) for i in ids] for ids in targets],
    )
    return [np.array(result.log_probs) for result in scored]


def log_prob_differences(folder, translator):
    """How far six random targets' log-probabilities are between the
    CTranslate2 model in `folder` and the Keras model: `(the largest
    difference, the mean size of the Keras log-probabilities)`."""
    sources = translator.source_tokenizer.encode(SENTENCES)
    rng = np.random.default_rng(0)
    vocabulary = translator.target_tokenizer.vocabulary_size
    targets = [rng.integers(4, vocabulary, 7).tolist() for _ in sources]
    scored = ct2_log_probs(folder, translator, sources, targets)
    keras_side = [keras_log_probs(translator.model, s, t) for s, t in zip(sources, targets)]
    largest = max(np.abs(theirs - ours).max() for theirs, ours in zip(keras_side, scored))
    return largest, np.abs(np.concatenate(keras_side)).mean()


@pytest.mark.parametrize("preset", PRESETS)
def test_score_batch_gives_the_keras_log_probabilities(exports, preset):
    exported = exports(preset)
    difference, _ = log_prob_differences(exported.out, exported.keras_side)
    assert difference < LOG_PROB_TOLERANCE


def test_the_papers_post_ln_transformer_converts_too(tmp_path):
    """Post-LN (`norm_first=False`), with no final norms: the spec alone,
    from a model built in memory."""
    from zoo.recipes.transformer import Transformer

    model = Transformer(30, 30, **{**TINY["transformer"], "dropout": 0.0}, norm_first=False)
    model.build()
    tokens = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"] + [f"t{i}" for i in range(26)]
    spec = ctranslate2_export.transformer_spec(model, tokens, tokens)
    ctranslate2_export._SpecConverter(spec).convert(str(tmp_path / "ct2"))
    source, target = [5, 9, 12, 7], [8, 21, 4]
    scored = ctranslate2.Translator(str(tmp_path / "ct2")).score_batch(
        [[tokens[i] for i in source]], [[tokens[i] for i in target]]
    )
    expected = keras_log_probs(model, source, target)
    np.testing.assert_allclose(scored[0].log_probs, expected, atol=LOG_PROB_TOLERANCE)


def test_int8_weights_stay_close_to_the_keras_log_probabilities(exports):
    exported = exports(SHARED_EMBEDDINGS)
    sizes = [(folder / "model.bin").stat().st_size for folder in (exported.int8, exported.out)]
    assert sizes[0] < sizes[1]
    assert ctranslate2_runner.read_manifest(exported.int8)["quantization"] == "int8"
    difference, size = log_prob_differences(exported.int8, exported.keras_side)
    assert difference < INT8_RELATIVE_TOLERANCE * size


def test_greedy_translations_are_the_python_apis(exports):
    """Tokens, texts and scores of `zoo.load(run).translate`: the source
    cut at the run's max_length and the step limit as it sets them; an
    empty sentence, which CTranslate2 does not decode, is empty."""
    exported = exports(SHARED_EMBEDDINGS)
    expected = exported.keras_side.translate(SENTENCES)
    got = exported.runner.translate(SENTENCES + [""], beam=1)
    assert got[-1] == ctranslate2_runner.Translation("", [], 0.0)
    got = got[:-1]
    assert [t.target_pieces for t in got] == [t.target_pieces for t in expected]
    assert [t.text for t in got] == [t.text for t in expected]
    np.testing.assert_allclose([t.score for t in got], [t.score for t in expected], atol=TOLERANCE)


def test_beam_translations_are_the_python_apis_without_length_penalty(exports):
    exported = exports(SHARED_EMBEDDINGS)
    expected = exported.keras_side.translate(SENTENCES, beam=3, length_penalty=0.0)
    got = exported.runner.translate(SENTENCES, beam=3, length_penalty=0.0)
    assert [t.target_pieces for t in got] == [t.target_pieces for t in expected]
    np.testing.assert_allclose([t.score for t in got], [t.score for t in expected], atol=TOLERANCE)


class RecordingTranslator:
    """A `ctranslate2.Translator` that records the options of each batch."""

    def __init__(self, translator):
        self._translator = translator
        self.options = []

    def translate_batch(self, batch, **options):
        self.options.append(options)
        return self._translator.translate_batch(batch, **options)


def test_the_length_penalty_is_passed_through_as_it_is(exports, monkeypatch):
    """The export's search settings are the runner's defaults, and the
    penalty reaches CTranslate2 unchanged (its normalization, not GNMT's)."""
    exported = exports(SHARED_EMBEDDINGS)
    manifest = ctranslate2_runner.read_manifest(exported.out)
    assert manifest["search"] == {"beam": 2, "length_penalty": LENGTH_PENALTY}
    runner = ctranslate2_runner.load(exported.out)
    recording = RecordingTranslator(runner._translator)
    monkeypatch.setattr(runner, "_translator", recording)
    runner.translate(SENTENCES[:2])
    runner.translate(SENTENCES[:2], beam=3, length_penalty=1.5)
    assert [(o["beam_size"], o["length_penalty"]) for o in recording.options] == [
        (2, LENGTH_PENALTY),
        (3, 1.5),
    ]
    readme = (exported.out / ctranslate2_runner.README).read_text()
    assert "((5 + length) / 6) ** alpha" in readme and f"length penalty: {LENGTH_PENALTY}" in readme


def test_the_folder_alone_gives_the_runners_outputs(exports, tmp_path):
    """The copied folder, in a process that cannot import tensorflow, keras
    or zoo: the translations of the runner in this process."""
    exported = exports(SHARED_EMBEDDINGS)
    folder = tmp_path / "export"
    shutil.copytree(exported.out, folder)
    settings = {"greedy": {"beam": 1}, "beam": {"beam": 3, "length_penalty": LENGTH_PENALTY}}
    request = {"sentences": SENTENCES, "images": [], "settings": settings}
    result = run_alone(folder, "-c", ALONE_SCRIPT, json.dumps(request))
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report = json.loads(result.stdout)
    assert report["loaded"] == []
    for name, options in settings.items():
        expected = exported.runner.translate(SENTENCES, **options)
        assert report["outputs"][name]["pieces"] == [t.target_pieces for t in expected], name
        assert report["outputs"][name]["texts"] == [t.text for t in expected], name


def test_run_py_translates_arguments_and_standard_input(exports, tmp_path):
    exported = exports(SHARED_EMBEDDINGS)
    folder = tmp_path / "export"
    shutil.copytree(exported.out, folder)
    texts = [t.text for t in exported.runner.translate(SENTENCES[:2], beam=1)]
    result = run_alone(folder, "run.py", "--beam", "1", *SENTENCES[:2])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == texts
    # One sentence a batch: each gets its own step limit.
    texts = [t.text for t in exported.runner.translate(SENTENCES[:3], beam=1, batch_size=1)]
    lines = f"{SENTENCES[0]}\n\n{SENTENCES[2]}\n".encode()
    result = run_alone(folder, "run.py", "--beam", "1", "--batch-size", "1", stdin=lines)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [texts[0], "", texts[2]]


# --- refusals -----------------------------------------------------------------


def test_an_rnn_run_is_refused_in_one_line_naming_onnx(capsys, tmp_path):
    run_dir = untrained_rnnsearch_run(tmp_path / "run", 60)
    out = tmp_path / "exports" / "ct2"
    code, _, err = run_cli(
        capsys, "export", str(run_dir), "--format", "ctranslate2", "--out", str(out)
    )
    assert_one_line_error(code, err, "rnnsearch", "--format onnx")
    assert not (tmp_path / "exports").exists()


def test_a_bad_quantization_is_refused_by_the_command_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        run_cli(capsys, "export", str(tmp_path), "--format", "ctranslate2", "--quantize", "int4")
    assert exit_.value.code == 2
    assert "invalid choice: 'int4'" in capsys.readouterr().err


def test_an_existing_output_is_kept_without_overwrite(exports, tmp_path):
    exported = exports(SHARED_EMBEDDINGS)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("not ours")
    with pytest.raises(ctranslate2_export.Ctranslate2ExportError, match="overwrite"):
        ctranslate2_export.export_ctranslate2(exported.run_dir, out)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    ctranslate2_export.export_ctranslate2(exported.run_dir, out, overwrite=True)
    assert not (out / "keep.txt").exists()
    assert ctranslate2_runner.read_manifest(out)["recipe"] == "transformer"


def test_a_wordpiece_run_is_refused_naming_onnx(exports):
    config = json.loads((exports(SHARED_EMBEDDINGS).run_dir / "config.json").read_text())
    config["training"]["tokenizer"] = "wordpiece"
    with pytest.raises(ctranslate2_export.Ctranslate2ExportError) as error:
        ctranslate2_export.check_exportable(config)
    assert "\n" not in str(error.value)
    assert "SentencePiece" in str(error.value) and "--format onnx" in str(error.value)


def test_without_ctranslate2_the_command_says_what_to_install(
    exports, capsys, tmp_path, monkeypatch
):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ctranslate2" else find_spec(name, *args),
    )
    run_dir, out = exports(SHARED_EMBEDDINGS).run_dir, tmp_path / "out"
    code, _, err = run_cli(
        capsys, "export", str(run_dir), "--format", "ctranslate2", "--out", str(out)
    )
    assert_one_line_error(code, err, "keras-attention-zoo[ctranslate2]")
    assert not out.exists()


def test_the_runners_constants_are_the_packages():
    import inspect

    from zoo.inference import translator
    from zoo.recipes import contract
    from zoo.recipes import decoding

    assert ctranslate2_runner.SPECIAL_TOKENS == contract.SPECIAL_TOKENS
    assert ctranslate2_runner.SOURCE_WIDTH_MULTIPLE == translator.SOURCE_WIDTH_MULTIPLE
    step_limit = inspect.signature(decoding.max_decoding_steps).parameters
    assert ctranslate2_runner.MAX_LENGTH_RATIO == step_limit["max_length_ratio"].default
    assert ctranslate2_runner.MAX_LENGTH_OFFSET == step_limit["max_length_offset"].default


def test_a_folder_without_manifest_is_refused_naming_the_export(tmp_path):
    with pytest.raises(ctranslate2_runner.ExportFolderError) as error:
        ctranslate2_runner.load(tmp_path)
    assert "\n" not in str(error.value)
    assert "manifest.json" in str(error.value)
    assert "zoo export RUN_DIR --format ctranslate2" in str(error.value)


def test_zoo_serve_serves_the_folder_with_the_runners_translations(exports):
    from zoo.serve import engines

    exported = exports(SHARED_EMBEDDINGS)
    engine = engines.open_engine(exported.out)
    assert isinstance(engine, engines.CTranslate2Engine)
    assert engine.extras == () and engine.info()["engine"] == "ctranslate2"
    # The export's defaults: beam 2 and its length penalty.
    expected = exported.runner.translate(SENTENCES)
    served = engine.translate(SENTENCES)
    assert [answer["text"] for answer in served] == [t.text for t in expected]
    np.testing.assert_allclose(
        [answer["score"] for answer in served], [t.score for t in expected], atol=TOLERANCE
    )
