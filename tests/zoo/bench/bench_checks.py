"""Shared checks of the `zoo bench` tests: one tiny run of a suite, and the
rows of the table it prints."""

import argparse
import contextlib
import io
import json

import pytest

from zoo import bench


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


def table_rows(printed, suite):
    """The Markdown table's body rows, as lists of cells."""
    rows = [line for line in printed.splitlines() if line.startswith(f"| {suite} |")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def check_every_case_is_timed(suite, folder, cases):
    """Runs `suite` tiny and checks that its `cases` rows are printed and
    saved, each timed once, with the ratio of the medians; returns
    `(rows, results)`."""
    printed, results = run_tiny_bench(suite, folder)
    rows = table_rows(printed, suite)
    assert len(rows) == len(results["cases"]) == cases
    assert results["settings"]["suites"] == [suite] and not results["skipped"]
    for row, case in zip(rows, results["cases"]):
        assert row[1] == case["case"]
        assert row[4].split()[0].replace(".", "").isdigit(), row
        assert case["ours"]["median"] > 0 and len(case["ours"]["seconds"]) == 1
        if case["reference"] is not None:
            expected = case["ours"]["median"] / case["reference"]["median"]
            assert case["ratio"] == pytest.approx(expected)
    return rows, results
