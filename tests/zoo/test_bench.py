"""`zoo bench` at the tiniest size: a complete table and results file.

Speed itself is never asserted: these check that the benchmark keeps
working and reports every case, on every backend.
"""

import argparse
import contextlib
import io
import json
import os

import keras
import pytest

from zoo import bench
from zoo import registry

# The rows the layers suite promises (issue 6): ours against Keras' layer
# where one computes the same thing, our layers alone where none does.
PAIRED = (
    "MultiHeadAttention vs keras.layers.MultiHeadAttention",
    "MultiHeadAttention vs keras.layers.MultiHeadAttention, causal",
    "LuongAttention(dot) vs keras.layers.Attention",
    "LocalAttention(local-p, general, D=1) vs LuongAttention(general)",
)
ALONE = ("AdditiveAttention(units=8)",)
DIRECTIONS = ("forward", "forward+backward")


def run_tiny_bench(suite, folder):
    """One `zoo bench SUITE --size tiny --repeats 1 --min-time 0` run:
    (stdout, results)."""
    out = folder / "results.json"
    parser = argparse.ArgumentParser(prog="zoo")
    bench.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "bench", suite, "--size", "tiny", "--repeats", "1", "--warmup", "1",
            "--min-time", "0", "--out", str(out),
        ]
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench.command(args)
    return printed.getvalue(), json.loads(out.read_text())


@pytest.fixture(scope="module")
def layers_run(tmp_path_factory):
    return run_tiny_bench("layers", tmp_path_factory.mktemp("bench"))


def table_rows(printed, suite="layers"):
    """The Markdown table's body rows, as lists of cells."""
    rows = [line for line in printed.splitlines() if line.startswith(f"| {suite} |")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_the_table_has_every_case_with_times_and_ratios(layers_run):
    printed, _ = layers_run
    header = "| suite | case | size | compiled | ours | reference | ratio | note |"
    assert header in printed
    rows = {row[1]: row for row in table_rows(printed)}
    for name in PAIRED + ALONE:
        for direction in DIRECTIONS:
            row = rows.pop(f"{name}, {direction}")
            _, _, size, compiled, ours, reference, ratio, _ = row
            assert size == "B=2 T=4 d=8"
            assert compiled in ("tf.function", "jax.jit", "eager")
            assert ours.split()[0].replace(".", "").isdigit(), row
            if name in PAIRED:
                assert reference.split()[0].replace(".", "").isdigit(), row
                assert float(ratio) > 0, row
            else:
                assert (reference, ratio) == ("-", "-"), row
    assert not rows, f"unexpected rows: {list(rows)}"


def test_the_results_record_backend_versions_machine_and_ratios(layers_run):
    _, results = layers_run
    assert results["backend"] == keras.backend.backend()
    assert results["versions"]["keras"] == keras.__version__
    assert results["machine"]["cpu_count"] == os.cpu_count()
    assert results["machine"]["cpu_model"]
    assert results["settings"] == {
        "suites": ["layers"],
        "size": "tiny",
        "repeats": 1,
        "warmup": 1,
        "min_time": 0.0,
    }
    assert results["command"].startswith("zoo bench layers --size tiny --repeats 1")
    assert len(results["cases"]) == (len(PAIRED) + len(ALONE)) * len(DIRECTIONS)
    for case in results["cases"]:
        ours = case["ours"]
        assert len(ours["seconds"]) == 1 and ours["median"] > 0
        assert ours["first_call"] > 0  # the warm-up call, timed apart
        if case["reference"] is None:
            assert case["ratio"] is None
        else:
            expected = ours["median"] / case["reference"]["median"]
            assert case["ratio"] == pytest.approx(expected)
    # The goal it is evidence for is judged, whatever the verdict.
    (goal,) = results["goals"]
    assert "MultiHeadAttention" in goal["goal"] and isinstance(goal["met"], bool)


def _xla_case(preset, xla_seconds, plain_seconds, new_shape_xla, steps_per_shape):
    return bench.Case(
        "train",
        f"{preset} train_on_batch: XLA vs no XLA",
        "B=64",
        "jit_compile=True (XLA) vs False (tf.function)",
        bench.Timing([xla_seconds]),
        bench.Timing([plain_seconds]),
        goal="xla",
        details={
            "preset": preset,
            "new_shape_first_step": {"xla": new_shape_xla, "no_xla": 0.2},
            "steps_per_shape": steps_per_shape,
        },
    )


@pytest.mark.parametrize(
    "steps_per_shape, xla_pays",
    [(40, False), (10_000, True)],
    ids=["few-steps-per-shape", "many-steps-per-shape"],
)
def test_xla_verdict_weighs_compilation_per_shape_against_faster_steps(
    monkeypatch, steps_per_shape, xla_pays
):
    from zoo.recipes.seq2seq import default_jit_compile

    # 0.1 s saved per step against 15 s more per shape: repaid after 148 steps.
    case = _xla_case("transformer_small", 0.2, 0.3, 15.0, steps_per_shape)
    verdict = bench.check_goals([case])[0]
    default = default_jit_compile(registry.recipe_class("transformer"))
    assert verdict["met"] == (default == xla_pays)
    assert "repaid after 148 steps" in verdict["evidence"]
    slower = _xla_case("rnnencdec_small", 0.3, 0.2, 9.0, 10_000)
    assert "never repaid" in bench.check_goals([slower])[0]["evidence"]


# The other suites at the tiniest size: every case timed, printed and saved.
# The train suite on TensorFlow also compiles every preset's step with XLA
# and times a new batch shape's compilation (minutes even at this size):
# it runs in the jax and torch processes here, and `zoo bench train` itself
# on TensorFlow.
SUITE_CASES = {"decode": 6, "train": 5, "export": 2}


@pytest.mark.parametrize(
    "suite",
    [
        "decode",
        pytest.param(
            "train",
            marks=pytest.mark.skipif(
                keras.backend.backend() == "tensorflow",
                reason="its XLA comparison compiles every preset: minutes; runs on jax and torch",
            ),
        ),
        pytest.param("export", marks=pytest.mark.tensorflow_only),
    ],
)
def test_each_suite_times_and_reports_every_case(suite, tmp_path):
    printed, results = run_tiny_bench(suite, tmp_path)
    rows = table_rows(printed, suite)
    assert len(rows) == len(results["cases"]) == SUITE_CASES[suite]
    assert results["settings"]["suites"] == [suite] and not results["skipped"]
    for row, case in zip(rows, results["cases"]):
        assert row[1] == case["case"]
        assert row[4].split()[0].replace(".", "").isdigit(), row
        assert case["ours"]["median"] > 0 and len(case["ours"]["seconds"]) == 1
        if case["reference"] is not None:
            assert case["ratio"] == pytest.approx(case["ours"]["median"] / case["reference"]["median"])
        if suite == "export":
            assert "same translations: yes" in row[7], row
    for goal in results["goals"]:
        assert isinstance(goal["met"], bool) and goal["evidence"]
