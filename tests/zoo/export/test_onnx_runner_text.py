"""The runner's tokenizers and image reading, against the package's.

`zoo.export.onnx_runner` (an export folder's `onnx_runner/`) writes WordPiece,
the SentencePiece calls and the image resize again without TensorFlow; here
each is held to `zoo.data.TextTokenizer`, `zoo.data.SentencePieceTokenizer`
and `zoo.data.load_image`, on the files their `save` writes and on image
files of every format `tf.io.decode_image` reads.
"""

import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from zoo.export import onnx_runner as runner

pytestmark = pytest.mark.tensorflow_only

# What the tokenizers learn from: case, umlauts and ß, German quotes,
# punctuation, hyphens, apostrophes, digits and CJK, often enough for
# WordPiece's learner (it keeps pieces seen at least 10 times).
TRAINING = [
    "Ein Mädchen läuft über die Straße.",
    "„Schön“, sagte er – und ging.",
    "A man's T-shirt costs 15,99 € (approx.)!",
    "Ärger, Öl, Übel: ÄÖÜ ß é É.",
    "東京と北京 are cities.",
    "Dr. Müller-Lüdenscheidt's car and/or bike.",
    "The cat sees a dog; the dog sees the cats.",
] * 12

# What both must tokenize alike: the training sentences, words out of the
# vocabulary, empty and blank text, words of around 100 bytes, every kind of
# white space and control character, compatibility forms NFKC changes,
# case that str.lower and casefold treat differently, and the special
# tokens' spellings.
CORPUS = sorted(set(TRAINING)) + [
    "",
    "   ",
    "Unknownword xyzzy QQQ Mädchenstraße",
    "a" * 150,
    "the" * 33,
    "the" * 34,
    "über" * 20,
    "no\u00a0break\u202fspaces\u2009here",
    "tab\tnew\nline\rreturn\fform\vvertical",
    "zero\u200bwidth\ufeffjoiner\u200d",
    "line\u2028separator\u3000ideographic",
    "control\x07bell\x85next",
    "İSTANBUL ΣΑΣ Straße STRASSE ẞ",
    "ﬁne ① ½ Ｆｕｌｌ ｗｉｄｔｈ",
    "e\u0301te\u0301 Ma\u0308dchen",
    "emoji 😀 here",
    "“quoted” and ‘single’ «guillemets»",
    "math ± × ÷ ^ $ ` ~ | < > @ # & * _ + =",
    "word... ...!? (a) [b] {c} 50% ¿qué?",
    "#hash ##tag [UNK] [PAD] [EOS]",
    "中文字符 한국어 日本語のテキスト",
]

JPEG_TOLERANCE = 0.04
IMAGE_TOLERANCE = 1e-5


def one_line(error):
    message = str(error.value)
    assert message and "\n" not in message
    return message


# --- WordPiece -----------------------------------------------------------------


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    """{"lowercase" | "cased": (package tokenizer, runner tokenizer)}, the
    runner's read from the file the package's `save` wrote."""
    from zoo.data import TextTokenizer

    folder = tmp_path_factory.mktemp("wordpiece")
    made = {}
    for name, lowercase in (("lowercase", True), ("cased", False)):
        package = TextTokenizer.train(TRAINING, 300, lowercase=lowercase)
        package.save(folder / f"{name}.vocab")
        made[name] = package, runner.load_tokenizer(folder / f"{name}.vocab")
    return made


@pytest.mark.parametrize("kind", ["lowercase", "cased"])
def test_wordpiece_encodes_as_the_package(wordpiece, kind):
    package, mine = wordpiece[kind]
    assert isinstance(mine, runner.WordPieceTokenizer)
    assert mine.lowercase == package.lowercase == (kind == "lowercase")
    assert mine.vocabulary_size == package.vocabulary_size
    assert [mine.id_to_token(i) for i in range(mine.vocabulary_size)] == package.vocabulary
    expected = package.encode(CORPUS)
    assert mine.encode(CORPUS) == expected
    # The corpus reaches every rule: unknown words, "##" pieces, and a
    # sentence whose words are all known.
    tokens = [package.id_to_token(i) for ids in expected for i in ids]
    assert "[UNK]" in tokens and any(t.startswith("##") for t in tokens)
    assert mine.encode([]) == []
    with pytest.raises(TypeError):
        mine.encode("one sentence")


@pytest.mark.parametrize("kind", ["lowercase", "cased"])
def test_wordpiece_decodes_as_the_package(wordpiece, kind):
    package, mine = wordpiece[kind]
    for ids in package.encode(CORPUS):
        assert mine.decode(ids) == package.decode(ids)
    # Arbitrary sequences: "##" pieces first, the special ids anywhere.
    rng = np.random.default_rng(0)
    special = [0, 1, 2, 3]
    for _ in range(300):
        ids = rng.integers(0, package.vocabulary_size, rng.integers(0, 12))
        ids[rng.random(ids.shape) < 0.2] = rng.choice(special)
        assert mine.decode(ids) == package.decode(ids), ids
        assert mine.decode(ids.tolist()) == package.decode(ids)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        mine.decode([4, package.vocabulary_size])
    with pytest.raises(ValueError, match="one sequence"):
        mine.decode([[4, 5]])


def test_wordpiece_rules_on_a_written_vocabulary(tmp_path):
    """A vocabulary that spells the test words: the rules by their output."""
    from zoo.data import TextTokenizer

    words = ["a", "##a", "é", "##é", "man", "'", "s", "t", "-", "shirt", ",", ".", "(", ")"]
    words += ["„", "“", "!", "straße", "und", "##s", "/", "or", "東", "京", "%", "5"]
    package = TextTokenizer(list(runner.SPECIAL_TOKENS) + words)
    package.save(tmp_path / "written.vocab")
    mine = runner.load_tokenizer(tmp_path / "written.vocab")
    assert mine.lowercase
    sentences = [
        "A MAN'S T-Shirt, (a)!",
        "„Straße“ und/or 5%.",
        "東京",
        "a" * 100,
        "a" * 101,
        "é" * 50,
        "é" * 51,
        "as ß",
    ]
    ids = mine.encode(sentences)
    assert ids == package.encode(sentences)
    unk = runner.SPECIAL_TOKENS.index("[UNK]")
    # Words of up to 100 UTF-8 bytes are spelled, longer ones are [UNK].
    assert [len(i) for i in ids[3:7]] == [100, 1, 50, 1] and ids[4] == ids[6] == [unk]
    assert ids[7] == [mine.encode(["a"])[0][0], words.index("##s") + 4, unk]
    texts = [mine.decode(i) for i in ids[:3]]
    assert texts == [package.decode(i) for i in ids[:3]]
    assert texts == ["a man's t-shirt, (a)!", "„straße“ und/or 5%.", "東 京"]


# --- SentencePiece --------------------------------------------------------------


@pytest.fixture(scope="module")
def sentencepiece(tmp_path_factory):
    from zoo.data import SentencePieceTokenizer

    folder = tmp_path_factory.mktemp("sentencepiece")
    package = SentencePieceTokenizer.train(TRAINING, 120)
    package.save(folder / "shared.model")
    return package, runner.load_tokenizer(folder / "shared.model")


def test_sentencepiece_as_the_package(sentencepiece):
    package, mine = sentencepiece
    assert isinstance(mine, runner.SentencePieceTokenizer)
    assert mine.vocabulary_size == package.vocabulary_size
    assert [mine.id_to_token(i) for i in range(mine.vocabulary_size)] == package.vocabulary
    expected = package.encode(CORPUS)
    assert mine.encode(CORPUS) == expected
    assert 1 in {i for ids in expected for i in ids}  # characters it never saw
    assert mine.encode([""]) == [[]] and mine.encode([]) == []
    for ids in expected:
        assert mine.decode(ids) == package.decode(ids)
    rng = np.random.default_rng(1)
    for _ in range(200):
        ids = rng.integers(0, package.vocabulary_size, rng.integers(0, 12))
        ids[rng.random(ids.shape) < 0.2] = rng.choice([0, 1, 2, 3])
        assert mine.decode(ids) == package.decode(ids), ids
    with pytest.raises(ValueError, match="outside the vocabulary"):
        mine.decode([4, -1])


# --- loading vocabulary files -----------------------------------------------


def test_load_tokenizers_reads_each_file_once(wordpiece, sentencepiece, tmp_path):
    wordpiece["cased"][0].save(tmp_path / "source.vocab")
    sentencepiece[0].save(tmp_path / "shared.model")
    tokenizers = runner.load_tokenizers(
        tmp_path, {"source": "source.vocab", "target": "shared.model", "both": "shared.model"}
    )
    assert tokenizers["target"] is tokenizers["both"]
    assert isinstance(tokenizers["source"], runner.WordPieceTokenizer)
    assert isinstance(tokenizers["target"], runner.SentencePieceTokenizer)


def test_unreadable_vocabularies(tmp_path):
    cases = {
        "missing.vocab": None,
        "latin1.vocab": "\n".join(runner.SPECIAL_TOKENS + ("Straße",)).encode("latin-1"),
        "unreserved.vocab": b"a\nb\n",
        "repeated.vocab": "\n".join(runner.SPECIAL_TOKENS + ("a", "a")).encode(),
        "broken.model": b"not a model",
        "missing.model": None,
    }
    for name, contents in cases.items():
        if contents is not None:
            (tmp_path / name).write_bytes(contents)
        with pytest.raises(runner.VocabularyError) as error:
            runner.load_tokenizer(tmp_path / name)
        assert name in one_line(error)
    (tmp_path / "words.txt").write_text("a\n")
    with pytest.raises(runner.VocabularyError, match=r"\.vocab or \.model") as error:
        runner.load_tokenizer(tmp_path / "words.txt")
    one_line(error)


# Runs the runner file itself where tensorflow, keras and zoo cannot be
# imported, first without sentencepiece and Pillow too, then with them.
WITHOUT_TENSORFLOW = textwrap.dedent(
    """
    import json, sys
    BLOCKED = {"tensorflow", "keras", "zoo", "tensorflow_text", "keras_hub", "sentencepiece", "PIL"}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked")

    sys.meta_path.insert(0, Block())
    folder, image, expected = sys.argv[1:]
    expected = json.loads(expected)
    # The runner as an export folder holds it (`write_runner`).
    sys.path.insert(0, folder)
    import run
    words = run.load_tokenizer(folder + "/words.vocab")
    assert words.encode(expected["sentences"]) == expected["wordpiece"]
    for call in (lambda: run.load_tokenizer(folder + "/shared.model"), lambda: run.load_image(image, 8)):
        try:
            call()
        except run.MissingPackageError as error:
            print(error)
    BLOCKED -= {"sentencepiece", "PIL"}
    shared = run.load_tokenizer(folder + "/shared.model")
    assert shared.encode(expected["sentences"]) == expected["sentencepiece"]
    print(json.dumps(run.load_image(image, 8).tolist()))
    assert not BLOCKED & {name.split(".")[0] for name in sys.modules}
    """
)


def test_the_runner_file_runs_without_tensorflow(wordpiece, sentencepiece, tmp_path):
    from zoo.data import load_image

    wordpiece["lowercase"][0].save(tmp_path / "words.vocab")
    sentencepiece[0].save(tmp_path / "shared.model")
    runner.write_runner(tmp_path)
    image = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (9, 12, 3), "uint8")).save(image)
    sentences = CORPUS[:8]
    expected = {
        "sentences": sentences,
        "wordpiece": wordpiece["lowercase"][0].encode(sentences),
        "sentencepiece": sentencepiece[0].encode(sentences),
    }
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW, str(tmp_path), str(image), json.dumps(expected)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    missing_sentencepiece, missing_pillow, pixels = done.stdout.splitlines()
    assert "shared.model" in missing_sentencepiece and "pip install sentencepiece" in missing_sentencepiece
    assert "image.png" in missing_pillow and "pip install pillow" in missing_pillow
    np.testing.assert_allclose(json.loads(pixels), load_image(image, 8), atol=IMAGE_TOLERANCE)


# --- images ----------------------------------------------------------------------


def save(path, array, **options):
    mode = options.pop("mode", None)
    image = Image.fromarray(array, mode) if mode else Image.fromarray(array)
    image.save(path, **options)
    return path


def assert_as_the_package(path, image_size, tolerance=IMAGE_TOLERANCE):
    from zoo.data import load_image

    expected = load_image(path, image_size)
    mine = runner.load_image(path, image_size)
    assert mine.dtype == np.float32 and mine.shape == (image_size, image_size, 3)
    np.testing.assert_allclose(mine, expected, atol=tolerance, rtol=0)
    np.testing.assert_array_equal(runner.load_image_bytes(path.read_bytes(), image_size), mine)
    return mine


@pytest.mark.parametrize("height, width", [(5, 7), (16, 16), (40, 23), (64, 64), (1, 3)])
@pytest.mark.parametrize("image_size", [8, 16])
def test_png_as_the_package(tmp_path, height, width, image_size):
    pixels = np.random.default_rng(height * width).integers(0, 256, (height, width, 3), "uint8")
    mine = assert_as_the_package(save(tmp_path / "image.png", pixels), image_size)
    if (height, width) == (image_size, image_size):
        np.testing.assert_allclose(mine, pixels / 255.0, atol=IMAGE_TOLERANCE)


def test_other_modes_and_formats_as_the_package(tmp_path):
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, (30, 20, 3), "uint8")
    indices = rng.integers(0, 256, (30, 20), "uint8")
    palette = Image.fromarray(indices, "P")
    palette.putpalette(rng.integers(0, 256, 768).tolist())
    files = [
        save(tmp_path / "gray.png", pixels[..., 0]),
        save(tmp_path / "rgba.png", rng.integers(0, 256, (30, 20, 4), "uint8")),
        save(tmp_path / "gray_alpha.png", rng.integers(0, 256, (30, 20, 2), "uint8"), mode="LA"),
        save(tmp_path / "sixteen_bits.png", rng.integers(0, 65536, (30, 20)).astype("uint16")),
        save(tmp_path / "one_bit.png", rng.integers(0, 2, (30, 20)).astype(bool)),
        save(tmp_path / "image.bmp", pixels),
        save(tmp_path / "lossless.webp", pixels, lossless=True),
    ]
    palette.save(tmp_path / "palette.png", transparency=5)
    palette.save(tmp_path / "image.gif")
    # TensorFlow reads a transparent pixel of a GIF as black.
    palette.save(tmp_path / "transparent.gif", transparency=int(indices[0, 0]))
    frames = [Image.fromarray(rng.integers(0, 256, (30, 20, 3), "uint8")).convert("P") for _ in range(3)]
    frames[0].save(tmp_path / "animated.gif", save_all=True, append_images=frames[1:])
    files += [tmp_path / n for n in ("palette.png", "image.gif", "transparent.gif", "animated.gif")]
    for path in files:
        assert_as_the_package(path, 16)


def test_a_gif_whose_first_frame_does_not_fill_its_screen(tmp_path):
    """TensorFlow's canvas is the frame's size, the frame at its offset."""
    indices = np.random.default_rng(3).integers(1, 200, (6, 4), "uint8")
    frame = Image.fromarray(indices, "P")
    frame.putpalette(np.random.default_rng(4).integers(0, 256, 768).tolist())
    buffer = io.BytesIO()
    frame.save(buffer, "GIF", transparency=int(indices[0, 0]))
    data = bytearray(buffer.getvalue())
    data[6:10] = (9).to_bytes(2, "little") + (11).to_bytes(2, "little")  # the screen
    start = data.index(b"\x2c")  # the first frame's descriptor: its offset
    data[start + 1 : start + 5] = (1).to_bytes(2, "little") + (2).to_bytes(2, "little")
    (tmp_path / "offset.gif").write_bytes(bytes(data))
    assert_as_the_package(tmp_path / "offset.gif", 8)


def test_jpeg_within_its_tolerance(tmp_path):
    import tensorflow as tf

    rows, columns = np.mgrid[0:120, 0:90]
    smooth = np.stack([columns * 2 % 256, rows * 2 % 256, (rows + columns) % 256], -1)
    noise = np.random.default_rng(5).integers(0, 256, (120, 90, 3))
    for name, pixels in (("smooth", smooth), ("noise", noise)):
        for quality in (75, 95):
            path = save(tmp_path / f"{name}{quality}.jpg", pixels.astype("uint8"), quality=quality)
            for image_size in (16, 64, 120):
                mine = assert_as_the_package(path, image_size, JPEG_TOLERANCE)
                # Exactly TensorFlow's reading with the accurate DCT.
                decoded = tf.io.decode_jpeg(path.read_bytes(), channels=3, dct_method="INTEGER_ACCURATE")
                resized = tf.image.resize(decoded, [image_size, image_size], antialias=True)
                expected = tf.clip_by_value(resized / 255.0, 0.0, 1.0).numpy()
                np.testing.assert_allclose(mine, expected, atol=IMAGE_TOLERANCE, rtol=0)


def test_limits_refuse_large_files_and_images(tmp_path):
    path = save(tmp_path / "image.png", np.zeros((40, 23, 3), "uint8"))
    size = path.stat().st_size
    runner.load_image(path, 8, {"max_image_bytes": size, "max_image_side": 40})
    with pytest.raises(runner.RequestTooLarge) as error:
        runner.load_image(path, 8, {"max_image_bytes": size - 1})
    assert all(part in one_line(error) for part in (str(path), "max_image_bytes", str(size - 1)))
    with pytest.raises(runner.RequestTooLarge) as error:
        runner.load_image_bytes(path.read_bytes(), 8, {"max_image_bytes": size - 1}, name="upload 3")
    assert "upload 3" in one_line(error) and "max_image_bytes" in one_line(error)
    with pytest.raises(runner.RequestTooLarge) as error:
        runner.load_image(path, 8, {"max_image_side": 39})
    assert all(part in one_line(error) for part in (str(path), "max_image_side=39", "23x40"))
    # The side is read from the header, before the pixels: a file whose
    # pixel data is cut short is refused for its side, not decoded.
    wide = save(tmp_path / "wide.png", np.zeros((1, 9000, 3), "uint8"))
    cut = tmp_path / "cut.png"
    cut.write_bytes(wide.read_bytes()[:60])
    with pytest.raises(runner.RequestTooLarge, match="max_image_side=8192"):
        runner.load_image(cut, 8)
    with pytest.raises(runner.InputError):
        runner.load_image(cut, 8, {"max_image_side": 9000})


def test_unreadable_images(tmp_path):
    from zoo.data import load_image
    from zoo.data.caption_readers import ImageError

    png = save(tmp_path / "image.png", np.zeros((16, 16, 3), "uint8")).read_bytes()
    (tmp_path / "text.png").write_text("not an image")
    (tmp_path / "cut.png").write_bytes(png[: len(png) // 2])
    # Pillow reads TIFF; TensorFlow, and so the runner, does not.
    save(tmp_path / "image.tiff", np.zeros((16, 16, 3), "uint8"))
    (tmp_path / "folder.png").mkdir()
    for name in ("missing.png", "folder.png", "text.png", "cut.png", "image.tiff"):
        with pytest.raises(runner.InputError) as error:
            runner.load_image(tmp_path / name, 8)
        assert str(tmp_path / name) in one_line(error)
        with pytest.raises(ImageError):
            load_image(tmp_path / name, 8)
    with pytest.raises(runner.InputError, match="upload 7: cannot be decoded") as error:
        runner.load_image_bytes(b"not an image", 8, name="upload 7")
    one_line(error)
