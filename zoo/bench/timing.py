"""The timing core of `zoo bench`: side-by-side measurement and its rows."""

import math
import sys
import time
from dataclasses import dataclass
from dataclasses import field

import numpy as np

# `measure` repeats a quick case up to this many times `--repeats`.
MAX_ROUNDS_FACTOR = 10
DEFAULT_MIN_TIME = 1.0


@dataclass
class Timing:
    """The timed calls of one function, in seconds.

    `first` is the first warm-up call (tracing and compilation included),
    None without warm-up.
    """

    seconds: list
    first: float = None

    @property
    def median(self):
        return float(np.median(self.seconds))

    @property
    def quartiles(self):
        return tuple(float(q) for q in np.percentile(self.seconds, [25, 75]))

    def scaled(self, factor):
        """The same timing per item, e.g. per sentence of a batch."""
        return Timing(
            [s * factor for s in self.seconds],
            None if self.first is None else self.first * factor,
        )

    def to_json(self):
        low, high = self.quartiles
        return {
            "median": self.median,
            "q25": low,
            "q75": high,
            "min": min(self.seconds),
            "max": max(self.seconds),
            "first_call": self.first,
            "seconds": self.seconds,
        }


def finish(outputs):
    """Brings every output to the host, so an asynchronous backend's work is
    done before the clock stops."""
    import keras

    for leaf in keras.tree.flatten(outputs):
        if leaf is not None:
            keras.ops.convert_to_numpy(leaf)


def timed_call(function):
    """Seconds of one call of `function`, its outputs brought to the host."""
    start = time.perf_counter()
    finish(function())
    return time.perf_counter() - start


def measure(functions, warmup, repeats, min_time=0.0):
    """Times argument-free `functions` side by side.

    Each is called `warmup` times untimed, then all are called in turn, round
    after round: interleaved, so that a load change on a shared machine slows
    every function alike instead of the one that happened to run then, and in
    the reverse order every other round, so that none always runs right after
    the other (with its caches warm or cold).

    There are `repeats` rounds, or more for quick functions: as many as fill
    `min_time` seconds at the speed of the last warm-up round, up to
    `MAX_ROUNDS_FACTOR * repeats`, since a median of a few quick calls says
    little on a busy machine.

    Returns one `Timing` per function.
    """
    warmups = [[timed_call(function) for _ in range(warmup)] for function in functions]
    rounds = repeats
    if min_time > 0 and warmup > 0:
        round_time = max(sum(calls[-1] for calls in warmups), 1e-9)
        rounds = max(repeats, min(MAX_ROUNDS_FACTOR * repeats, math.ceil(min_time / round_time)))
    seconds = [[] for _ in functions]
    for round_ in range(rounds):
        order = list(zip(functions, seconds))
        for function, times in order if round_ % 2 == 0 else reversed(order):
            times.append(timed_call(function))
    return [
        Timing(times, calls[0] if calls else None) for times, calls in zip(seconds, warmups)
    ]


@dataclass
class Case:
    """One row of the table: ours against a reference, or ours alone.

    `note` adds what the times mean (throughput, per sentence, steps).
    """

    suite: str
    name: str
    size: str
    compiled: str
    ours: Timing
    reference: Timing = None
    note: str = ""
    details: dict = field(default_factory=dict)

    @property
    def ratio(self):
        """ours / reference at the median; below 1: ours is faster."""
        if self.reference is None:
            return None
        return self.ours.median / self.reference.median

    def to_json(self):
        return {
            "suite": self.suite,
            "case": self.name,
            "size": self.size,
            "compiled": self.compiled,
            "ours": self.ours.to_json(),
            "reference": None if self.reference is None else self.reference.to_json(),
            "ratio": self.ratio,
            "note": self.note,
            **self.details,
        }


class Runner:
    """Runs cases with one size and one measuring setting, and collects them."""

    def __init__(self, size, warmup, repeats, min_time=0.0, log=None, mixed_precision=None):
        self.size = size
        self.mixed_precision = mixed_precision
        self.warmup = warmup
        self.repeats = repeats
        self.min_time = min_time
        self.cases = []
        self.skipped = []
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))

    def pair(
        self, suite, name, size, compiled, ours, reference=None, note="", scale=1.0, details=None
    ):
        """Measures `ours` (and `reference`) side by side and records the row.

        `scale` converts a call's time to the reported unit (e.g. 1/batch for
        a time per sentence). Returns the `Case`.
        """
        self.log(f"  {suite}: {name} [{size}]")
        functions = [ours] if reference is None else [ours, reference]
        timings = measure(functions, self.warmup, self.repeats, self.min_time)
        timings = [timing.scaled(scale) for timing in timings]
        reference_timing = timings[1] if reference is not None else None
        case = Case(suite, name, size, compiled, timings[0], reference_timing, note, details or {})
        self.cases.append(case)
        return case

    def skip(self, suite, reason):
        self.log(f"  {suite}: skipped: {reason}")
        self.skipped.append({"suite": suite, "reason": reason})


def compiled_with():
    """How `zoo.inference.search_choice.compile_inference` runs a function on this backend."""
    import keras

    return {"tensorflow": "tf.function", "jax": "jax.jit"}.get(keras.backend.backend(), "eager")
