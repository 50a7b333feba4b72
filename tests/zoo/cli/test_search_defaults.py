"""A run's search settings (its preset's, stored in config.json) are what
`zoo translate`, `zoo evaluate` and `zoo export` decode with unless a flag
says otherwise; --coverage-penalty reaches the search."""

import json

import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import untrained_rnnsearch_run

from zoo import registry
from zoo.export import onnx_export
from zoo.inference.search_settings import SearchSettingsError
from zoo.inference.translator import Translator

pytestmark = pytest.mark.tensorflow_only  # the tiny run's WordPiece vocabularies

STORED = {"beam": 3, "length_penalty": 0.2, "coverage_penalty": 0.4, "stopping": "exact"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return untrained_rnnsearch_run(
        tmp_path_factory.mktemp("runs") / "rnnsearch", 120, search=STORED, max_length=8
    )


@pytest.fixture
def searches(monkeypatch):
    """The search arguments of each `Translator.translate` call."""
    calls = []
    translate = Translator.translate

    def recording(self, sentences, **options):
        calls.append({name: options.get(name) for name in (*STORED, "n_best")})
        return translate(self, sentences, **options)

    monkeypatch.setattr(Translator, "translate", recording)
    return calls


def test_the_run_stores_its_search_and_translate_uses_it(capsys, run_dir, searches):
    assert json.loads((run_dir / "config.json").read_text())["search"] == STORED
    code, out, err = run_cli(capsys, "translate", str(run_dir), "the dog .", "--n-best", "3")
    assert code == 0, err
    assert searches == [{**STORED, "n_best": 3}]
    assert len(out.splitlines()) == 3


def test_a_flag_overrides_the_runs_search(capsys, run_dir, searches):
    code, _, err = run_cli(
        capsys, "translate", str(run_dir), "the dog .", "--beam", "2", "--coverage-penalty", "0",
        "--beam-stop", "early",
    )
    assert code == 0, err
    assert searches == [
        {"beam": 2, "length_penalty": 0.2, "coverage_penalty": 0.0, "stopping": "early",
         "n_best": 0}
    ]
    code, _, err = run_cli(capsys, "translate", str(run_dir), "a", "--beam", "1", "--n-best", "2")
    assert_one_line_error(code, err, "--n-best 2", "--beam")


def test_evaluate_uses_the_runs_search(capsys, run_dir, searches, tmp_path):
    data = tmp_path / "test.tsv"
    data.write_text("the dog .\tthe dog .\n")
    code, _, err = run_cli(capsys, "evaluate", str(run_dir), "--data", str(data))
    assert code == 0, err
    assert searches == [{**STORED, "n_best": None}]


def test_export_takes_the_runs_search_as_its_default(capsys, run_dir, monkeypatch, tmp_path):
    exported = {}
    monkeypatch.setattr(
        onnx_export, "export_onnx", lambda run, out, **options: exported.update(options) or out
    )
    code, _, err = run_cli(capsys, "export", str(run_dir), "--format", "onnx", "--out", str(tmp_path / "x"))
    assert code == 0, err
    assert {name: exported[name] for name in ("beam", "length_penalty", "coverage_penalty")} == {
        name: STORED[name] for name in ("beam", "length_penalty", "coverage_penalty")
    }
    assert exported["stopping"] == "exact"
    code, _, err = run_cli(
        capsys, "export", str(run_dir), "--format", "saved_model", "--out", str(tmp_path / "y")
    )
    assert_one_line_error(code, err, "--coverage-penalty", "--format onnx")
    assert not (tmp_path / "y").exists()


def test_the_multi30k_presets_decode_with_beam_5_and_a_bad_search_is_one_line():
    for name in registry.PRESETS:
        search = registry.get_preset(name)["search"]
        expected = 5 if name.endswith("_multi30k") else 1
        assert search["beam"] == expected, name
    with pytest.raises(SearchSettingsError, match="beam must be an int >= 1"):
        registry.search_of({"search": {"beam": 0}})
