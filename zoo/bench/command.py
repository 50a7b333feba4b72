"""`zoo bench`'s command line: its arguments, the run of the suites in this
process, and the re-run in a child process for another backend."""

import argparse
import json
import os
import subprocess
import sys

from zoo.arguments import non_negative_float
from zoo.arguments import positive_int
from zoo.bench import report
from zoo.bench.decoding import bench_decode
from zoo.bench.export import bench_export
from zoo.bench.layers import bench_layers
from zoo.bench.sizes import DEFAULT_SIZE
from zoo.bench.sizes import SIZES
from zoo.bench.timing import DEFAULT_MIN_TIME
from zoo.bench.timing import MAX_ROUNDS_FACTOR
from zoo.bench.timing import Runner
from zoo.bench.training import bench_train
from zoo.errors import ZooUserError
from zoo.training import PRECISIONS

BENCHMARKS = {
    "layers": bench_layers,
    "decode": bench_decode,
    "train": bench_train,
    "export": bench_export,
}
SUITES = tuple(BENCHMARKS)
BACKENDS = ("tensorflow", "jax", "torch")


def run(
    suites,
    size=DEFAULT_SIZE,
    repeats=10,
    warmup=2,
    min_time=DEFAULT_MIN_TIME,
    command="zoo bench",
    log=None,
    mixed_precision=None,
):
    """Runs the benchmark suites in this process, on the current backend.

    Args:
        suites: names from `SUITES`.
        size: a key of `SIZES`.
        repeats: timed calls of each function (at least).
        warmup: untimed calls before them.
        min_time: seconds of timed calls that a quick case is repeated to
            fill (see `zoo.bench.timing.measure`).
        command: the command line to record with the results.
        log: a function of one progress line (default: print to stderr).
        mixed_precision: None, or "bfloat16" / "float16": the train suite
            then times that mixed precision against float32 instead of XLA
            against no XLA.

    Returns:
        `(results, cases)`: the JSON-ready results dict and the `Case`s.
    """
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # Every case compiles functions of its own, on purpose: TensorFlow's
        # warnings about frequent tracing say nothing here.
        tf.get_logger().setLevel("ERROR")
    runner = Runner(SIZES[size], warmup, repeats, min_time, log, mixed_precision)
    load_before = os.getloadavg()
    for suite in suites:
        runner.log(f"zoo bench: {suite} on {keras.backend.backend()}")
        BENCHMARKS[suite](runner)
    settings = {
        "suites": list(suites),
        "size": size,
        "repeats": repeats,
        "warmup": warmup,
        "min_time": min_time,
        "mixed_precision": mixed_precision,
    }
    return report.results(runner, settings, command, load_before), runner.cases


def add_parser(subcommands):
    """Adds `bench` to the `zoo` command line's subcommands."""
    parser = subcommands.add_parser(
        "bench",
        help="time the layers, decoding and training side by side, as ratios",
        description="Times our layers and choices against references in one run, "
        "and prints a Markdown table of medians and their ratios.",
    )
    parser.add_argument(
        "suite",
        nargs="?",
        default="all",
        choices=(*SUITES, "all"),
        help="what to time (default: all)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="the Keras backend (default: KERAS_BACKEND, else tensorflow)",
    )
    parser.add_argument("--out", help="also write the results as JSON to this file")
    parser.add_argument(
        "--size",
        choices=tuple(SIZES),
        default=DEFAULT_SIZE,
        help="tiny: a seconds-long check that every case runs; "
        "full (default): the sizes of real training and decoding",
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=10, help="timed calls of each side, at least"
    )
    parser.add_argument("--warmup", type=positive_int, default=2, help="untimed calls before them")
    trained = parser.add_argument_group(
        "decode --run: greedy, beam exact and beam early of a trained run on a test set; "
        "export --run: the Keras API, SavedModel, ONNX float32 and ONNX int8 of a trained "
        "run side by side (speed at batch 1 and 32, peak memory, size, BLEU)"
    )
    trained.add_argument("--run", metavar="DIR", help="a translation run directory to time")
    trained.add_argument(
        "--data",
        metavar="SOURCE,REFERENCE",
        help="its test set, as `zoo evaluate --data` reads it (default: the run's synthetic one)",
    )
    trained.add_argument("--limit", type=positive_int, help="the first N pairs only")
    trained.add_argument(
        "--beam", type=positive_int, help="beam width (default: 5 for decode, 1 for export)"
    )
    trained.add_argument(
        "--length-penalty", type=non_negative_float, default=0.6, help="GNMT alpha (default 0.6)"
    )
    parser.add_argument(
        "--min-time",
        type=non_negative_float,
        default=DEFAULT_MIN_TIME,
        help="repeat a quick case until its timed calls fill this many seconds "
        f"(at most {MAX_ROUNDS_FACTOR}x --repeats; default {DEFAULT_MIN_TIME})",
    )
    parser.add_argument(
        "--mixed-precision",
        choices=PRECISIONS,
        help="train suite: time this mixed precision against float32 (at the recipe's "
        "default jit_compile) instead of XLA against no XLA",
    )
    return parser


def command_line(args):
    """The `zoo bench` arguments that reproduce `args`."""
    argv = [args.suite, "--size", args.size, "--repeats", str(args.repeats)]
    argv += ["--warmup", str(args.warmup), "--min-time", str(args.min_time)]
    if args.backend:
        argv += ["--backend", args.backend]
    if args.out:
        argv += ["--out", args.out]
    if args.run:
        argv += ["--run", args.run] + (["--beam", str(args.beam)] if args.beam else [])
        argv += ["--length-penalty", str(args.length_penalty)]
        argv += ["--data", args.data] if args.data else []
        argv += ["--limit", str(args.limit)] if args.limit else []
    if args.mixed_precision:
        argv += ["--mixed-precision", args.mixed_precision]
    return argv


def _use_backend(backend):
    """Selects `backend` for this process; False when Keras is already loaded
    with another one (a process keeps its first backend for life)."""
    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend() == backend
    os.environ["KERAS_BACKEND"] = backend
    return True


def command(args):
    """Runs `zoo bench` with the parsed `args`: prints the report, writes
    `--out`. With a `--backend` other than the loaded one, it runs itself in
    a child process with that backend."""
    if args.run and args.suite not in ("decode", "export"):
        raise ZooUserError(
            f"--run times a trained run's decoding or serving: use `zoo bench decode --run` "
            f"or `zoo bench export --run`, not {args.suite!r}"
        )
    if args.run and args.suite == "decode" and args.beam is not None and args.beam < 2:
        raise ZooUserError(
            f"--beam must be 2 or more with --run (greedy is timed anyway); got {args.beam}"
        )
    argv = command_line(args)
    if args.backend and not _use_backend(args.backend):
        code = subprocess.call(
            [sys.executable, "-m", "zoo.bench", *argv],
            env=dict(os.environ, KERAS_BACKEND=args.backend),
        )
        if code:
            raise SystemExit(code)
        return
    if args.run:
        _bench_trained(args, "zoo bench " + " ".join(argv))
        return
    suites = SUITES if args.suite == "all" else (args.suite,)
    results, cases = run(
        suites,
        size=args.size,
        repeats=args.repeats,
        warmup=args.warmup,
        min_time=args.min_time,
        command="zoo bench " + " ".join(argv),
        mixed_precision=args.mixed_precision,
    )
    print(report.markdown_report(results, cases), flush=True)
    _write_results(results, args.out)


def _bench_trained(args, command_line):
    """A suite over a trained run (`--run`): `export` times the serving
    sides (greedy unless --beam), `decode` the searches (beam 5 unless
    --beam)."""
    if args.suite == "export":
        from zoo.bench import trained_serving as suite

        bench, beam = suite.bench_trained_serving, args.beam or 1
    else:
        from zoo.bench import trained_decoding as suite

        bench, beam = suite.bench_trained_run, args.beam or 5
    results = bench(
        args.run,
        data=args.data,
        limit=args.limit,
        beam=beam,
        length_penalty=args.length_penalty,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    results["command"] = command_line
    print(suite.markdown_table(results), flush=True)
    _write_results(results, args.out)


def _write_results(results, path):
    if path:
        with open(path, "w") as out:
            json.dump(results, out, indent=2)
            out.write("\n")


def main(argv=None):
    """`python -m zoo.bench ...`, the same as `zoo bench ...`."""
    parser = argparse.ArgumentParser(prog="zoo")
    add_parser(parser.add_subparsers(dest="command", required=True))
    command(parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)]))
    return 0
