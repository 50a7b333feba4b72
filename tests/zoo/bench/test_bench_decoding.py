"""`zoo bench decode` at the tiniest size: every case timed, printed and saved."""

from bench_checks import check_every_case_is_timed


def test_the_decode_suite_times_and_reports_every_case(tmp_path):
    # Keys projected once (2 loops), beam and its floor (1 batch), the cache
    # step (2 lengths).
    rows, results = check_every_case_is_timed("decode", tmp_path, 6)
    lengths = [case["decoded_length"] for case in results["cases"] if "decoded_length" in case]
    assert lengths == [2, 4]
