"""The `zoo` command line, end to end on a tiny run, and its one-line errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import options_reaching_training
from cli_checks import train_keeping_the_model

import zoo
from zoo import cli
from zoo import registry
from zoo import runs
from zoo.inference.translator import Translator


def test_list_shows_every_preset(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for name in registry.PRESETS:
        assert name in out


def test_unknown_preset_is_one_line(capsys):
    code, _, err = run_cli(capsys, "train", "rnnsaerch_small")
    assert_one_line_error(code, err, "rnnsaerch_small", "did you mean 'rnnsearch_small'?", "zoo list")


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "argv, words",
    [
        (["train", "rnnsaerch_small"], ["unknown preset"]),
        (["translate", "RUN"], ["nothing to translate"]),
        (
            ["train", "rnnsearch_multi30k", "--data", "RUN/no.en.gz,RUN/no.de.gz"],
            ["no.en.gz: no such file"],
        ),
        (
            ["train", "rnnsearch_multi30k", "--data", "RUN/x.*.en.gz,RUN/x.*.de.gz"],
            ["x.*.en.gz: no file matches"],
        ),
    ],
)
def test_argument_mistakes_are_refused_before_keras_loads(tmp_path, argv, words):
    # A run directory with the files `translate` looks for, so that only the
    # arguments are wrong.
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "model.weights.h5", "source.vocab", "target.vocab"):
        (run / name).write_text("{}")
    argv = [word.replace("RUN", str(run)) for word in argv]
    script = (
        "import sys; from zoo import cli; code = cli.main(sys.argv[1:]); "
        "print(code, *sorted({'keras', 'tensorflow'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == [str(cli.USER_ERROR)], result.stderr
    assert_one_line_error(cli.USER_ERROR, result.stderr, *words)


def test_help_texts(capsys):
    """Every option of the decoding commands is explained, and `zoo caption`
    names the image formats that the exports read (docs/serving.md)."""
    from zoo.export.onnx_runner import IMAGE_FORMATS

    helps = {}
    for command in ("list", "evaluate", "translate", "caption", "export"):
        with pytest.raises(SystemExit):
            cli.main([command, "-h"])
        helps[command] = " ".join(capsys.readouterr().out.split())
    assert "List the presets" in helps["list"]
    for command in ("evaluate", "translate", "caption", "export"):
        assert "--length-penalty A GNMT length penalty" in helps[command], command
    for name in IMAGE_FORMATS:
        assert name.lower() in helps["caption"].lower(), name


def test_missing_run_directory_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, "translate", str(tmp_path / "nowhere"), "a sentence")
    assert_one_line_error(code, err, "does not exist")


def test_invalid_option_exits_with_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "rnnsearch_small", "--epochs", "0"])
    assert exit_info.value.code == 2
    assert "positive integer" in capsys.readouterr().err


def test_bad_beam_stop_is_a_usage_error_naming_the_value(capsys):
    from zoo.inference.search_settings import STOPPING_RULES as CHECKED_RULES
    from zoo.recipes.decoding import STOPPING_RULES

    assert CHECKED_RULES == STOPPING_RULES  # the Keras-free copy of the rules
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "runs/x", "a dog .", "--beam-stop", "never"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'never'" in capsys.readouterr().err


@pytest.mark.tensorflow_only
def test_sentencepiece_for_captioning_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "train", "show_attend_tell_small", "--tokenizer", "sentencepiece",
        "--out", str(tmp_path / "run"),
    )
    assert_one_line_error(code, err, "captioning", "wordpiece", "'sentencepiece'")
    assert not (tmp_path / "run").exists()


def test_console_script_reports_without_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "evaluate", "/nonexistent/run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "does not exist" in result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run with one SentencePiece vocabulary for both languages, and
    the model and weights that training held at its end."""
    out = tmp_path_factory.mktemp("runs") / "run"
    options = (
        "--train-size", "64", "--valid-size", "16", "--test-size", "130", "--epochs", "1",
        "--batch-size", "32", "--tokenizer", "sentencepiece", "--shared-vocabulary",
    )
    return train_keeping_the_model(out, "rnnsearch_small", *options)


@pytest.fixture(scope="module")
def tiny_run(trained):
    return trained[0]


@pytest.mark.tensorflow_only
def test_train_writes_a_complete_run_directory(tiny_run):
    for name in ("config.json", "shared.model", "model.weights.h5", "manifest.json",
                 "history.csv", "metrics.json", "checkpoints/epoch-01.weights.h5"):
        assert (tiny_run / name).is_file(), name
    assert not list(tiny_run.glob("*.vocab")) and not list(tiny_run.glob("source.*"))
    assert not list(tiny_run.glob(".*tmp*")), "temporary files left behind"
    training = json.loads((tiny_run / "config.json").read_text())["training"]
    assert (training["tokenizer"], training["shared_vocabulary"]) == ("sentencepiece", True)
    assert (training["valid_size"], training["test_size"]) == (16, 130)
    # The synthetic data has a test split: its cased and lowercased BLEU.
    metrics = json.loads((tiny_run / "metrics.json").read_text())
    assert (metrics["train_pairs"], metrics["valid_pairs"], metrics["test_pairs"]) == (64, 16, 130)
    # What the training data's filtering left out: a vocabulary of 64 pairs
    # spells words in many pieces, so some pairs are too long.
    assert metrics["pairs_read"] == 64 and metrics["pairs_left_out_length_ratio"] == 0
    assert metrics["train_pairs_kept"] + metrics["pairs_left_out_too_long"] == 64
    assert "case:mixed" in metrics["test_bleu_signature"]
    assert "case:lc" in metrics["test_bleu_lowercased_signature"]
    assert 0 <= metrics["test_bleu"] <= metrics["test_bleu_lowercased"] <= 100
    # And its gold word alignments: the attention's AER, precision and recall.
    for name in ("test_aer", "test_alignment_precision", "test_alignment_recall"):
        assert 0 <= metrics[name] <= 100, name
    # And BLEU on the test pairs that need no reordering, and how many.
    assert 0 < metrics["test_pairs_in_order"] < 130
    assert 0 <= metrics["test_bleu_in_order"] <= 100


@pytest.mark.tensorflow_only
def test_translate_and_plot(capsys, tiny_run, tmp_path):
    plot = tmp_path / "alignment.png"
    code, out, _ = run_cli(
        capsys, "translate", str(tiny_run), "the small dog sees a cat.", "--beam", "2",
        "--plot", str(plot),
    )
    assert code == 0
    assert len(out.strip().splitlines()) == 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.tensorflow_only
def test_beam_stop_reaches_the_translator(capsys, tiny_run, monkeypatch):
    seen = []
    translate = Translator.translate

    def recording(self, *args, **kwargs):
        seen.append(kwargs["stopping"])
        return translate(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", recording)
    for option in (["--beam-stop", "exact"], []):
        argv = ["translate", str(tiny_run), "a dog .", "--beam", "2", *option]
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, err
    assert seen == ["exact", "early"]


@pytest.mark.tensorflow_only
def test_translate_prints_the_translation_and_nothing_else(tiny_run):
    """A fresh `zoo translate` process: TensorFlow's start-up lines are held back."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "translate", str(tiny_run), "a dog runs ."],
        capture_output=True, text=True, timeout=600, env=dict(env, KERAS_BACKEND="tensorflow"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert len(result.stdout.splitlines()) == 1 and result.stdout.strip()


@pytest.mark.tensorflow_only
def test_evaluate_prints_bleu_with_signature_and_length_table(capsys, tiny_run):
    code, out, _ = run_cli(capsys, "evaluate", str(tiny_run), "--limit", "20")
    assert code == 0
    cased, lowercased = out.splitlines()[:2]
    assert cased.startswith("cased BLEU:") and "case:mixed" in cased
    assert lowercased.startswith("lowercased BLEU:") and "case:lc" in lowercased
    assert "nrefs:1" in cased and "version:" in cased
    assert "cased BLEU by source length" in out and "| 1-10 " in out


@pytest.mark.tensorflow_only
def test_evaluate_with_beam_search_over_batches_of_several_widths(capsys, tiny_run):
    # The run's 130 test sentences make three batches of different source widths: the
    # compiled search is traced again with unknown shapes after the first.
    code, out, err = run_cli(capsys, "evaluate", str(tiny_run), "--beam", "3", "--limit", "130")
    assert code == 0, err
    assert "nrefs:1" in out
    counts = [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| ")]
    assert sum(int(count) for count in counts if count.isdigit()) == 130  # every sentence


@pytest.mark.tensorflow_only
def test_reloaded_run_translates_like_the_trained_model(trained):
    out, model, weights = trained
    reloaded = zoo.load(out)
    for saved, loaded in zip(weights, reloaded.model.get_weights(), strict=True):
        np.testing.assert_array_equal(loaded, saved)
    from zoo.data import SentencePieceTokenizer

    assert isinstance(reloaded.source_tokenizer, SentencePieceTokenizer)
    assert reloaded.source_tokenizer is reloaded.target_tokenizer  # one shared file
    in_memory = Translator(
        model, reloaded.source_tokenizer, reloaded.target_tokenizer, reloaded.config
    )
    sentences = ["the small dog sees a cat.", "a red bird sleeps."]
    expected = in_memory.translate(sentences, beam=2)
    got = reloaded.translate(sentences, beam=2)
    assert [t.text for t in got] == [t.text for t in expected]
    np.testing.assert_allclose([t.score for t in got], [t.score for t in expected], rtol=1e-6)


@pytest.mark.tensorflow_only
def test_existing_run_directory_is_not_overwritten(capsys, tiny_run):
    code, _, err = run_cli(capsys, "train", "rnnsearch_small", "--out", str(tiny_run))
    assert_one_line_error(code, err, "already holds a finished run", "--overwrite")


@pytest.mark.tensorflow_only
def test_incomplete_run_directory_is_one_line(capsys, tiny_run, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((tiny_run / "config.json").read_text())
    code, _, err = run_cli(capsys, "evaluate", str(broken))
    assert_one_line_error(code, err, "incomplete", "model.weights.h5")


def copy_of_run(run, folder):
    """The run directory's files (not its checkpoints) copied into `folder`."""
    folder.mkdir()
    for path in run.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def double_a_weight_in_place(path):
    """Weight values overwritten where they are: the file keeps its size."""
    import h5py

    with h5py.File(path, "r+") as weights:
        names = []
        weights.visititems(lambda name, item: names.append(name) if getattr(item, "ndim", 0) == 2 else None)
        weights[names[0]][...] *= 2


def random_bytes_into(path):
    """A megabyte of random bytes written over the file from its 1000th byte."""
    with open(path, "r+b") as file:
        file.seek(1000)
        file.write(np.random.default_rng(0).bytes(1 << 20))


def truncate(path):
    path.write_bytes(path.read_bytes()[:1000])


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "command, name, damage, says",
    [
        ("translate", "model.weights.h5", double_a_weight_in_place, "does not match its checksum"),
        ("export", "model.weights.h5", random_bytes_into, ""),
        ("evaluate", "shared.model", truncate, "has 1000 bytes, not"),
    ],
)
def test_a_damaged_run_file_is_one_line_naming_it(
    capsys, tiny_run, tmp_path, command, name, damage, says
):
    run = copy_of_run(tiny_run, tmp_path / "run")
    damage(run / name)
    arguments = {"translate": ["a dog ."], "export": ["--out", str(tmp_path / "exported")]}
    code, _, err = run_cli(capsys, command, str(run), *arguments.get(command, []))
    assert_one_line_error(code, err, f"{name} {says}", f"restore {name}")
    with pytest.raises(runs.RunDirectoryError, match=f"{name} {says}"):
        zoo.load(run)


@pytest.mark.tensorflow_only
def test_a_run_without_manifest_warns_and_damaged_weights_are_still_one_line(
    capsys, tiny_run, tmp_path
):
    run = copy_of_run(tiny_run, tmp_path / "run")
    (run / "manifest.json").unlink()  # as a run written before manifests
    random_bytes_into(run / "model.weights.h5")
    code, _, err = run_cli(capsys, "translate", str(run), "a dog .")
    lines = err.strip().splitlines()
    assert code == cli.USER_ERROR and "Traceback" not in err and len(lines) == 2
    assert "no manifest.json" in lines[0] and "loaded unchecked" in lines[0]
    assert "cannot load the weights in" in lines[1] and "model.weights.h5" in lines[1]


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("command", ["translate", "evaluate", "export"])
def test_a_config_naming_an_unknown_recipe_is_one_line(capsys, tiny_run, tmp_path, command):
    run = copy_of_run(tiny_run, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["recipe"] = "no_such_recipe"
    (run / "config.json").write_text(json.dumps(config))
    arguments = {"translate": ["a dog ."], "export": ["--out", str(tmp_path / "exported")]}
    code, _, err = run_cli(capsys, command, str(run), *arguments.get(command, []))
    assert_one_line_error(
        code, err, "unknown recipe 'no_such_recipe'", str(run / "config.json"), "rnnsearch, luong"
    )


def test_a_zero_validation_size_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "rnnsearch_small", "--valid-size", "0"])
    assert exit_info.value.code == 2
    assert "positive integer" in capsys.readouterr().err


@pytest.mark.tensorflow_only
def test_a_test_size_for_a_real_corpus_is_one_line(capsys, tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("a dog .\tein hund .\n" * 20)
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--data", str(corpus), "--test-size", "5",
        "--out", str(tmp_path / "run"),
    )
    assert_one_line_error(code, err, "--test-size", "synthetic", "zoo evaluate")
    assert not (tmp_path / "run").exists(), "a failed start left a run directory"


@pytest.mark.tensorflow_only
def test_missing_data_file_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--data", f"{tmp_path}/a.en,{tmp_path}/a.de",
        "--out", str(tmp_path / "run"),
    )
    assert_one_line_error(code, err, "a.en")
    assert not (tmp_path / "run").exists(), "a failed start left a run directory"


@pytest.mark.parametrize("flag, expected", [(["--jit-compile", "on"], True), (["--jit-compile", "off"], False), ([], None)])
def test_jit_compile_option_reaches_training(capsys, monkeypatch, flag, expected):
    received = options_reaching_training(capsys, monkeypatch, "train", "transformer_small", *flag)
    assert received["jit_compile"] is expected


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("extra", [[], ["--overwrite"]])
def test_out_naming_a_file_is_one_line_and_keeps_the_file(capsys, tmp_path, extra):
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me")
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--train-size", "64", "--out", str(existing), *extra
    )
    assert_one_line_error(code, err, "notes.txt", "is a file", "--out")
    assert existing.read_text() == "keep me"


@pytest.mark.tensorflow_only
def test_out_inside_a_file_is_one_line(capsys, tmp_path):
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me")
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--train-size", "64", "--out", str(existing / "run")
    )
    assert_one_line_error(code, err, "cannot create the run directory", "--out")
    assert existing.read_text() == "keep me"


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("where", ["inside a file", "a folder"])
def test_plot_that_cannot_be_written_is_one_line(capsys, tiny_run, tmp_path, where):
    blocker = tmp_path / "blocker"
    if where == "a folder":
        blocker.mkdir()
        plot, words = blocker, ("is a folder", "--plot")
    else:
        blocker.write_text("a file where a folder should be")
        plot, words = blocker / "plots" / "alignment.png", ("cannot create the folder", "--plot")
    code, out, err = run_cli(capsys, "translate", str(tiny_run), "a cat.", "--plot", str(plot))
    assert_one_line_error(code, err, *words)
    assert out == "", "it translated before refusing the plot path"


@pytest.mark.backend_independent
def test_a_broken_line_deep_in_a_corpus_stops_train_before_the_run_is_written(tmp_path, capsys):
    lines = [f"sentence number {i}" for i in range(2000)]
    (tmp_path / "train.en").write_text("\n".join(lines) + "\n")
    broken = "\n".join(lines).encode().replace(b"number 1733", b"number \xe91733")
    (tmp_path / "train.de").write_bytes(broken + b"\n")
    out = tmp_path / "run"
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_multi30k", "--data",
        f"{tmp_path}/train.en,{tmp_path}/train.de", "--out", str(out),
    )
    assert_one_line_error(code, err, f"{tmp_path}/train.de:1734: not valid UTF-8")
    assert not out.exists()

