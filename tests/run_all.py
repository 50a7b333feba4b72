"""The test command: the whole suite on every Keras backend.

Runs pytest once per backend in a separate process (a Keras process has one
backend for its whole life): the backend-agnostic tests on tensorflow, jax
and torch, and the TensorFlow-only tests (marker `tensorflow_only`) in the
tensorflow run alone. Extra arguments are passed to every pytest run, e.g.
`python tests/run_all.py -k additive`. Exits non-zero if any run fails.
"""

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

BACKENDS = ("tensorflow", "jax", "torch")
# pytest's exit code when a selection (e.g. -k) matches no test in one backend.
NO_TESTS_COLLECTED = 5


def run_backend(backend, extra_args, report):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
        f"--junitxml={report}", *extra_args,
    ]
    print(f"\n===== KERAS_BACKEND={backend}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    code = subprocess.call(command, env=env)
    print(f"===== KERAS_BACKEND={backend}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code


def count_results(report):
    """(passed, failed, skipped) from a pytest JUnit XML report."""
    if not Path(report).exists():
        return 0, 0, 0
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return tests - failed - skipped, failed, skipped


def main(argv):
    with tempfile.TemporaryDirectory() as reports:
        results, counts = {}, []
        for backend in BACKENDS:
            report = os.path.join(reports, f"{backend}.xml")
            results[backend] = run_backend(backend, argv, report)
            counts.append(count_results(report))
    failed = [b for b, code in results.items() if code not in (0, NO_TESTS_COLLECTED)]
    if all(code == NO_TESTS_COLLECTED for code in results.values()):
        failed = list(BACKENDS)
    print("\n===== " + ", ".join(f"{b}: {'ok' if b not in failed else 'FAILED'}" for b in BACKENDS))
    passed, failures, skipped = (sum(c[i] for c in counts) for i in range(3))
    print(f"total: {passed} passed, {failures} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
