"""SavedModel export: the serving signatures, run where `zoo` can't be
imported, give the Python API's outputs; the graph detokenizer is `decode`;
bad runs and outputs are refused in one line."""

import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from cli_checks import assert_one_line_error
from cli_checks import run_cli

import zoo
from zoo import cli
from zoo import data
from zoo.export import saved_model as export
from zoo.export.onnx_runner import DEFAULT_LIMITS
from zoo import registry
from zoo import runs
from zoo.tasks import write_run_manifest
from zoo.training import untrained as training
from zoo.data import captions as caption_data
from zoo.data.sentencepiece_tokenizer import SentencePieceTokenizer
from zoo.data.wordpiece_tokenizer import TextTokenizer
from tiny_configs import TINY

pytestmark = pytest.mark.tensorflow_only

# The translation run reads at most this many source pieces (its training
# max_length), so the export's default bound is small enough to test.
MAX_INPUT_LENGTH = 12
# The captioner's export limits: its served request (4 images of 64 x 64,
# a few kB each) is exactly at them, so one more image or pixel is over.
CAPTION_LIMITS = {"max_batch": 4, "max_image_bytes": 100_000, "max_image_side": 64}


def write_run(out, preset, sentences, targets=None, max_length=None):
    """A complete, untrained run directory of `preset`, with vocabularies
    learned from the sentences (fitting it would only slow the test; export
    and the Python API must agree on any weights)."""
    source = TextTokenizer.train(sentences, 200)
    target = TextTokenizer.train(targets or sentences, 200)
    return training.write_untrained_run(
        out, preset, target, source,
        training_overrides=None if max_length is None else {"max_length": max_length},
    )


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
    pairs = data.synthetic_splits(300, 0, 0)["train"]
    return write_run(
        tmp_path_factory.mktemp("runs") / "rnnsearch",
        "rnnsearch_small",
        [s for s, _ in pairs],
        [t for _, t in pairs],
        max_length=MAX_INPUT_LENGTH,
    )


# Cased, accented German and English: a SentencePiece run must read and
# write them as they are.
CASED_PAIRS = [
    ("A girl runs across the street.", "Ein Mädchen läuft über die Straße."),
    ("Two men wear big green hats.", "Zwei Männer tragen große, grüne Hüte."),
    ("The dog plays (outside) in the snow?", "Der Hund spielt (draußen) im Schnee?"),
]


@pytest.fixture(scope="module")
def sentencepiece_run(tmp_path_factory):
    """An untrained, tiny run whose vocabularies are SentencePiece models."""
    source = SentencePieceTokenizer.train([s for s, _ in CASED_PAIRS] * 5, 60)
    target = SentencePieceTokenizer.train([t for _, t in CASED_PAIRS] * 5, 60)
    return training.write_untrained_run(
        tmp_path_factory.mktemp("runs") / "sentencepiece", "rnnsearch_small", target, source,
        model_overrides=TINY["rnnsearch"], training_overrides={"max_length": MAX_INPUT_LENGTH},
    )


@pytest.fixture(scope="module")
def caption_run(tmp_path_factory):
    examples = caption_data.synthetic_captions(40)
    return write_run(
        tmp_path_factory.mktemp("runs") / "captions",
        "show_attend_tell_small",
        [c for example in examples for c in example.captions],
    )


# Runs the signatures in a process that can't import zoo: `-I` (no
# PYTHONPATH, no user site, not the script's folder on sys.path) from an
# empty folder, and a finder that refuses `zoo` even though the virtual
# environment has it installed.
SERVE = """
import json, sys

class RefuseZoo:
    def find_spec(self, name, path=None, target=None):
        if name == "zoo" or name.startswith("zoo."):
            raise ImportError("zoo is refused in this process")

sys.meta_path.insert(0, RefuseZoo())
try:
    import zoo
    refused = None
except ImportError as error:
    refused = str(error)

import numpy as np
import tensorflow as tf
import tensorflow_text  # the tokenizer ops

request = json.load(open(sys.argv[1]))
translator = tf.saved_model.load(request["translator"])
captioner = tf.saved_model.load(request["captioner"])
cased = tf.saved_model.load(request["sentencepiece"]).signatures["translate"]
cased = cased(text=tf.constant(request["cased"]))
translate = translator.signatures["translate"]
text = translate(text=tf.constant(request["sentences"]))
long = translate(text=tf.constant([request["long"], request["prefix"]]))
caption = captioner.signatures["caption"](
    images=tf.constant([open(path, "rb").read() for path in request["images"]])
)
arrays = np.load(request["arrays"])
np.savez(
    request["logits"],
    translation=translator.signatures["logits"](
        source=tf.constant(arrays["source"]), target_in=tf.constant(arrays["target_in"])
    )["logits"].numpy(),
    caption=captioner.signatures["logits"](
        image=tf.constant(arrays["image"]), target_in=tf.constant(arrays["caption_in"])
    )["logits"].numpy(),
)
json.dump(
    {
        "refused": refused,
        "zoo_loaded": any(name.split(".")[0] == "zoo" for name in sys.modules),
        "translations": [t.decode() for t in text["translation"].numpy()],
        "scores": text["score"].numpy().tolist(),
        "long": [t.decode() for t in long["translation"].numpy()],
        "captions": [t.decode() for t in caption["caption"].numpy()],
        "caption_scores": caption["score"].numpy().tolist(),
        "cased": [t.decode() for t in cased["translation"].numpy()],
        "cased_scores": cased["score"].numpy().tolist(),
    },
    sys.stdout,
)
"""

SENTENCES = [
    "the small dog sees a cat.",
    "",
    "a red bird, the big house!",
    "Zzyzx qwv",
]


@pytest.fixture(scope="module")
def served(translation_run, caption_run, sentencepiece_run, tmp_path_factory):
    """Exports both runs (with beam search) and runs every
    signature once in a process without zoo; returns what it needs and got."""
    folder = tmp_path_factory.mktemp("served")
    translator = zoo.load(translation_run)
    captioner = zoo.load(caption_run)
    translator_out = folder / "translator"
    # Beam search as the CLI exports it: traced with an unknown batch and
    # source length, which is where TensorFlow's scan once failed.
    assert cli.main(["export", str(translation_run), "--out", str(translator_out), "--beam", "3"]) == 0
    captioner_out = folder / "captioner"
    captioner_out.mkdir()
    (captioner_out / "stale.txt").write_text("an older export")
    export.export_saved_model(
        caption_run, captioner_out, beam=2, length_penalty=0.6, overwrite=True,
        limits=CAPTION_LIMITS,
    )

    export.export_saved_model(sentencepiece_run, folder / "sentencepiece")

    source = translator.source_tokenizer
    long = " ".join(["the small dog sees a cat and"] * 20000)  # 0.6 MB
    prefix_ids = source.encode([long])[0][:MAX_INPUT_LENGTH]
    prefix = source.decode(prefix_ids)
    assert source.encode([prefix])[0] == prefix_ids  # the prefix reads as those pieces

    examples = caption_data.synthetic_captions(3, seed=7)
    images = [folder / f"image{i}.png" for i in range(3)]
    for path, example in zip(images, examples):
        path.write_bytes(tf.io.encode_png(example.image).numpy())
    images.append(folder / "image3.jpg")
    images[-1].write_bytes(tf.io.encode_jpeg(examples[1].image, quality=80).numpy())
    assert len(images) == CAPTION_LIMITS["max_batch"]
    assert max(path.stat().st_size for path in images) < CAPTION_LIMITS["max_image_bytes"]

    rng = np.random.default_rng(0)
    arrays = {
        "source": rng.integers(4, translator.model.source_vocabulary_size, (3, 7)).astype("int32"),
        "target_in": rng.integers(4, translator.model.target_vocabulary_size, (3, 5)).astype(
            "int32"
        ),
        "image": rng.random((2, captioner.image_size, captioner.image_size, 3), "float32"),
        "caption_in": rng.integers(4, captioner.model.target_vocabulary_size, (2, 4)).astype(
            "int32"
        ),
    }
    arrays["source"][0, 5:] = 0  # padding
    np.savez(folder / "arrays.npz", **arrays)
    request = {
        "translator": str(translator_out),
        "captioner": str(captioner_out),
        "sentencepiece": str(folder / "sentencepiece"),
        "cased": [s for s, _ in CASED_PAIRS] + ["", "Zwei  Männer\u00a0und ωμέγα"],
        "sentences": SENTENCES,
        "long": long,
        "prefix": prefix,
        "images": [str(path) for path in images],
        "arrays": str(folder / "arrays.npz"),
        "logits": str(folder / "logits.npz"),
    }
    (folder / "request.json").write_text(json.dumps(request))
    (folder / "serve.py").write_text(SERVE)
    empty = tmp_path_factory.mktemp("cwd")
    result = subprocess.run(
        [sys.executable, "-I", str(folder / "serve.py"), str(folder / "request.json")],
        cwd=empty,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        "folder": folder,
        "translation_run": translation_run,
        "sentencepiece_run": sentencepiece_run,
        "translator": translator,
        "captioner": captioner,
        "images": images,
        "arrays": arrays,
        "logits": dict(np.load(folder / "logits.npz")),
        "out": json.loads(result.stdout),
    }


def test_signatures_run_without_zoo(served):
    assert served["out"]["refused"] == "zoo is refused in this process"
    assert not served["out"]["zoo_loaded"]


def test_overwrite_replaces_the_output_and_leaves_no_temporary(served):
    folder = served["folder"]
    assert (folder / "captioner" / "saved_model.pb").is_file()
    assert not (folder / "captioner" / "stale.txt").exists()
    assert not [path.name for path in folder.iterdir() if path.name.startswith(".")]


def test_translate_signature_gives_the_translations_of_zoo_translate(served, capsys):
    code, out, _ = run_cli(
        capsys, "translate", str(served["translation_run"]), *SENTENCES, "--beam", "3"
    )
    assert code == 0
    printed = out.split("\n")[:-1]  # one line a sentence, empty ones too
    assert served["out"]["translations"] == printed
    expected = served["translator"].translate(SENTENCES, beam=3, length_penalty=0.6)
    assert printed == [t.text for t in expected]
    np.testing.assert_allclose(
        served["out"]["scores"], [t.score for t in expected], rtol=1e-5, atol=1e-4
    )


def test_sentencepiece_run_serves_the_python_api_translations(served):
    """Tokenization (cased, accented, an unknown character, odd white space)
    and detokenization in the graph are the Python tokenizers'."""
    translator = zoo.load(served["sentencepiece_run"])
    assert isinstance(translator.source_tokenizer, SentencePieceTokenizer)
    request = [s for s, _ in CASED_PAIRS] + ["", "Zwei  Männer\u00a0und ωμέγα"]
    expected = translator.translate(request)
    assert served["out"]["cased"] == [t.text for t in expected]
    np.testing.assert_allclose(
        served["out"]["cased_scores"], [t.score for t in expected], rtol=1e-5, atol=1e-4
    )
    # The target model decodes the graph's output pieces: its own text comes
    # back as written, case and accents kept.
    target = translator.target_tokenizer
    ids = target.encode([t for _, t in CASED_PAIRS])
    width = max(map(len, ids))
    rows = np.array([row + [0] * (width - len(row)) for row in ids], "int32")
    assert [t.decode() for t in target.detokenize(rows).numpy()] == [t for _, t in CASED_PAIRS]


def test_a_wordpiece_run_from_before_the_tokenizer_setting_still_loads(translation_run, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for path in translation_run.iterdir():
        if path.is_file() and path.name != runs.MANIFEST:  # nor had runs a manifest then
            (old / path.name).write_bytes(path.read_bytes())
    config = runs.read_json(old / runs.CONFIG)
    del config["training"]["tokenizer"], config["training"]["shared_vocabulary"]
    runs.write_json(old / runs.CONFIG, config)
    translator = zoo.load(old)
    assert isinstance(translator.source_tokenizer, TextTokenizer)
    assert translator.target_tokenizer.vocabulary == TextTokenizer.load(
        translation_run / runs.TARGET_VOCABULARY
    ).vocabulary


def test_caption_signature_gives_the_python_beam_captions(served):
    expected = served["captioner"].caption_files(served["images"], beam=2, length_penalty=0.6)
    assert served["out"]["captions"] == [c.text for c in expected]
    np.testing.assert_allclose(
        served["out"]["caption_scores"], [c.score for c in expected], rtol=1e-5, atol=1e-4
    )


def test_logits_signatures_are_the_teacher_forced_logits(served):
    arrays = served["arrays"]
    translation = served["translator"].model(
        {"source": arrays["source"], "target_in": arrays["target_in"]}
    )
    caption = served["captioner"].model(
        {"image": arrays["image"], "target_in": arrays["caption_in"]}
    )
    np.testing.assert_allclose(served["logits"]["translation"], translation, atol=1e-5)
    np.testing.assert_allclose(served["logits"]["caption"], caption, atol=1e-5)


def test_long_input_is_cut_to_max_input_length_pieces(served):
    long_translation, prefix_translation = served["out"]["long"]
    assert long_translation == prefix_translation
    # The Python API makes the same cut (its training max_length).
    assert served["translator"].max_source_length == MAX_INPUT_LENGTH


# --- the graph detokenizer ---------------------------------------------------

TRICKY_VOCABULARY = [
    "[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "man", "##s", "t", "-", "shirt",
    ".", ",", "'", "(", ")", "„", "“", "”", "/", "##", "##.", "%", "?", "ä",
    "##ä", "x", "[", "]", "’", "##-", "!",
]  # fmt: skip


def test_detokenize_is_decode_on_tricky_sequences():
    tokenizer = TextTokenizer(TRICKY_VOCABULARY)
    ids = {token: i for i, token in enumerate(TRICKY_VOCABULARY)}
    written = [
        ["a", "man", "##s", ",", "in", "a", "t", "-", "shirt", "."],
        ["„", "a", "“", "man", "'", "s", "(", "x", ")", "!"],
        ["##s", "a", "##ä", "##-", "x", "/", "##-", "%", "?"],  # "/-" is not punctuation
        ["[BOS]", "a", "[PAD]", "[UNK]", "##", "##.", "[EOS]", "man"],
        ["[EOS]", "a"],
        ["-", "-", "’", "[", "a", "]", "”", "x"],
    ]
    written = [[ids.get(token, ids["[UNK]"]) for token in row] for row in written]
    width = max(map(len, written))
    rows = np.array([row + [0] * (width - len(row)) for row in written], "int32")
    random_rows = np.random.default_rng(0).integers(0, len(TRICKY_VOCABULARY), (500, 9))
    for batch in (rows, random_rows.astype("int32"), np.zeros((2, 0), "int32")):
        got = [text.decode("utf-8") for text in tokenizer.detokenize(batch).numpy()]
        assert got == [tokenizer.decode(row) for row in batch]
    assert got == ["", ""]


# --- refusals ----------------------------------------------------------------


def test_incomplete_run_directory_is_one_line(capsys, translation_run, tmp_path):
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    for name in (runs.CONFIG, runs.SOURCE_VOCABULARY, runs.TARGET_VOCABULARY):
        (incomplete / name).write_bytes((translation_run / name).read_bytes())
    code, _, err = run_cli(capsys, "export", str(incomplete), "--out", str(tmp_path / "out"))
    assert_one_line_error(code, err, "incomplete", runs.WEIGHTS)
    assert not (tmp_path / "out").exists()


def test_unknown_stopping_rule_is_refused_naming_it(translation_run, tmp_path):
    with pytest.raises(export.ExportError, match="received 'never'"):
        export.export_saved_model(translation_run, tmp_path / "out", beam=2, stopping="never")
    assert not (tmp_path / "out").exists()


def test_existing_output_is_refused_unless_overwrite(capsys, caption_run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run_cli(capsys, "export", str(caption_run), "--out", str(out))
    assert_one_line_error(code, err, str(out), "--overwrite")
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("format", ["saved_model", "onnx"])
def test_an_output_that_cannot_be_written_is_one_line(capsys, translation_run, tmp_path, format):
    blocker = tmp_path / "notes.txt"  # a file where the output's folder should be
    blocker.write_text("keep me")
    out = blocker / "export"
    code, _, err = run_cli(capsys, "export", str(translation_run), "--format", format, "--out", str(out))
    assert_one_line_error(code, err, "cannot write --out", str(out))
    assert blocker.read_text() == "keep me"


@pytest.mark.parametrize(
    "run, policy, words",
    [
        ("translation_run", "mixed_float16", ["float16 computation", "float32"]),
        ("caption_run", "float64", ["show_attend_tell", "builds only under float32"]),
    ],
)
def test_unexportable_dtype_policy_is_one_line(capsys, request, tmp_path, run, policy, words):
    copy = tmp_path / "run"
    copy.mkdir()
    for path in request.getfixturevalue(run).iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    config = runs.read_json(copy / runs.CONFIG)
    config["model"]["dtype"] = policy
    runs.write_json(copy / runs.CONFIG, config)
    write_run_manifest(copy)
    code, _, err = run_cli(capsys, "export", str(copy), "--out", str(tmp_path / "out"))
    assert_one_line_error(code, err, repr(policy), *words)
    assert not (tmp_path / "out").exists()


# --- request limits ------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(served):
    """The two exports of `served`, loaded in this process."""
    folder = served["folder"]
    return {
        "translator": tf.saved_model.load(str(folder / "translator")),
        "captioner": tf.saved_model.load(str(folder / "captioner")),
    }


def refusal(message):
    """`pytest.raises` for a request refused with exactly `message`."""
    return pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(f"[{message}]"))


def test_limits_signature_gives_the_limits_of_the_export(loaded):
    def limits(name):
        return {key: int(value) for key, value in loaded[name].signatures["limits"]().items()}

    assert limits("translator") == {"max_batch": DEFAULT_LIMITS["max_batch"]}
    assert limits("captioner") == CAPTION_LIMITS


def test_a_request_over_max_batch_is_refused_naming_the_limit(loaded, served):
    """(The served requests, 4 images at CAPTION_LIMITS' max_batch, show
    that a request at the limit is served.)"""
    over = DEFAULT_LIMITS["max_batch"] + 1
    translate = loaded["translator"].signatures["translate"]
    with refusal(
        f"request has {over} sentences, more than max_batch={DEFAULT_LIMITS['max_batch']}; "
        "split it into smaller requests"
    ):
        translate(text=tf.constant(["the small dog sees a cat."] * over))
    images = [path.read_bytes() for path in served["images"]]
    caption = loaded["captioner"].signatures["caption"]
    with refusal("request has 5 images, more than max_batch=4; split it into smaller requests"):
        caption(images=tf.constant(images + images[:1]))


def test_an_image_over_max_image_bytes_is_refused_before_decoding(loaded, served):
    # Bytes that don't decode: the refusal must come first.
    too_long = b"\0" * (CAPTION_LIMITS["max_image_bytes"] + 1)
    caption = loaded["captioner"].signatures["caption"]
    with refusal(
        f"images[1] has {len(too_long)} bytes, more than max_image_bytes=100000; "
        "send a smaller file"
    ):
        caption(images=tf.constant([served["images"][0].read_bytes(), too_long]))


def image_file(image_format, height, width):
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype="uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, image_format)
    return buffer.getvalue()


def header_only(image_format, height, width):
    """An image file cut to its header: it declares its size but won't decode."""
    contents = image_file(image_format, height, width)
    if image_format == "JPEG":
        # Up to the end of the scan header (what libjpeg reads for the
        # shape), without the scan's data.
        scan = contents.index(b"\xff\xda")
        return contents[: scan + 2 + int.from_bytes(contents[scan + 2 : scan + 4], "big")]
    return contents[: {"PNG": 33, "GIF": 13, "BMP": 54}[image_format]]


def png_declaring(height, width):
    """A valid 64 x 64 PNG whose IHDR says `height` x `width` (its CRC no
    longer matches, so it won't decode)."""
    contents = bytearray(image_file("PNG", 64, 64))
    contents[16:24] = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    return bytes(contents)


@pytest.mark.parametrize(
    "make, height, width",
    [
        (lambda: image_file("PNG", 64, 65), 64, 65),
        (lambda: image_file("WEBP", 65, 64), 65, 64),  # checked after decoding
        (lambda: png_declaring(100_000, 64), 100_000, 64),
        (lambda: header_only("JPEG", 64, 70), 64, 70),
        (lambda: header_only("PNG", 70, 3), 70, 3),
        (lambda: header_only("GIF", 3, 70), 3, 70),
        (lambda: header_only("BMP", 70, 70), 70, 70),
    ],
    ids=["png", "webp", "png-patched-ihdr", "jpeg-header", "png-header", "gif-header", "bmp-header"],
)
def test_an_image_over_max_image_side_is_refused_naming_the_limit(
    loaded, served, make, height, width
):
    """Files whose header is over the limit but whose data doesn't decode
    are refused with the limit, so their header is read before decoding."""
    contents = make()
    caption = loaded["captioner"].signatures["caption"]
    with refusal(
        f"images[1] is {height}x{width} pixels (height x width), more than "
        "max_image_side=64; send a smaller image"
    ):
        caption(images=tf.constant([served["images"][0].read_bytes(), contents]))


def test_header_only_files_do_not_decode():
    """What makes the header checks above prove that the header is read
    (the order of the check and the decode is the next test's)."""
    for contents in [png_declaring(100_000, 64)] + [
        header_only(image_format, 70, 70) for image_format in ("JPEG", "PNG", "GIF", "BMP")
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.io.decode_image(contents, channels=3, expand_animations=False)


def control_inputs(signature, op_type):
    """For each node of `op_type` in the signature's functions, the op types
    of the nodes it waits for (its control inputs)."""
    found = []
    for function in signature.graph.as_graph_def().library.function:
        ops = {node.name: node.op for node in function.node_def}
        for node in function.node_def:
            if node.op == op_type:
                found.append(
                    {ops.get(name[1:]) for name in node.input if name.startswith("^")}
                )
    return found


def test_the_limits_are_checked_before_reading_the_request(loaded):
    """A decode op is stateless, free to run before an assertion it doesn't
    wait for: the images' decoding loop and each image's decode wait for
    the checks."""
    caption = loaded["captioner"].signatures["caption"]
    # The search's loops are While ops too: one of them is the decoding loop.
    assert any("Assert" in ops for ops in control_inputs(caption, "While"))
    decodes = control_inputs(caption, "DecodeImage")
    assert decodes and all("Assert" in ops for ops in decodes), decodes


@pytest.mark.parametrize(
    "limits, words",
    [
        ({"max_images": 3}, ["unknown limit 'max_images'", "max_batch, max_image_bytes"]),
        ({"max_batch": 0}, ["limit max_batch must be an int >= 1", "received 0"]),
        ({"max_image_side": 8.0}, ["limit max_image_side", "received 8.0"]),
    ],
)
def test_bad_limits_are_refused_in_one_line(caption_run, tmp_path, limits, words):
    with pytest.raises(export.ExportError) as raised:
        export.export_saved_model(caption_run, tmp_path / "out", limits=limits)
    assert "\n" not in str(raised.value)
    for word in words:
        assert word in str(raised.value)
    assert not (tmp_path / "out").exists()
