"""`zoo bench`'s command line outside a suite run: the entry point a
re-run for another backend uses, and a parser free of Keras."""

import subprocess
import sys


def test_python_m_zoo_bench_is_the_zoo_bench_command():
    # `zoo bench --backend B` re-runs itself as `python -m zoo.bench` when
    # this process has loaded Keras with another backend.
    done = subprocess.run(
        [sys.executable, "-m", "zoo.bench", "--help"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("usage: zoo bench [-h] [--backend {tensorflow,jax,torch}]")
    assert "--min-time MIN_TIME" in done.stdout


def test_importing_the_bench_package_loads_no_keras():
    # The `zoo` parser imports zoo.bench to add its subcommand, and stays quick.
    code = (
        "import sys, zoo.bench; print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('keras', 'tensorflow', 'jax', 'torch')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
