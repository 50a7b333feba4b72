"""An ONNX export folder on its own: `python run.py` where tensorflow, keras
and zoo cannot be imported, its command line, and its request limits."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from onnx_exports import ALONE
from onnx_exports import IMAGES
from onnx_exports import SENTENCES
from onnx_exports import TOLERANCE

from zoo.export import onnx_runner

pytestmark = pytest.mark.tensorflow_only

# Run in a process that cannot import the training stack: `-I` (no
# PYTHONPATH, no user site), started in the copied folder, with a finder
# that refuses tensorflow, keras, jax, torch and zoo although the virtual
# environment has them all. It prints what the runner gives, as JSON.
ALONE_SCRIPT = """
import json, sys

REFUSED = ("tensorflow", "keras", "jax", "torch", "zoo", "tf2onnx")

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in REFUSED:
            raise ImportError(f"{name} is refused in this process")

sys.meta_path.insert(0, Refuse())
sys.path.insert(0, ".")
import run

request = json.loads(sys.argv[1])
server = run.load(".")
outputs = {}
for name, options in request["settings"].items():
    if request["images"]:
        results = server.caption(request["images"], **options)
        pieces = [r.words for r in results]
    else:
        results = server.translate(request["sentences"], **options)
        pieces = [r.target_pieces for r in results]
    outputs[name] = {
        "texts": [r.text for r in results],
        "pieces": pieces,
        "scores": [r.score for r in results],
    }
json.dump({
    "outputs": outputs,
    "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(REFUSED)),
}, sys.stdout)
"""
SETTINGS = {"greedy": {}, "beam": {"beam": 3, "length_penalty": 0.6}}


def alone(exports, preset, tmp_path):
    """The export folder of `preset` copied into an empty temporary folder."""
    folder = tmp_path / "export"
    shutil.copytree(exports(preset).out, folder)
    return folder


def run_alone(folder, *arguments, stdin=None):
    return subprocess.run(
        [sys.executable, "-I", *arguments],
        cwd=folder,
        input=stdin,
        capture_output=True,
        timeout=300,
    )


def image_files(folder, count):
    from PIL import Image

    paths = []
    for k in range(count):
        paths.append(folder / f"image{k}.png")
        Image.fromarray(IMAGES[k]).save(paths[-1])
    return paths


@pytest.mark.parametrize("preset", ALONE)
def test_the_folder_alone_gives_the_python_api_outputs(exports, preset, tmp_path):
    """The copied folder, in a process that cannot import tensorflow, keras
    or zoo: the tokens of the Keras model, greedy and beam, scores to 1e-4."""
    keras_side = exports(preset).keras_side
    folder = alone(exports, preset, tmp_path)
    captioning = isinstance(exports(preset).onnx_side, onnx_runner.Captioner)
    images = [str(p) for p in image_files(folder, 3)] if captioning else []
    request = {"sentences": SENTENCES, "images": images, "settings": SETTINGS}
    result = run_alone(folder, "-c", ALONE_SCRIPT, json.dumps(request))
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report = json.loads(result.stdout)
    assert report["loaded"] == []
    for name, options in SETTINGS.items():
        got = report["outputs"][name]
        if captioning:
            expected = keras_side.caption(IMAGES[:3], **options)
            pieces = [c.words for c in expected]
        else:
            expected = keras_side.translate(SENTENCES, **options)
            pieces = [t.target_pieces for t in expected]
        assert got["texts"] == [e.text for e in expected], name
        assert got["pieces"] == pieces, name
        np.testing.assert_allclose(got["scores"], [e.score for e in expected], atol=TOLERANCE)


def test_run_py_translates_arguments_and_standard_input(exports, tmp_path):
    keras_side = exports("rnnsearch_small").keras_side
    folder = alone(exports, "rnnsearch_small", tmp_path)
    expected = [t.text for t in keras_side.translate(SENTENCES[:3])]
    result = run_alone(folder, "run.py", *SENTENCES[:3])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == expected
    lines = f"{SENTENCES[0]}\n\n{SENTENCES[1]}\n".encode()
    result = run_alone(folder, "run.py", "--input", "-", stdin=lines)
    assert result.returncode == 0, result.stderr.decode()
    texts = [t.text for t in keras_side.translate(SENTENCES[:2])]
    assert result.stdout.decode().splitlines() == [texts[0], "", texts[1]]


def test_run_py_captions_image_files(exports, tmp_path):
    keras_side = exports("show_attend_tell_small").keras_side
    folder = alone(exports, "show_attend_tell_small", tmp_path)
    paths = image_files(folder, 2)
    result = run_alone(folder, "run.py", *map(str, paths))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [c.text for c in keras_side.caption(IMAGES[:2])]


@pytest.mark.parametrize("keep", [0.5, 0.0])
def test_a_truncated_graph_is_one_line_naming_it(exports, tmp_path, keep):
    """run.py on its own (nothing of zoo importable), with decoder_step.onnx
    cut to half, or to nothing."""
    folder = alone(exports, "rnnsearch_small", tmp_path)
    graph = folder / onnx_runner.DECODER_STEP
    graph.write_bytes(graph.read_bytes()[: int(graph.stat().st_size * keep)])
    result = run_alone(folder, "run.py", SENTENCES[0])
    error = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in error
    assert error.count("\n") == 1, error
    assert "cannot load" in error and graph.name in error
    assert "zoo export RUN_DIR --format onnx" in error


# --- the command line, in this process (`main(argv, folder)`) ----------------


@pytest.fixture
def translator_folder(exports):
    return exports("rnnsearch_small").out


@pytest.mark.parametrize("count", [0, 1, 300])
def test_input_file_gives_one_line_a_line_in_order(translator_folder, tmp_path, count):
    """0, 1 and 300 lines (more than one request of `max_batch`, which the
    folder's manifest sets to 256), a blank line every 7th."""
    lines = [
        "" if k % 7 == 3 else SENTENCES[k % len(SENTENCES)] for k in range(count)
    ]
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "out.txt"
    status = onnx_runner.main(
        ["--input", str(source), "--output", str(output), "--batch-size", "16"],
        folder=translator_folder,
    )
    assert status == 0
    texts = {s: t.text for s, t in zip(SENTENCES, onnx_runner.load(translator_folder).translate(SENTENCES))}
    assert output.read_text(encoding="utf-8").splitlines() == [
        texts[line] if line else "" for line in lines
    ]


def test_invalid_utf8_is_one_line_naming_the_line_and_no_output(
    translator_folder, tmp_path, capsys
):
    source = tmp_path / "in.txt"
    source.write_bytes(SENTENCES[0].encode() + b"\n" + b"caf\xe9 au lait\n")
    output = tmp_path / "out.txt"
    status = onnx_runner.main(["--input", str(source), "--output", str(output)], folder=translator_folder)
    assert status == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "line 2 is not valid UTF-8" in error
    assert list(tmp_path.iterdir()) == [source], "an output was left"


def test_n_best_and_alignments(translator_folder, tmp_path, capsys):
    output, alignments = tmp_path / "out.txt", tmp_path / "align.txt"
    status = onnx_runner.main(
        [*SENTENCES[:2], "--beam", "3", "--n-best", "2", "--output", str(output),
         "--alignments", str(alignments)],
        folder=translator_folder,
    )
    assert status == 0, capsys.readouterr().err
    translations = onnx_runner.load(translator_folder).translate(SENTENCES[:2], beam=3, n_best=2)
    expected = [
        f"{k} ||| {h.text} ||| log_prob= {h.score:.4f} finished= {int(h.finished)} "
        f"||| {h.penalized_score:.4f}"
        for k, t in enumerate(translations)
        for h in t.n_best
    ]
    assert output.read_text().splitlines() == expected
    assert alignments.read_text().splitlines() == [
        onnx_runner.pharaoh_alignment(t) for t in translations
    ]


def test_pharaoh_alignment_maps_pieces_to_words():
    """The argmax of each target piece's attention, mapped from pieces to
    words on both sides; special pieces link nothing."""
    translation = onnx_runner.Translation(
        text="",
        source_pieces=["the", "sun", "##ny", "day", "[EOS]"],
        target_pieces=["der", "sonn", "##ige", "tag", "[EOS]"],
        alignment=np.array(
            [
                [0.9, 0.0, 0.0, 0.0, 0.1],
                [0.0, 0.1, 0.8, 0.0, 0.1],
                [0.0, 0.7, 0.1, 0.1, 0.1],
                [0.1, 0.0, 0.0, 0.2, 0.7],  # peaks on EOS: its word is "day"
                [0.0, 0.0, 0.0, 0.0, 1.0],
            ]
        ),
        score=0.0,
    )
    assert onnx_runner.pharaoh_alignment(translation) == "0-0 1-1 2-2"


def test_bad_arguments_are_one_line(translator_folder, tmp_path, capsys):
    cases = [
        ([], "give inputs as arguments or --input"),
        (["--input", str(tmp_path / "missing.txt")], "does not exist"),
        (["a", "--output", str(tmp_path)], "is a folder"),
        (["a", "--n-best", "3"], "n_best 3 needs a beam of 3"),
        # The search flags go through the runner's one check (`check_search`).
        (["a", "--beam", "0"], "beam must be an int >= 1; received 0"),
        (["a", "--length-penalty", "-1"], "length_penalty must be a number >= 0; received -1.0"),
        (["a", "--coverage-penalty", "nan"], "coverage_penalty must be a number >= 0"),
        (["a", "--beam-stop", "never"], "stopping must be one of early, exact; received 'never'"),
    ]
    for argv, message in cases:
        assert onnx_runner.main(argv, folder=translator_folder) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error
    assert onnx_runner.main(["a"], folder=tmp_path) == 2
    assert "is not an ONNX export" in capsys.readouterr().err


# --- request limits ---------------------------------------------------------------


def with_limits(exports, preset, tmp_path, **limits):
    """A copy of `preset`'s folder whose manifest sets `limits`."""
    folder = alone(exports, preset, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["limits"].update(limits)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return onnx_runner.load(folder)


def test_a_request_over_max_batch_is_refused_naming_the_limit(exports, tmp_path):
    translator = with_limits(exports, "rnnsearch_small", tmp_path, max_batch=2)
    assert len(translator.translate(SENTENCES[:2])) == 2
    with pytest.raises(onnx_runner.RequestTooLarge) as error:
        translator.translate(SENTENCES[:3])
    assert "\n" not in str(error.value)
    assert "3 sentences, more than this export's max_batch=2" in str(error.value)


def test_oversized_images_are_refused_naming_the_limit(exports, tmp_path):
    paths = image_files(tmp_path, 1)
    captioner = with_limits(exports, "show_attend_tell_small", tmp_path, max_batch=1)
    with pytest.raises(onnx_runner.RequestTooLarge, match="max_batch=1"):
        captioner.caption(IMAGES[:2])
    size = paths[0].stat().st_size
    captioner.limits["max_image_bytes"] = size - 1
    with pytest.raises(onnx_runner.RequestTooLarge, match=f"max_image_bytes={size - 1}"):
        captioner.caption([str(paths[0])])
    captioner.limits.update(max_image_bytes=size, max_image_side=IMAGES.shape[1] - 1)
    with pytest.raises(onnx_runner.RequestTooLarge, match=f"max_image_side={IMAGES.shape[1] - 1}"):
        captioner.caption([str(paths[0])])
    captioner.limits["max_image_side"] = IMAGES.shape[1]
    assert len(captioner.caption([str(paths[0])])) == 1
