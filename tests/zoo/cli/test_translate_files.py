"""`zoo translate` on files and standard input: order, blank lines, bad
UTF-8, atomic outputs, n-best lists, long inputs and Pharaoh alignments;
the progress line of `zoo translate` and `zoo evaluate`.

Most tests run an `EchoTranslator`, whose "model" returns the source pieces
with a known attention, so that the expected output of every line is known
exactly and no search is compiled; the n-best and end-to-end tests decode
with a tiny untrained run.
"""

import doctest
import io
import os
import re

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import untrained_rnnsearch_run

import zoo
from zoo.cli import progress
from zoo.data.wordpiece_tokenizer import TextTokenizer
from zoo.evaluation import alignment
from zoo.inference.translator import Translator
from zoo.recipes.contract import EOS_ID

pytestmark = pytest.mark.tensorflow_only

LIMIT = 12  # the runs' max_length: source pieces read per sentence
ECHO_VOCABULARY = [
    "[PAD]", "[UNK]", "[BOS]", "[EOS]", "the", "dog", "sees", "a", "cat", "sun", "##ny", "day",
    ".", "!", "?", *"0123456789",
]


class EchoTranslator(Translator):
    """Translates a sentence into its own source pieces; target piece t
    attends to source piece n-1-t (the reversal), EOS to the first piece."""

    decoded = 0

    def _decode_batch(self, search, source_ids, n_best=0):
        self.decoded += len(source_ids)
        width = max(len(ids) for ids in source_ids)
        attention = np.zeros((len(source_ids), width + 1, width), "float32")
        tokens = []
        for row, ids in enumerate(source_ids):
            n = len(ids)
            tokens.append(list(ids) + [EOS_ID])
            attention[row, np.arange(n), n - 1 - np.arange(n)] = 1.0
            attention[row, n, 0] = 1.0
        return tokens, attention, -np.arange(len(source_ids), dtype="float32"), None


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A complete, untrained, tiny run reading at most LIMIT source pieces."""
    return untrained_rnnsearch_run(
        tmp_path_factory.mktemp("runs") / "rnnsearch", 200, max_length=LIMIT
    )


@pytest.fixture(scope="module")
def loaded(run_dir):
    """The run reopened once, so that its compiled searches serve every test."""
    return zoo.load(run_dir)


@pytest.fixture(scope="module")
def echo_tokenizer():
    return TextTokenizer(ECHO_VOCABULARY)


@pytest.fixture
def echo(loaded, echo_tokenizer, monkeypatch):
    tokenizer = echo_tokenizer
    translator = EchoTranslator(loaded.model, tokenizer, tokenizer, loaded.config)
    monkeypatch.setattr(zoo, "load", lambda _: translator)
    return translator


@pytest.fixture
def real(loaded, monkeypatch):
    monkeypatch.setattr(zoo, "load", lambda _: loaded)
    return loaded


def echoed(translator, lines):
    """What the echo translator gives for `lines`: their pieces, detokenized."""
    encoded = translator.source_tokenizer.encode(lines) if lines else []
    return [translator.target_tokenizer.decode(ids) for ids in encoded]


def numbered(i):
    """A distinct short line for each i: the words of its digits."""
    return f"the dog {' '.join(str(i))} ."


@pytest.mark.parametrize("count", [1, 10_000])
def test_every_line_is_translated_in_input_order(capsys, echo, run_dir, tmp_path, count):
    lines = [numbered(i) for i in range(count)]
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in lines))
    code, out, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert code == 0, err
    assert out.splitlines() == echoed(echo, lines)
    assert len(out.splitlines()) == count and err == ""


def test_an_empty_file_gives_an_empty_output_and_a_note(capsys, echo, run_dir, tmp_path):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("")
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--output", str(output)
    )
    assert code == 0 and out == ""
    assert output.read_text() == ""
    assert err == f"zoo translate: note: {str(source)!r} is empty; nothing was translated\n"


def test_blank_lines_give_blank_lines_without_decoding(capsys, echo, run_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("the dog .\n\n   \nthe cat .\r\n")
    code, out, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert code == 0, err
    assert out == "the dog.\n\n\nthe cat.\n"
    assert echo.decoded == 2


def test_standard_input(capsys, echo, run_dir, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"the sun day .\na cat !\n")))
    code, out, err = run_cli(capsys, "translate", str(run_dir), "--input", "-")
    assert code == 0, err
    assert out == "the sun day.\na cat!\n"


def test_invalid_utf8_is_one_line_naming_the_line(capsys, echo, run_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes(b"the dog .\nthe \xff cat .\n")
    code, _, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert_one_line_error(code, err, "line 2", "UTF-8")


def test_a_failure_mid_file_leaves_no_output(capsys, echo, run_dir, tmp_path):
    # Line 5000 is in the third chunk of 32 * 64 lines: two were written before.
    lines = [numbered(i).encode() for i in range(6000)]
    lines[4999] = b"the \xe9 dog"
    source = tmp_path / "in.txt"
    source.write_bytes(b"\n".join(lines) + b"\n")
    output, links = tmp_path / "out.txt", tmp_path / "out.align"
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--output", str(output),
        "--alignments", str(links),
    )
    assert_one_line_error(code, err, "line 5000")
    assert echo.decoded == 4096 and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_an_interrupt_leaves_no_output(capsys, echo, run_dir, tmp_path, monkeypatch):
    source = tmp_path / "in.txt"
    source.write_text("".join(numbered(i) + "\n" for i in range(3000)))
    output = tmp_path / "out.txt"
    decode = EchoTranslator._decode_batch

    def interrupted(self, *args, **kwargs):
        if self.decoded >= 2048:
            raise KeyboardInterrupt
        return decode(self, *args, **kwargs)

    monkeypatch.setattr(EchoTranslator, "_decode_batch", interrupted)
    code = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--output", str(output)
    )[0]
    assert code == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_output_file_holds_the_translations(capsys, echo, run_dir, tmp_path):
    output = tmp_path / "out.txt"
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "the dog .", "a cat .", "--output", str(output)
    )
    assert code == 0 and out == "" and err == ""
    assert output.read_text() == "the dog.\na cat.\n"


@pytest.mark.parametrize(
    "options, words",
    [
        ((), ["nothing to translate", "sentences", "--input"]),
        (("the dog", "--input", "x"), ["not both"]),
        (("--input", "/nowhere/in.txt"), ["/nowhere/in.txt"]),
        (("the dog", "--output", "/nowhere/out.txt"), ["/nowhere"]),
        # A folder that refuses new files even to root (Linux's /proc).
        pytest.param(
            ("the dog", "--output", "/proc/out.txt"), ["cannot write --output", "/proc/out.txt"],
            marks=pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc"),
        ),
        pytest.param(
            ("the dog", "--alignments", "/proc/a.txt"), ["cannot write --alignments"],
            marks=pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc"),
        ),
        (("the dog", "--n-best", "3", "--beam", "2"), ["--n-best 3", "--beam"]),
    ],
)
def test_bad_options_are_one_line(capsys, run_dir, options, words):
    code, _, err = run_cli(capsys, "translate", str(run_dir), *options)
    assert_one_line_error(code, err, *words)


def test_long_lines_are_split_at_sentence_ends_and_reported(capsys, echo, run_dir, tmp_path):
    split = "the dog sees a cat . the sun day ! a dog sees the sunny day ?"  # 18 pieces
    cut = " ".join(["the dog"] * 10)  # 20 pieces, no sentence end
    both = "the cat . " + " ".join(["a dog"] * 7)  # 3 + 14 pieces
    source = tmp_path / "in.txt"
    source.write_text(f"the dog .\n{split}\n{cut}\n{both}\n")
    code, out, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert code == 0, err
    assert out.splitlines() == [
        "the dog.",
        "the dog sees a cat. the sun day! a dog sees the sunny day?",
        " ".join(["the dog"] * 6),
        "the cat. " + " ".join(["a dog"] * 6),
    ]
    assert err.splitlines() == [
        f"zoo translate: line 2: 17 words, longer than the model's {LIMIT}-piece limit; "
        "split into 3 sentences",
        f"zoo translate: line 3: 20 words, longer than the model's {LIMIT}-piece limit; "
        f"cut after piece {LIMIT}",
        f"zoo translate: line 4: 17 words, longer than the model's {LIMIT}-piece limit; "
        f"split into 2 sentences, 1 of them cut after piece {LIMIT}",
    ]


def test_positional_sentences_are_reported_by_position(capsys, echo, run_dir):
    code, _, err = run_cli(capsys, "translate", str(run_dir), "a cat .", " ".join(["the dog"] * 10))
    assert code == 0
    assert err.startswith("zoo translate: sentence 2: 20 words")


def test_pharaoh_alignments_of_a_known_attention(capsys, echo, run_dir, tmp_path):
    # Pieces: the sun ##ny day . -> words 0 1 1 2 3; target piece t attends
    # to source piece 4 - t, and EOS (dropped) to piece 0.
    source, links = tmp_path / "in.txt", tmp_path / "out.align"
    source.write_text("the sunny day .\n\na cat\n")
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--alignments", str(links)
    )
    assert code == 0, err
    assert out == "the sunny day.\n\na cat\n"
    assert links.read_text() == "0-3 1-1 1-2 2-1 3-0\n\n0-1 1-0\n"


class BlindEchoTranslator(EchoTranslator):
    """The echo translator of a model without attention (as `rnnencdec`):
    every step's attention is all zero."""

    def _decode_batch(self, *args, **kwargs):
        tokens, attention, scores, n_best = super()._decode_batch(*args, **kwargs)
        return tokens, np.zeros_like(attention), scores, n_best


def test_a_model_without_attention_says_so_instead_of_plotting(
    capsys, loaded, echo_tokenizer, monkeypatch, run_dir, tmp_path
):
    blind = BlindEchoTranslator(loaded.model, echo_tokenizer, echo_tokenizer, loaded.config)
    monkeypatch.setattr(zoo, "load", lambda _: blind)
    plot, links = tmp_path / "alignment.png", tmp_path / "links.txt"
    code, out, err = run_cli(capsys, "translate", str(run_dir), "the dog .", "--plot", str(plot))
    assert (code, out) == (0, "the dog.\n")
    assert not plot.exists(), "an all-zero heat map was plotted"
    assert len(err.splitlines()) == 1 and "--plot" in err and "has no attention" in err
    source = tmp_path / "in.txt"
    source.write_text("the dog .\na cat .\n")
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--alignments", str(links)
    )
    assert code == 0 and links.read_text() == "\n\n"
    assert len(err.splitlines()) == 1 and "--alignments" in err and "has no attention" in err


def test_piece_words_reads_wordpiece_and_sentencepiece():
    assert alignment.piece_words(["##x", "a", "##b", "[UNK]", "c", "[EOS]"]) == [0, 1, 1, 2, 3, None]
    assert alignment.piece_words(["\u2581A", "b", "\u2581c", "</s>"]) == [0, 0, 1, None]
    assert alignment.parse_pharaoh("0-3 1?1 2-0") == [(0, 3), (1, 1), (2, 0)]
    doctests = doctest.testmod(alignment)
    assert doctests.attempted and not doctests.failed


def test_n_best_lists_are_moses_format_sorted_by_score(capsys, real, run_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("the dog sees a cat .\n\na red bird .\n")  # a blank line has no entries
    code, out, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--beam", "3", "--n-best", "3"
    )
    assert code == 0, err
    entries = [line.split(" ||| ") for line in out.splitlines()]
    assert [int(e[0]) for e in entries] == [0, 0, 0, 2, 2, 2]
    for index in (0, 2):
        mine = [e for e in entries if int(e[0]) == index]
        assert all(re.fullmatch(r"log_prob= -?\d+\.\d{4} finished= [01]", e[2]) for e in mine)
        # Finished entries first, then unfinished ones, each by score.
        ranks = [(e[2].endswith("finished= 1"), float(e[3])) for e in mine]
        assert ranks == sorted(ranks, reverse=True)
    # The first entry is the translation; the same batch, so no new trace.
    best = real.translate(["the dog sees a cat .", "a red bird ."], beam=3)
    assert [entries[0][1], entries[3][1]] == [t.text for t in best]
    assert float(entries[0][2].split()[1]) == pytest.approx(best[0].score, abs=1e-4)


def test_a_file_translates_as_the_sentences_do(capsys, real, run_dir, tmp_path):
    sentences = ["the dog sees a cat .", "a red bird sleeps ."]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n")
    code, from_file, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert code == 0, err
    assert from_file.splitlines() == [t.text for t in real.translate(sentences)]


def test_progress_goes_to_stderr_only_when_asked(capsys, echo, run_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("the dog .\na cat .\n\n")
    code, out, err = run_cli(capsys, "translate", str(run_dir), "--input", str(source))
    assert (code, err) == (0, "")  # stderr is no terminal here
    code, out_with, err = run_cli(
        capsys, "translate", str(run_dir), "--input", str(source), "--progress"
    )
    assert code == 0 and out_with == out == "the dog.\na cat.\n\n"
    assert re.fullmatch(r"(\d+ sentences, [\d.]+ sentences/s\n)+", err)
    assert err.splitlines()[-1].startswith("3 sentences")


def test_evaluate_shows_progress_with_the_total(capsys, echo, run_dir, tmp_path):
    pairs = tmp_path / "test.tsv"
    pairs.write_text("".join(f"{numbered(i)}\t{numbered(i)}\n" for i in range(5)))
    code, out, err = run_cli(
        capsys, "evaluate", str(run_dir), "--data", str(pairs), "--progress"
    )
    assert code == 0, err
    assert err.splitlines()[-1].startswith("5/5 sentences, ")
    assert "sentences/s" not in out


def test_progress_counts_and_rate():
    clock = iter([0.0, 1.0, 2.0, 3.0]).__next__
    stream = io.StringIO()
    with progress.Progress(total=10, stream=stream, clock=clock) as counter:
        counter(4)  # t=1: the first update is shown
        counter(6)  # t=2: too soon after it for a log file
    # Not a terminal: one line per update shown, and the final count at the end.
    assert stream.getvalue().splitlines() == [
        "4/10 sentences, 4.0 sentences/s", "10/10 sentences, 3.3 sentences/s"
    ]


def test_a_log_file_gets_the_final_count_once():
    clock = iter([0.0, 1.0, 2.0]).__next__
    stream = io.StringIO()
    with progress.Progress(total=4, stream=stream, clock=clock) as counter:
        counter(4)  # shown: the first update
    assert stream.getvalue().splitlines() == ["4/4 sentences, 4.0 sentences/s"]
    assert progress.wanted(None, io.StringIO()) is False
    assert progress.wanted(True, io.StringIO()) is True
