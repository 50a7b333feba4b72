"""The README's main job, `zoo demo` and `zoo demo --layers`, at a tiny size:
the table prints, the heat map is written, both runs are kept."""

import functools
import json

import pytest

from cli_checks import run_cli

from zoo.cli import demo
from zoo.cli import layer_demo
from zoo import registry

pytestmark = pytest.mark.tensorflow_only  # tf.data training

TINY_TRAINING = {"train_size": 64, "valid_size": 16, "test_size": 24, "epochs": 1, "batch_size": 32}


@pytest.fixture
def tiny_demo_presets(monkeypatch):
    for preset in demo.PRESETS:
        training = registry.PRESETS[preset]["training"].overridden(**TINY_TRAINING)
        monkeypatch.setitem(registry.PRESETS[preset], "training", training)


def test_demo_prints_the_table_writes_the_heat_map_and_keeps_both_runs(
    capsys, tmp_path, tiny_demo_presets
):
    out = tmp_path / "demo"
    code, printed, err = run_cli(capsys, "demo", "--out", str(out))
    assert code == 0, err
    header = next(line for line in printed.splitlines() if line.startswith("| Source words"))
    assert [cell.strip() for cell in header.split("|")[3:-1]] == list(demo.PRESETS)
    counts = [line.split("|")[2].strip() for line in printed.splitlines() if line.startswith("| ")]
    assert sum(int(count) for count in counts if count.isdigit()) == TINY_TRAINING["test_size"]
    heat_map = out / "rnnsearch_small_alignment.png"
    assert heat_map.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"alignment heat map: {heat_map}" in printed
    for preset in demo.PRESETS:
        assert (out / preset / "model.weights.h5").is_file(), f"{preset}'s run was not kept"
        # The test scores, as a plain `zoo train` records them.
        metrics = json.loads((out / preset / "metrics.json").read_text())
        assert {"test_bleu", "test_bleu_lowercased", "test_bleu_signature"} <= set(metrics)
    assert "test_aer" in metrics  # RNNsearch's attention, scored on the gold alignments


def test_demo_layers_trains_and_shows_every_attention_layer(capsys, monkeypatch):
    monkeypatch.setattr(
        layer_demo, "run", functools.partial(layer_demo.run, epochs=1, train_size=128)
    )
    code, printed, err = run_cli(capsys, "demo", "--layers")
    assert code == 0, err
    for name in layer_demo.attention_layers():
        assert f"== {name}" in printed
    assert printed.count("token accuracy") == len(layer_demo.attention_layers())
    # Local-p's accuracy is explained where it is printed.
    local_p = printed.split("== LocalAttention(mode='local-p'")[1].split("==")[0]
    assert "why it may stand lower: local-p learns its window centre" in local_p
    # One alignment matrix per layer: a row per target position.
    assert printed.count("    target  0 |") == len(layer_demo.attention_layers())
