"""`zoo bench layers` at the tiniest size: a complete table and results file.

Speed itself is never asserted: these check that the benchmark keeps
working and reports every case, on every backend.
"""

import os

import keras
import pytest
from bench_checks import run_tiny_bench
from bench_checks import table_rows

# The rows the layers suite promises: ours against Keras' layer where one
# computes the same thing, our layers alone where none does.
PAIRED = (
    "MultiHeadAttention vs keras.layers.MultiHeadAttention",
    "MultiHeadAttention vs keras.layers.MultiHeadAttention, causal",
    "LuongAttention(dot) vs keras.layers.Attention",
    "LocalAttention(local-p, general, D=1) vs LuongAttention(general)",
)
ALONE = ("AdditiveAttention(units=8)",)
DIRECTIONS = ("forward", "forward+backward")


@pytest.fixture(scope="module")
def layers_run(tmp_path_factory):
    return run_tiny_bench("layers", tmp_path_factory.mktemp("bench"))


def test_the_table_has_every_case_with_times_and_ratios(layers_run):
    printed, _ = layers_run
    header = "| suite | case | size | compiled | ours | reference | ratio | note |"
    assert header in printed
    rows = {row[1]: row for row in table_rows(printed, "layers")}
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
        "mixed_precision": None,
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
