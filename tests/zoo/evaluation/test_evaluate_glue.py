"""The glue of `zoo evaluate`: what `Translator` and `Captioner` do between
the search and the metrics, checked on hand-made search outputs whose
alignment, localisation and scores are known.

The search is replaced by a function that returns a fixed `DecodeResult`,
so these tests hold the pairing of produced pieces with attention steps,
the reshape to the feature grid, the source pieces, the order of the
sentences and the normalisation of the references, not the model.
"""

import dataclasses

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from zoo.evaluation import caption_metrics
from zoo.inference.captioner import Captioner
from zoo.inference.search_settings import SearchSettings
from zoo.data import TextTokenizer
from zoo.data.captions import SceneObject
from zoo.recipes.decoding import DecodeResult
from zoo.inference.translator import Translator

pytestmark = pytest.mark.tensorflow_only  # the tokenizers run tensorflow-text

RESERVED = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
PAD, EOS = 0, 3


def decode_result(tokens, attention):
    """A `DecodeResult` holding `tokens` `[B, L]` and `attention` `[B, L, S]`."""
    tokens = np.asarray(tokens, "int32")
    batch = len(tokens)
    lengths = np.array([list(row).index(EOS) + 1 for row in tokens], "int32")
    return DecodeResult(
        tokens=tokens,
        lengths=lengths,
        scores=-np.arange(1, batch + 1, dtype="float32"),
        attention=np.asarray(attention, "float32"),
        finished=np.ones((batch,), bool),
        num_steps=np.int32(tokens.shape[1]),
    )


def padded(rows, width):
    return [row + [PAD] * (width - len(row)) for row in rows]


# ----------------------------------------------------------------- captioning


@dataclasses.dataclass
class StubCaptionModel:
    """What `Captioner` reads of a model: the special ids and the grid."""

    image_size: int = 16
    grid_shape: tuple = (2, 2)
    eos_id: int = EOS
    pad_id: int = PAD


@dataclasses.dataclass
class Example:
    image: np.ndarray
    captions: list
    objects: tuple


CAPTION_VOCABULARY = RESERVED + ["a", "red", "circle", "blue", "square", "above"]
# A red circle in the top-right quarter of a 16x16 image, a blue square in
# the bottom-left one: grid cells 1 and 2 of the 2x2 grid in row-major
# order, which a transposed reshape would swap.
OBJECTS = (
    SceneObject("circle", "red", "small", (8, 0, 16, 8)),
    SceneObject("square", "blue", "small", (0, 8, 8, 16)),
)
CIRCLE_CELL, SQUARE_CELL = 1, 2
CAPTION = ["a", "red", "circle", "above", "a", "blue", "square", "[EOS]"]


@pytest.fixture(autouse=True)
def without_meteor(monkeypatch):
    """METEOR's Java start-up is most of an evaluation's time, and its value
    is tested in test_caption_metrics; here it is skipped as without Java."""

    def unavailable(*args, **kwargs):
        raise caption_metrics.MeteorUnavailable("skipped in this test")

    monkeypatch.setattr(caption_metrics, "meteor", unavailable)


def one_hot_cells(cells, n_cells=4):
    return np.eye(n_cells, dtype="float32")[cells]


def stub_captioner(cells):
    """A captioner whose search produces `CAPTION` for every image, step t
    attending to grid cell `cells[t]` (flattened, row-major)."""
    tokenizer = TextTokenizer(CAPTION_VOCABULARY)
    captioner = Captioner(StubCaptionModel(), tokenizer)
    ids = [CAPTION_VOCABULARY.index(word) for word in CAPTION]
    attention = one_hot_cells(cells)

    def search(images):
        batch = len(images)
        return decode_result([ids] * batch, np.stack([attention] * batch))

    captioner._searches[SearchSettings()] = search  # the greedy search's place
    return captioner


def caption_examples(n=2):
    image = np.zeros((16, 16, 3), "uint8")
    # Uppercase and spaced punctuation: only the tokenizer's normalisation
    # makes these references equal to the produced caption.
    references = ["A red circle above a blue square", "A RED CIRCLE ABOVE A BLUE SQUARE"]
    return [Example(image, references, OBJECTS) for _ in range(n)]


def test_each_word_is_localised_with_its_own_steps_attention():
    # The steps next to each object word look at the other object, so
    # pairing a word with the attention of the step before or after it
    # puts its mass outside the box.
    cells = [SQUARE_CELL, SQUARE_CELL, CIRCLE_CELL, SQUARE_CELL,
             CIRCLE_CELL, CIRCLE_CELL, SQUARE_CELL, CIRCLE_CELL]
    result = stub_captioner(cells).evaluate(caption_examples())
    assert result["localisation"] == {
        "object_words": 4,
        "mean_mass_in_box": 1.0,
        "peak_in_box": 1.0,
        "unmatched_words": 0,
    }


def test_attention_maps_have_the_grid_rows_of_the_image():
    cells = [0, 0, CIRCLE_CELL, 0, 0, 0, SQUARE_CELL, 0]
    caption = stub_captioner(cells).caption(np.zeros((1, 16, 16, 3), "uint8"))[0]
    assert caption.words == CAPTION
    assert caption.attention.shape == (8, 2, 2)
    # The circle is in the top row, right column; the square bottom, left.
    np.testing.assert_array_equal(caption.attention[2], [[0, 1], [0, 0]])
    np.testing.assert_array_equal(caption.attention[6], [[0, 0], [1, 0]])


def test_a_localisation_that_looks_at_the_wrong_object_scores_zero():
    # The converse of the first test: the object words attend to the other
    # object, their neighbours to the right one.
    cells = [CIRCLE_CELL, CIRCLE_CELL, SQUARE_CELL, CIRCLE_CELL,
             SQUARE_CELL, SQUARE_CELL, CIRCLE_CELL, SQUARE_CELL]
    localisation = stub_captioner(cells).evaluate(caption_examples())["localisation"]
    assert localisation["mean_mass_in_box"] == 0.0
    assert localisation["peak_in_box"] == 0.0


def test_caption_references_are_normalised_like_the_captions():
    cells = [0] * len(CAPTION)
    scores = stub_captioner(cells).evaluate(caption_examples())["scores"]
    assert scores["bleu4"] == pytest.approx(100.0)
    assert scores["bleu1"] == pytest.approx(100.0)


# ---------------------------------------------------------------- translation

SOURCE_VOCABULARY = RESERVED + ["ein", "hund", "katze", "läuft", "schläft", "."]
TARGET_VOCABULARY = RESERVED + ["a", "dog", "cat", "runs", "sleeps", "."]
# source sentence -> the target pieces the stub search produces for it
SOURCES = ["Ein Hund läuft.", "Katze.", "Ein Hund schläft ."]
PRODUCED = {
    ("ein", "hund", "läuft", "."): ["a", "dog", "runs", ".", "[EOS]"],
    ("katze", "."): ["cat", ".", "[EOS]"],
    ("ein", "hund", "schläft", "."): ["a", "cat", "sleeps", ".", "[EOS]"],
}


def attention_code(sentence, step, position):
    """The attention value the stub search writes: which sentence, which
    step, which source position."""
    return 100 * sentence + 10 * step + position


def stub_translator():
    """A translator whose search produces `PRODUCED[source]` for each row,
    with attention `attention_code(i, t, s)` for the source sentence i."""
    source_tokenizer = TextTokenizer(SOURCE_VOCABULARY)
    target_tokenizer = TextTokenizer(TARGET_VOCABULARY)
    translator = Translator(None, source_tokenizer, target_tokenizer)
    translator.model = StubCaptionModel()  # only eos_id and pad_id are read
    keys = list(PRODUCED)

    def search(source):
        rows, codes = [], []
        for row in np.asarray(source):
            pieces = tuple(SOURCE_VOCABULARY[i] for i in row if i != PAD)
            rows.append([TARGET_VOCABULARY.index(w) for w in PRODUCED[pieces]])
            sentence = keys.index(pieces)
            codes.append(
                [[attention_code(sentence, t, s) for s in range(source.shape[1])]
                 for t in range(6)]
            )
        return decode_result(padded(rows, 6), codes)

    translator._searches[SearchSettings()] = search  # the greedy search's place
    return translator


def test_each_translation_keeps_its_own_pieces_and_alignment():
    # Sorted by length, the three sentences are decoded as rows 1, 0, 2 of
    # one batch: each translation must come back to its sentence with its
    # own rows of the attention, cut to its pieces.
    translations = stub_translator().translate(SOURCES)
    for i, (key, translation) in enumerate(zip(PRODUCED, translations)):
        assert translation.source_pieces == list(key)
        assert translation.target_pieces == PRODUCED[key]
        expected = [[attention_code(i, t, s) for s in range(len(key))]
                    for t in range(len(PRODUCED[key]))]
        np.testing.assert_array_equal(translation.alignment, expected)
    assert [t.text for t in translations] == ["a dog runs.", "cat.", "a cat sleeps."]


def test_bleu_is_cased_against_the_raw_references_with_lowercased_beside_it():
    # The (lowercasing) WordPiece translations meet cased references: the
    # cased BLEU counts "A" and "CAT" as misses, the lowercased one does not.
    references = ["A dog runs.", "CAT.", "a dog sleeps."]
    result = stub_translator().evaluate(list(zip(SOURCES, references)))
    assert result["hypotheses"] == ["a dog runs.", "cat.", "a cat sleeps."]
    cased = BLEU().corpus_score(result["hypotheses"], [references])
    lowercased = BLEU().corpus_score(
        result["hypotheses"], [["a dog runs.", "cat.", "a dog sleeps."]]
    )
    assert result["bleu"].score == pytest.approx(cased.score)
    assert result["bleu_lowercased"].score == pytest.approx(lowercased.score)
    assert 0 < result["bleu"].score < result["bleu_lowercased"].score < 100
    assert "case:mixed" in result["bleu"].signature
    assert "case:lc" in result["bleu_lowercased"].signature
    # The three sources are 2 to 4 pieces long, one bucket (1-10 words),
    # scored cased.
    (bucket,) = [b for b in result["by_length"] if b.count]
    assert bucket.count == 3
    assert bucket.bleu == pytest.approx(cased.score)
