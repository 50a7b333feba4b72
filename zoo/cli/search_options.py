"""What the commands that decode with a trained run share: the search's
flags (`--beam-stop`, `--length-penalty`) and their check
(`search_settings`), the `--progress` flag, and opening a run for the
command that decodes its task. Keras-free at import."""

import argparse

from zoo.arguments import non_negative_float
from zoo.cli.errors import UserError
from zoo.inference.search_settings import STOPPING_RULES
from zoo.inference.search_settings import SearchSettings
from zoo.tasks import task_for


class FlagSearchSettings(SearchSettings):
    """`SearchSettings` whose errors name the command line's flags."""

    NAMES = {
        "beam": "--beam",
        "length_penalty": "--length-penalty",
        "coverage_penalty": "--coverage-penalty",
        "stopping": "--beam-stop",
        "n_best": "--n-best",
    }


def search_settings(args, error):
    """The search flags of `args`, checked (`zoo.inference.search_settings`)
    before the model loads: a `SearchSettings`, or `error` naming the flag."""
    values = {
        name: getattr(args, "beam_stop" if name == "stopping" else name, None)
        for name in FlagSearchSettings.NAMES
    }
    arguments = {name: value for name, value in values.items() if value is not None}
    return FlagSearchSettings.checked(error, **arguments)


def add_beam_stop(parser):
    parser.add_argument(
        "--beam-stop",
        choices=STOPPING_RULES,
        default="early",
        help="when beam search ends a sentence: early (default; once it has K finished "
        "hypotheses that no live one beats at its length) or exact (once none can win "
        "at the step limit; slower)",
    )


def add_length_penalty(parser):
    parser.add_argument(
        "--length-penalty",
        type=non_negative_float,
        default=0.6,
        metavar="A",
        help="GNMT length penalty of beam search: a hypothesis' log-probability is divided by "
        "((5 + length) / 6) ** A (default 0.6; 0: none; greedy search ignores it)",
    )


def add_progress_flag(parser):
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="show sentences done and sentences/s on stderr (default: when stderr is a terminal)",
    )


def open_run(args, command):
    """The run of `args.run_dir` for `zoo COMMAND`: refused, naming the
    command that decodes it, if its task is another's; a bad --plot path
    fails before decoding."""
    import zoo
    from zoo.evaluation import plots

    run = zoo.load(args.run_dir)
    task = task_for(run.config)
    if task.command != command:
        raise UserError(f"{args.run_dir!r} is a {task.name} run: use `zoo {task.command}`")
    if args.plot:
        plots.prepare_output(args.plot)
    return run
