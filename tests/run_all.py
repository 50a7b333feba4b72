"""The test command: the whole suite on every Keras backend.

Runs pytest in six processes side by side (a Keras process has one
backend for its whole life): the backend-agnostic tests on tensorflow, jax
(its layer tests and the others in two processes) and torch, and the
TensorFlow-only tests (marker `tensorflow_only`) in two tensorflow
processes of their own (tests/zoo/training and the rest). Extra arguments
are passed to every pytest run, e.g. `python tests/run_all.py -k additive`.
Exits non-zero if any run fails.
"""

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

# name -> (KERAS_BACKEND, pytest arguments, environment). The TensorFlow-only
# tests are the longest share of the tensorflow process (their training
# half, tests/zoo/training, as long as the rest), and the layer tests half of
# the jax one (jax compiles every eager op anew), so each gets a process of
# its own, which the cores pick up when the shorter runs end.
# The tests marked `backend_independent` run only in the torch run, which
# ends first (tests/conftest.py skips them where ONCE is set).
ONCE = {"ZOO_TEST_SKIP_BACKEND_INDEPENDENT": "1"}
RUNS = {
    "tensorflow": ("tensorflow", ["-m", "not tensorflow_only"], ONCE),
    "tensorflow-only": ("tensorflow", ["-m", "tensorflow_only"], {"ZOO_TEST_SHARE": "not-training", **ONCE}),
    "tensorflow-training": ("tensorflow", ["-m", "tensorflow_only"], {"ZOO_TEST_SHARE": "training", **ONCE}),
    "jax-layers": ("jax", [], {"ZOO_TEST_SHARE": "layers", **ONCE}),
    "jax-others": ("jax", [], {"ZOO_TEST_SHARE": "others", **ONCE}),
    "torch": ("torch", [], {}),
}
# pytest's exit code when a selection (e.g. -k) matches no test in one backend.
NO_TESTS_COLLECTED = 5
# One thread per kernel in every run: six processes share CI's two cores,
# and threaded kernels there mostly wait on each other (docs/performance.md).
# TensorFlow keeps its inter-op threads, which the distribution tests'
# collectives need. A value already in the environment wins.
ONE_THREAD_PER_KERNEL = {
    "OMP_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}
# How many of each run's slowest tests the summary names.
SLOWEST_SHOWN = 8


def jax_compilation_cache(folder):
    """jax's persistent compilation cache in `folder`, for every compilation.

    Keras gives each new model new jitted functions, which jax compiles anew
    even when the program is one it compiled for an earlier test; the
    persistent cache is keyed by the program, so those tests reuse it.
    """
    return {
        "JAX_COMPILATION_CACHE_DIR": folder,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def start_run(name, extra_args, report, log, jax_cache):
    """Starts the pytest run `name` of RUNS; its output goes to the file `log`."""
    backend, run_args, run_env = RUNS[name]
    env = dict(ONE_THREAD_PER_KERNEL)
    env.update(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", **run_env)
    if backend == "jax":
        env.update(jax_compilation_cache(jax_cache))
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
        f"--junitxml={report}", *run_args, *extra_args,
    ]
    print(f"===== {name} (KERAS_BACKEND={backend}): started {' '.join(command[1:])}", flush=True)
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def count_results(report):
    """(passed, failed, skipped) from a pytest JUnit XML report."""
    if not Path(report).exists():
        return 0, 0, 0
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return tests - failed - skipped, failed, skipped


def slowest_tests(report, count=SLOWEST_SHOWN):
    """[(seconds, test id)] of the `count` slowest tests in a JUnit XML report."""
    if not Path(report).exists():
        return []
    cases = ElementTree.parse(report).getroot().iter("testcase")
    timed = [
        (float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}")
        for case in cases
    ]
    return sorted(timed, reverse=True)[:count]


def time_by_file(report, count=SLOWEST_SHOWN):
    """[(seconds, test module)] of the `count` test files that took longest
    in a JUnit XML report, their tests' times summed."""
    if not Path(report).exists():
        return []
    totals = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        # classname is the module's dotted path, then a test class if any.
        parts = case.get("classname").split(".")
        module = ".".join(p for p in parts if not p.startswith("Test"))
        totals[module] = totals.get(module, 0.0) + float(case.get("time", 0))
    return sorted(((seconds, module) for module, seconds in totals.items()), reverse=True)[:count]


def main(argv):
    # The runs go side by side: most tests are small, single-threaded steps,
    # so on CI's 2 cores they take little more together than the longest one
    # alone. Each run's output is printed whole when it ends.
    with tempfile.TemporaryDirectory() as reports:
        started = time.monotonic()
        runs, results = {}, {}
        for name in RUNS:
            log = open(os.path.join(reports, f"{name}.log"), "w+")
            report = os.path.join(reports, f"{name}.xml")
            jax_cache = os.path.join(reports, "jax-cache")
            runs[name] = (start_run(name, argv, report, log, jax_cache), log, report)
        pending = dict(runs)
        while pending:
            for name, (process, log, _) in list(pending.items()):
                if process.poll() is None:
                    continue
                del pending[name]
                results[name] = process.returncode
                log.seek(0)
                print(f"\n===== {name}: output", flush=True)
                sys.stdout.write(log.read())
                log.close()
                print(
                    f"===== {name}: exit {process.returncode} "
                    f"after {time.monotonic() - started:.0f} s",
                    flush=True,
                )
            time.sleep(1)
        counts = [count_results(runs[name][2]) for name in RUNS]
        # So that a test that grew slow is seen where the suite's time goes.
        for name in RUNS:
            print(f"\n===== {name}: slowest tests")
            for seconds, test in slowest_tests(runs[name][2]):
                print(f"{seconds:8.1f} s  {test}")
            print(f"===== {name}: slowest test files, their tests' times summed")
            for seconds, module in time_by_file(runs[name][2]):
                print(f"{seconds:8.1f} s  {module}")
    failed = [n for n, code in results.items() if code not in (0, NO_TESTS_COLLECTED)]
    if all(code == NO_TESTS_COLLECTED for code in results.values()):
        failed = list(RUNS)
    print("\n===== " + ", ".join(f"{n}: {'ok' if n not in failed else 'FAILED'}" for n in RUNS))
    passed, failures, skipped = (sum(c[i] for c in counts) for i in range(3))
    print(f"total: {passed} passed, {failures} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
