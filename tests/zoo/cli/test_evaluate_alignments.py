"""`zoo evaluate` scores the attention's word alignment (AER, precision,
recall) against gold alignments: the synthetic corpus's own, or a Pharaoh
file for any test set; the figures printed are recomputed here from the
model's attention, one unpadded pair at a time."""

import re

import numpy as np
import pytest
from keras import ops

from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import untrained_rnnsearch_run

import zoo
from zoo import data
from zoo.evaluation.alignment import parse_gold
from zoo.evaluation.alignment import piece_words

pytestmark = pytest.mark.tensorflow_only

SIZES = {"train_size": 40, "valid_size": 1, "test_size": 10}
LIMIT = 24  # the run's max_length: pieces read per sentence
PAIRS = 6  # --limit


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """An untrained tiny RNNsearch run on a small synthetic corpus: its
    attention is arbitrary, but it is what the scores must be of."""
    return untrained_rnnsearch_run(
        tmp_path_factory.mktemp("runs") / "rnnsearch", 120, max_length=LIMIT, **SIZES
    )


@pytest.fixture(scope="module")
def loaded(run_dir):
    return zoo.load(run_dir)


@pytest.fixture
def real(loaded, monkeypatch):
    """`zoo.load` gives the run opened once, so its search compiles once."""
    monkeypatch.setattr(zoo, "load", lambda _: loaded)
    return loaded


@pytest.fixture(scope="module")
def test_set():
    """The run's synthetic test split: (source, target, gold line) triples."""
    return data.synthetic_splits(*SIZES.values(), seed=0, with_alignments=True)["test"]


def words_of_pieces(tokenizer, sentence):
    """Ids of `sentence` cut after LIMIT pieces, and each piece's
    space-separated word: the tokenizer's words (punctuation its own) with
    the final period's word folded into the last word, which it ends."""
    ids = tokenizer.encode([sentence])[0][:LIMIT]
    words = piece_words([tokenizer.id_to_token(i) for i in ids])
    last = len(sentence.split()) - 1
    return ids, [min(word, last) for word in words]


def expected_scores(translator, triples):
    """AER, precision and recall (percent) of the attention peaks, computed
    pair by pair, over the corpus's links as one set of (pair, i, j)."""
    model = translator.model
    predicted, sure, possible = set(), set(), set()
    for n, (source, target, line) in enumerate(triples):
        source_ids, source_words = words_of_pieces(translator.source_tokenizer, source)
        target_ids, target_words = words_of_pieces(translator.target_tokenizer, target)
        inputs = {
            "source": np.array([source_ids], "int32"),
            "target_in": np.array([[model.bos_id, *target_ids[:-1]]], "int32"),
        }
        attention = np.asarray(model.attention_weights(inputs))[0]
        predicted |= {
            (n, source_words[int(np.argmax(row))], target_words[t])
            for t, row in enumerate(attention)
        }
        gold = parse_gold(line)
        sure |= {(n, *link) for link in gold.sure}
        possible |= {(n, *link) for link in gold.possible}
    a_s, a_p = len(predicted & sure), len(predicted & possible)
    return {
        "AER": 100 * (1 - (a_s + a_p) / (len(predicted) + len(sure))),
        "precision": 100 * a_p / len(predicted),
        "recall": 100 * a_s / len(sure),
    }


def printed_scores(out):
    return {name: float(value) for name, value in re.findall(r"^  (\w+): +([\d.]+)$", out, re.M)}


def assert_scores(out, expected):
    printed = printed_scores(out)
    assert set(printed) == set(expected), out
    for name, value in expected.items():
        assert printed[name] == pytest.approx(value, abs=0.0051), name


def test_evaluate_prints_the_aer_of_the_attention(capsys, real, run_dir, test_set):
    code, out, err = run_cli(capsys, "evaluate", str(run_dir), "--limit", str(PAIRS))
    assert code == 0, err
    assert "cased BLEU:" in out and "attention alignment" in out
    expected = expected_scores(real, test_set[:PAIRS])
    assert 0 < expected["AER"] < 100  # an untrained model: neither all right nor all wrong
    assert_scores(out, expected)


@pytest.fixture
def corpus(test_set, tmp_path):
    """The test split as a TSV corpus file, as a real test set is given."""
    path = tmp_path / "test.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t, _ in test_set))
    return path


def test_a_gold_file_scores_any_test_set(capsys, real, run_dir, test_set, corpus, tmp_path):
    # Another gold than the corpus's own: each word linked to the same
    # position, and a possible link.
    lines = [
        " ".join([f"{k}-{k}" for k in range(min(len(s.split()), len(t.split())))] + ["0?1"])
        for s, t, _ in test_set
    ]
    gold = tmp_path / "gold.txt"
    gold.write_text("".join(f"{line}\n" for line in lines))
    argv = ["evaluate", str(run_dir), "--data", str(corpus), "--gold-alignments", str(gold)]
    code, out, err = run_cli(capsys, *argv, "--limit", str(PAIRS))
    assert code == 0, err
    triples = [(s, t, line) for (s, t, _), line in zip(test_set, lines)]
    assert_scores(out, expected_scores(real, triples[:PAIRS]))


def test_a_real_corpus_without_gold_has_no_alignment_scores(capsys, real, run_dir, corpus):
    argv = ["evaluate", str(run_dir), "--data", str(corpus), "--limit", "2"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "cased BLEU:" in out and "attention alignment" not in out


def test_gold_file_mistakes_are_one_line(capsys, real, run_dir, test_set, tmp_path):
    gold = tmp_path / "gold.txt"
    gold.write_text("0-0\n" * (len(test_set) - 1))
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--gold-alignments", str(gold))
    count = len(test_set)
    assert_one_line_error(code, err, "gold.txt", f"{count - 1} lines", f"{count} test pairs")
    gold.write_text("0-0\n0-0 2=1\n")
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--gold-alignments", str(gold))
    assert_one_line_error(code, err, "gold.txt", "line 2", "'2=1'", "i?j")
    missing = tmp_path / "absent.txt"
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--gold-alignments", str(missing))
    assert_one_line_error(code, err, "absent.txt", "does not exist")


class PointingModel:
    """A stand-in model whose attention row t points at source position
    `target_in[t] % source length`: which token each row was fed is seen
    in its links."""

    pad_id, bos_id, eos_id = 0, 2, 3

    def attention_weights(self, inputs):
        # keras.ops: the translator compiles this like a model's.
        source, target_in = inputs["source"], inputs["target_in"]
        lengths = ops.sum(ops.cast(ops.not_equal(source, self.pad_id), "int32"), axis=1)
        return ops.one_hot(target_in % lengths[:, None], ops.shape(source)[1])


def test_each_row_reads_the_reference_before_it(loaded, test_set):
    translator = type(loaded)(
        PointingModel(), loaded.source_tokenizer, loaded.target_tokenizer, loaded.config
    )
    pairs = [(s, t) for s, t, _ in test_set]
    got = translator.attention_alignments(pairs, batch_size=4)  # batches of several widths
    for (source, target), links in zip(pairs, got):
        source_ids, source_words = words_of_pieces(translator.source_tokenizer, source)
        target_ids, target_words = words_of_pieces(translator.target_tokenizer, target)
        target_in = [PointingModel.bos_id, *target_ids[:-1]]
        expected = {
            (source_words[token % len(source_ids)], word)
            for token, word in zip(target_in, target_words)
        }
        assert links == sorted(expected)


class NoAttentionModel(PointingModel):
    """Attention all zeros, as RNNencdec's."""

    def attention_weights(self, inputs):
        return 0.0 * super().attention_weights(inputs)


def test_a_model_without_attention_has_no_alignment_scores(loaded, test_set):
    from zoo.tasks.translation import alignment_metrics

    translator = type(loaded)(
        NoAttentionModel(), loaded.source_tokenizer, loaded.target_tokenizer, loaded.config
    )
    golds = [parse_gold(line) for _, _, line in test_set]
    scores = translator.alignment_scores([(s, t) for s, t, _ in test_set], golds)
    assert scores.links == 0 and scores.aer == 1.0
    assert alignment_metrics(scores) == {}
