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
