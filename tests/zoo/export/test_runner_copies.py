"""What the package-free runner (`zoo.export.onnx_runner`) writes again of
the package, held to the package's own: each copy here fails this test when
either side changes.

A copy of code is held by its source (`inspect.getsource`, docstrings and
comments left out, as `ast` reads it); one that is written differently (a
loop in place of keras ops, a tensor op in Python) by its behaviour on a
set of inputs; a constant by its value. The searches, the tokenizers' ids
and the image resize are held to the package's by their own tests
(`test_onnx_runner_search.py`, `test_onnx_runner_text.py`,
`test_onnx_export.py`).
"""

import ast
import dataclasses
import inspect
import textwrap

import numpy as np
import pytest

from zoo import runs
from zoo.evaluation import alignment
from zoo.export import onnx_runner as runner
from zoo.inference import captioner
from zoo.inference import translator
from zoo.recipes import contract
from zoo.recipes import decoding

pytestmark = pytest.mark.tensorflow_only


def code(obj):
    """The source of a function or class without its name and docstrings
    (and, as `ast` reads it, without comments), as one normalized text."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    tree.body[0].name = "_"
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


# --- constants ---------------------------------------------------------------

CONSTANTS = {
    "SPECIAL_TOKENS": (runner.SPECIAL_TOKENS, contract.SPECIAL_TOKENS),
    "VOCABULARY_SUFFIXES": (runner.VOCABULARY_SUFFIXES, runs.VOCABULARY_SUFFIXES),
    "SOURCE_WIDTH_MULTIPLE": (runner.SOURCE_WIDTH_MULTIPLE, translator.SOURCE_WIDTH_MULTIPLE),
    "STOPPING_RULES": (runner.STOPPING_RULES, decoding.STOPPING_RULES),
    "NEG_INF": (runner.NEG_INF, decoding.NEG_INF),
    "COVERAGE_FLOOR": (runner.COVERAGE_FLOOR, decoding.COVERAGE_FLOOR),
    "non-word pieces": (runner.alignment._NON_WORD_PIECES, alignment.NON_WORD_PIECES),
    "sentence end": (runner.serving._SENTENCE_END.pattern, translator._SENTENCE_END.pattern),
}


@pytest.mark.parametrize("name", CONSTANTS)
def test_the_runners_constants_are_the_packages(name):
    ours, theirs = CONSTANTS[name]
    assert ours == theirs


def test_the_wordpiece_constants_are_the_packages():
    from zoo.data import wordpiece_tokenizer as tokenizer

    assert runner.SUFFIX_INDICATOR == tokenizer.SUFFIX_INDICATOR
    for name in ("_ATTACH_LEFT", "_ATTACH_RIGHT", "_ATTACH_BOTH"):
        assert getattr(runner.tokenizers, name) == getattr(tokenizer, name), name


# --- code copied as it is ----------------------------------------------------


def test_join_words_is_the_packages():
    from zoo.data import wordpiece_tokenizer as tokenizer

    assert code(runner.tokenizers._join_words) == code(tokenizer._join_words)


def test_split_sentences_is_the_packages():
    assert code(runner.split_sentences) == code(translator.split_sentences)


def test_join_parts_is_the_packages():
    # The package reaches BlockAlignment through its module; nothing else differs.
    theirs = code(translator._join_parts).replace(
        "word_alignment.BlockAlignment(", "BlockAlignment("
    )
    assert code(runner._join_parts) == theirs


def test_the_length_note_is_zoo_translates():
    from zoo.cli import translate

    assert code(runner.cli._length_note) == code(translate.length_note)


def test_carried_state_keys_is_the_contracts():
    assert code(runner.beam._carried_state_keys) == code(contract.carried_state_keys)


def test_block_alignment_is_the_packages():
    """Each member the runner's BlockAlignment has is the package's."""
    ours = {
        name: member
        for name, member in vars(runner.BlockAlignment).items()
        if callable(member) or isinstance(member, property)
    }
    assert set(ours) >= {"__init__", "shape", "nbytes", "placed", "__array__"}
    for name, member in ours.items():
        theirs = vars(alignment.BlockAlignment)[name]
        if isinstance(member, property):
            member, theirs = member.fget, theirs.fget
        assert code(member) == code(theirs), name


# --- data classes: the same fields and defaults --------------------------------


def fields(cls):
    return [(f.name, f.default) for f in dataclasses.fields(cls)]


# The runner's fields beyond the package's: its Caption carries the n-best
# list that the package's Captioner returns beside the captions.
@pytest.mark.parametrize(
    "ours, theirs, more",
    [
        (runner.Hypothesis, translator.Hypothesis, []),
        (runner.Translation, translator.Translation, []),
        (runner.Caption, captioner.Caption, [("n_best", None)]),
    ],
    ids=["Hypothesis", "Translation", "Caption"],
)
def test_the_results_have_the_packages_fields(ours, theirs, more):
    assert fields(ours) == fields(theirs) + more


def test_decode_result_has_the_packages_fields():
    assert runner.DecodeResult._fields == decoding.DecodeResult._fields
    assert runner.DecodeResult._field_defaults == decoding.DecodeResult._field_defaults


# --- code written again: the same outputs ---------------------------------------

PIECES = [
    ["the", "sun", "##ny", "day", "[EOS]"],
    ["sun", "##ny", "[EOS]", "day"],
    ["\u2581sun", "ny", "</s>"],
    ["##ny", "[UNK]", "a", "[PAD]", "[BOS]"],
    ["\u2581the", "\u2581sun", "ny", "\u2581day", "</s>"],
    ["ny", "\u2581a", "<pad>", "<s>", "[UNK]"],
    [],
]


@pytest.mark.parametrize("pieces", PIECES)
def test_piece_words_gives_the_packages(pieces):
    assert runner.piece_words(pieces) == alignment.piece_words(pieces)


def test_peak_links_gives_the_packages():
    rng = np.random.default_rng(0)
    for pieces in PIECES[:-1]:
        words = alignment.piece_words(pieces)
        attention = rng.dirichlet(np.ones(len(pieces)), size=len(pieces))
        attention[1] = 0.0  # a piece that attends to nothing links nothing
        ours = runner.alignment._peak_links(attention, words, words)
        assert sorted(ours) == alignment.peak_links(attention, words, words)


TOKENS = np.array([[5, 9, 3, 7, 0], [6, 0, 0, 0, 0], [3, 0, 0, 0, 0], [4, 4, 4, 4, 4]], "int32")


@pytest.mark.parametrize("include_eos", [False, True])
def test_decode_to_lists_gives_the_packages(include_eos):
    for tokens in (TOKENS, TOKENS.reshape(2, 2, 5), TOKENS[0]):
        ours = runner.decode_to_lists(tokens, 3, 0, include_eos)
        assert ours == decoding.decode_to_lists(tokens, 3, 0, include_eos)


def test_kept_ids_give_the_packages():
    from zoo.data.tokenizer_base import kept_id_list

    for ids in ([2, 5, 6, 3, 7], [0, 5, 0, 2, 6], [3, 5], [], [5, 6, 7]):
        assert runner.tokenizers._kept_ids(ids, 10) == kept_id_list(ids)


TEXTS = [
    "A man's T-shirt costs 15,99 € (approx.)!",
    "„Schön“, sagte er – und ging.",
    "東京タワー\tis\u200bnear",
    "tabs\tand\nnew lines, and\u00a0no-break spaces",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_pretokenize_gives_keras_hubs_split(text):
    """The runner's pretokenize against the split the package's WordPiece
    tokenizer runs (keras-hub's, with the package's settings)."""
    import tensorflow as tf
    from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize

    from zoo.data import wordpiece_tokenizer as tokenizer

    words = pretokenize(tf.constant([text]), **tokenizer._SPLIT_SETTINGS).to_list()[0]
    assert runner.pretokenize(text) == [w.decode("utf-8") for w in words]
