"""`zoo bench export` at the tiniest size: both serving paths timed against
Keras, with the same translations."""

import pytest
from bench_checks import check_every_case_is_timed


@pytest.mark.tensorflow_only
def test_the_export_suite_times_both_serving_paths_with_the_same_translations(tmp_path):
    rows, results = check_every_case_is_timed("export", tmp_path, 2)
    for row, case in zip(rows, results["cases"]):
        assert "same translations: yes" in row[7], row
        assert case["same_translations"] is True


@pytest.mark.tensorflow_only
def test_bench_export_run_serves_each_side_in_a_process_of_its_own(tmp_path, capsys):
    """`zoo bench export --run` on a tiny untrained run: four sides, each
    timed at batch 1 and 32 in a child process; the float32 sides give
    Keras' translations, and a process serving the ONNX folder (numpy and
    onnxruntime only) is smaller than one serving Keras."""
    import json

    from tiny_configs import TINY

    from zoo import cli
    from zoo import data
    from zoo.data.wordpiece_tokenizer import TextTokenizer
    from zoo.bench.trained_serving import TIMED_PASSES
    from zoo.training import untrained as training

    pairs = data.synthetic_splits(200, 0, 0)["train"]
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    run_dir = training.write_untrained_run(
        tmp_path / "run",
        "rnnsearch_small",
        TextTokenizer.train(targets, 100),
        TextTokenizer.train(sources, 100),
        model_overrides=TINY["rnnsearch"],
        training_overrides={"max_length": 12},
    )
    (tmp_path / "src.txt").write_text("\n".join(sources[:5]) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(targets[:5]) + "\n")
    out = tmp_path / "result.json"
    argv = ["bench", "export", "--run", str(run_dir), "--out", str(out)]
    argv += ["--data", f"{tmp_path / 'src.txt'},{tmp_path / 'ref.txt'}"]
    assert cli.main(argv) == 0
    results = json.loads(out.read_text())
    printed = capsys.readouterr().out
    sides = {entry["side"]: entry for entry in results["sides"]}
    assert list(sides) == ["Keras", "SavedModel", "ONNX float32", "ONNX int8"]
    for name, entry in sides.items():
        assert f"| {name} |" in printed
        assert set(entry["sentences_per_second"]) == {"1", "32"}
        assert min(entry["sentences_per_second"].values()) > 0
        for batch, rates in entry["sentences_per_second_passes"].items():
            assert len(rates) == TIMED_PASSES
            assert entry["sentences_per_second"][batch] == sorted(rates)[len(rates) // 2]
        assert entry["size_mib"] > 0 and entry["peak_rss_mib"] > 0
        assert 0.0 <= entry["bleu"] <= 100.0 and "nrefs:1" in entry["bleu_signature"]
    assert sides["SavedModel"]["same_translations_as_keras"]
    assert sides["ONNX float32"]["same_translations_as_keras"]
    assert sides["ONNX float32"]["peak_rss_mib"] < sides["Keras"]["peak_rss_mib"] / 2
    assert results["sentences"] == 5 and "--run" in results["command"]


@pytest.mark.tensorflow_only
def test_bench_export_run_adds_the_ctranslate2_sides_for_a_sentencepiece_transformer():
    from zoo.bench.trained_serving import _ctranslate2_serves

    def config(recipe, tokenizer):
        return {"recipe": recipe, "training": {"tokenizer": tokenizer}}

    assert _ctranslate2_serves(config("transformer", "sentencepiece"))
    assert not _ctranslate2_serves(config("transformer", "wordpiece"))
    assert not _ctranslate2_serves(config("rnnsearch", "sentencepiece"))
