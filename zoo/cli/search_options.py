"""What the commands that decode with a trained run share: the search's
flags (`add_search_flags`), the run's own search settings for those left
out (`settle_search`) and their check (`search_settings`), the
`--progress` flag, and opening a run for the command that decodes its
task. Keras-free at import."""

import argparse
from pathlib import Path

from zoo.arguments import non_negative_float
from zoo.arguments import positive_int
from zoo.cli.errors import UserError
from zoo.errors import ZooUserError
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


def add_search_flags(parser, beam_help="beam width (1: greedy)", coverage=True):
    """The search's flags: --beam, --length-penalty, --coverage-penalty
    (where the command's search has it) and --beam-stop. Each left out is
    the run's own (`settle_search`): its preset's search settings, stored in
    its config.json, else `SearchSettings`' defaults."""
    defaults = SearchSettings()
    run_default = "default: the run's preset's search, else"
    parser.add_argument(
        "--beam", type=positive_int, help=f"{beam_help} ({run_default} {defaults.beam})"
    )
    parser.add_argument(
        "--length-penalty",
        type=non_negative_float,
        metavar="A",
        help="GNMT length penalty of beam search: a hypothesis' log-probability is divided by "
        f"((5 + length) / 6) ** A (0: none; greedy search ignores it; {run_default} "
        f"{defaults.length_penalty})",
    )
    if coverage:
        parser.add_argument(
            "--coverage-penalty",
            type=non_negative_float,
            metavar="B",
            help="GNMT coverage penalty of beam search: B times the sum over source words of "
            "log(min(attention summed over the target, 1)) is added to a finished hypothesis' "
            f"score (0: none; greedy search ignores it; {run_default} "
            f"{defaults.coverage_penalty})",
        )
    parser.add_argument(
        "--beam-stop",
        choices=STOPPING_RULES,
        help="when beam search ends a sentence: early (once it has K finished hypotheses that "
        "no live one beats at its length) or exact (once none can win at the step limit; "
        f"slower) ({run_default} {defaults.stopping})",
    )


def settle_search(args):
    """Sets each search flag of `args` left out to the run's own setting:
    the search settings of `args.run_dir`'s config.json (its preset's),
    else `SearchSettings`' defaults. A run that can't be read gets the
    defaults here; opening it then says what is wrong."""
    from zoo import registry
    from zoo import runs

    try:
        config = runs.read_json(Path(args.run_dir) / runs.CONFIG)
    except (OSError, ValueError, ZooUserError):
        config = {}
    stored = registry.search_of(config if isinstance(config, dict) else {})
    for name, value in stored.items():
        flag = "beam_stop" if name == "stopping" else name
        if hasattr(args, flag) and getattr(args, flag) is None:
            setattr(args, flag, value)


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
