"""`zoo bench decode --run`: greedy, beam exact and beam early of a run on a
test set, timed with their steps and BLEU, on a tiny untrained run."""

import json

import pytest
from tiny_configs import TINY

from zoo import cli
from zoo import data
from zoo.data.wordpiece_tokenizer import TextTokenizer
from zoo.training import untrained as training

pytestmark = pytest.mark.tensorflow_only


@pytest.fixture(scope="module")
def run_and_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench_run")
    pairs = data.synthetic_splits(200, 0, 0)["train"]
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    run_dir = training.write_untrained_run(
        folder / "run",
        "rnnsearch_small",
        TextTokenizer.train(targets, 100),
        TextTokenizer.train(sources, 100),
        model_overrides=TINY["rnnsearch"],
    )
    (folder / "src.txt").write_text("\n".join(sources[:8]) + "\n")
    (folder / "ref.txt").write_text("\n".join(targets[:8]) + "\n")
    return run_dir, f"{folder / 'src.txt'},{folder / 'ref.txt'}"


def test_bench_decode_run_times_greedy_beam_exact_and_beam_early(run_and_data, tmp_path, capsys):
    run_dir, test_set = run_and_data
    out = tmp_path / "result.json"
    argv = ["bench", "decode", "--run", str(run_dir), "--data", test_set, "--limit", "6"]
    assert cli.main([*argv, "--beam", "3", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    printed = capsys.readouterr().out
    names = ["greedy", "beam 3 exact", "beam 3 early"]
    assert [entry["setting"] for entry in results["settings"]] == names
    assert results["sentences"] == 6 and "--run" in results["command"]
    for entry in results["settings"]:
        assert f"| {entry['setting']} |" in printed
        assert entry["seconds"] > 0 and entry["batches"] == 1
        assert 0 < entry["steps"] <= entry["step_limits"]
        assert 0.0 <= entry["bleu"] <= 100.0 and "nrefs:1" in entry["bleu_signature"]
    greedy, exact, early = results["settings"]
    assert early["steps"] <= exact["steps"]
    summary = results["summary"]
    ratio = early["seconds"] / greedy["seconds"]
    assert summary["early_over_greedy_seconds"] == pytest.approx(ratio)
    assert summary["bleu_early_minus_exact"] == pytest.approx(early["bleu"] - exact["bleu"])


def test_bench_run_is_refused_outside_the_decode_suite(run_and_data, capsys):
    run_dir, _ = run_and_data
    assert cli.main(["bench", "layers", "--run", str(run_dir)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "zoo bench decode --run" in error
