"""A whole training run against the speed of its own compiled step, on the
current Keras backend (docs/performance.md, issue 48).

It trains a preset with `zoo.training.train` and reads the run's target
tokens/s. Then it times the run's train step alone: the same model, compiled
as the run compiles it, on one batch of each batch shape the run's epoch
holds, after that shape's compilation. The epoch's time at that speed is
each shape's step time times its number of batches. The ratio of the two
speeds is what the run loses to everything but its steps: compilations,
the input pipeline, validation, callbacks and checkpoints.

    KERAS_BACKEND=jax python -m zoo.bench.whole_run transformer_multi30k \\
        --data $D/train.en.gz,$D/train.de.gz --train-size 6000 --epochs 2

It prints one Markdown table row, and with `--out` writes a JSON file.
"""

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from zoo.arguments import positive_int

TIMED_STEPS = 3


def measure(preset, data, train_size, epochs, folder, jit_compile=None):
    """Trains `preset` in `folder` and times its step per batch shape;
    `jit_compile` None: the recipe's default on this backend.

    Returns:
        A JSON-ready dict: the run's seconds and target tokens/s, the step's
        target tokens/s over one epoch's shapes, their ratio, the number of
        shapes and the seconds their first steps took over the others.
    """
    import keras

    from zoo import runs
    from zoo.training import loop

    run = loop.train(
        preset, Path(folder) / "run", data=data, train_size=train_size, epochs=epochs,
        validation_bleu=False, jit_compile=jit_compile, verbose=0, evaluate_test=False,
    )
    metrics = runs.read_json(run / runs.METRICS)
    config = runs.read_json(run / runs.CONFIG)
    step = step_speed(config, run)
    whole = metrics["target_tokens_per_second"]
    return {
        "preset": preset,
        "backend": keras.backend.backend(),
        "jit_compile": step["jit_compile"],
        "train_size": train_size,
        "epochs": epochs,
        "train_seconds": metrics["train_seconds"],
        "whole_run_tokens_per_second": whole,
        "step_tokens_per_second": step["tokens_per_second"],
        "step_over_whole_run": round(step["tokens_per_second"] / whole, 2),
        "batch_shapes": step["shapes"],
        "first_step_extra_seconds": step["first_step_extra_seconds"],
        "per_shape": step["per_shape"],
    }


def step_speed(config, run):
    """The target tokens/s of the train step of run directory `run` (whose
    config.json is `config`) alone over one epoch of its batches, each
    shape timed after its first (compiling) step."""
    import keras
    import numpy as np

    from zoo import registry
    from zoo.recipes.contract import PAD_ID
    from zoo.tasks import task_for
    from zoo.training import loop
    from zoo.training.config import of_run
    from zoo.training.jit_compile import pads_to_fixed_shapes
    from zoo.training.jit_compile import train_step_jit_compile

    training = of_run(config)
    task = task_for(registry.get_preset(config["preset"]))
    jit = train_step_jit_compile(config["recipe"], training)
    task_data = task.prepare_data(
        training, task.load_splits(training), run, fixed_shapes=pads_to_fixed_shapes(jit)
    )
    batches, counts, shape_tokens = {}, collections.Counter(), collections.Counter()
    for inputs, targets in task_data.train_data(range(1)).as_numpy_iterator():
        shape = tuple(value.shape for value in (*inputs.values(), targets))
        batches.setdefault(shape, (inputs, targets))
        counts[shape] += 1
        shape_tokens[shape] += int(np.sum(targets != PAD_ID))
    tokens = sum(shape_tokens.values())
    keras.utils.set_random_seed(training.seed)
    model = loop.compiled_model(config, training, jit, task_data.batches_per_epoch)
    seconds, extra, per_shape = 0.0, 0.0, []
    for shape, (inputs, targets) in batches.items():
        first = _seconds(lambda: model.train_on_batch(inputs, targets))
        typical = statistics.median(
            _seconds(lambda: model.train_on_batch(inputs, targets)) for _ in range(TIMED_STEPS)
        )
        seconds += counts[shape] * typical
        extra += first - typical
        per_shape.append(
            {
                "target_shape": list(shape[-1]),
                "batches": counts[shape],
                "target_tokens": shape_tokens[shape],
                "step_seconds": round(typical, 4),
                "first_step_seconds": round(first, 2),
            }
        )
    return {
        "jit_compile": jit,
        "tokens_per_second": round(tokens / seconds, 1),
        "shapes": len(batches),
        "first_step_extra_seconds": round(extra, 1),
        "per_shape": per_shape,
    }


def _seconds(call):
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def markdown_row(result):
    return (
        f"| {result['preset']} | {result['backend']} | {result['jit_compile']} "
        f"| {result['batch_shapes']} | {result['train_seconds']} s "
        f"| {result['whole_run_tokens_per_second']:,.0f} | {result['step_tokens_per_second']:,.0f} "
        f"| {result['step_over_whole_run']}x | {result['first_step_extra_seconds']} s |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m zoo.bench.whole_run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("preset")
    parser.add_argument("--data", help="SOURCE,TARGET training files (default: the preset's)")
    parser.add_argument("--train-size", type=positive_int, help="use at most N pairs")
    parser.add_argument("--epochs", type=positive_int, default=2)
    parser.add_argument(
        "--jit-compile", choices=("on", "off"),
        help="compile the train step or not (default: the recipe's choice on this backend)",
    )
    parser.add_argument("--out", help="also write the result as JSON to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        jit_compile = None if args.jit_compile is None else args.jit_compile == "on"
        result = measure(
            args.preset, args.data, args.train_size, args.epochs, folder, jit_compile
        )
    print(markdown_row(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
