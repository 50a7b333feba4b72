"""The `zoo` command line.

    zoo list
    zoo train PRESET [--data SPEC] [--epochs N] [--out DIR] [--strategy S] [--mixed-precision P|auto|float32]
              [--jit-compile on|off] [--label-smoothing E] [--learning-rate LR] [--schedule S]
              [--warmup-steps N] [--average-last N] [--seed N]
              [--validation-bleu|--no-validation-bleu] [--tokenizer wordpiece|sentencepiece]
              [--shared-vocabulary] [--vocabulary-size N]
              (resumes DIR when it holds an unfinished run)
    zoo train PRESET --out DIR --epochs N --continue   (trains a finished run on to N epochs)
    zoo average DIR --last N [--out FILE]
    zoo evaluate DIR [--data SPEC] [--gold-alignments FILE] [--beam K] [--beam-stop early|exact]
                 [--progress]
    zoo translate DIR "a sentence" [--beam K] [--beam-stop early|exact] [--plot out.png]
    zoo translate DIR --input FILE|- [--output FILE] [--n-best K] [--alignments FILE]
    zoo caption DIR image.png [--beam K] [--beam-stop early|exact] [--plot out.png]
    zoo export DIR [--format saved_model|onnx] [--out PATH] [--beam K] [--beam-stop early|exact]
    zoo serve EXPORT_OR_RUN [--host 127.0.0.1] [--port N] [--model-name NAME] [--max-batch N] ...
    zoo bench [layers|decode|train|export|all] [--backend B] [--out results.json]
    zoo demo [--layers]

A user mistake (unknown preset, missing run directory or data file, bad
option, a command run without the TensorFlow extra it needs) prints one line
to stderr and exits with status 2; no traceback.

Each command is a module of this package with its `add_parser(commands)`
and `command(args)` (`zoo bench`'s is `zoo.bench`); this module assembles
the parser and runs `main`. The command modules import TensorFlow and Keras only
inside their functions, so that the arguments are checked first.
"""

import argparse
import contextlib
import importlib.util
import logging
import os
import sys

from zoo import extras
from zoo.cli import average
from zoo.cli import caption
from zoo.cli import demo
from zoo.cli import evaluate
from zoo.cli import export
from zoo.cli import list_presets
from zoo.cli import serve
from zoo.cli import train
from zoo.cli import translate
from zoo.cli.errors import USER_ERROR
from zoo.cli.errors import UserError
from zoo.errors import ZooUserError
from zoo.quiet_import import import_quietly
from zoo.tasks import check_run_directory

# Set before TensorFlow is first imported (by zoo.data, lazily): its C++ start-up
# chatter is not for the user of a command line.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build_parser():
    from zoo import bench  # keras-free at import: the parser stays quick

    parser = argparse.ArgumentParser(
        prog="zoo", description="keras-attention-zoo: attention layers and the papers' models."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    list_presets.add_parser(commands)
    train.add_parser(commands)
    average.add_parser(commands)
    evaluate.add_parser(commands)
    translate.add_parser(commands)
    caption.add_parser(commands)
    export.add_parser(commands)
    serve.add_parser(commands)
    bench.add_parser(commands)
    demo.add_parser(commands)
    return parser


def check_arguments(args):
    """The mistakes that the arguments alone show, raised before TensorFlow
    and Keras load (seconds): an unknown preset, nothing to translate."""
    if args.command == "train":
        train.check_arguments(args)
    elif args.command == "translate":
        translate.check_arguments(args, UserError)


def command_bench(args):
    from zoo import bench

    bench.command(args)


COMMANDS = {
    "list": list_presets.command,
    "train": train.command,
    "average": average.command,
    "evaluate": evaluate.command,
    "translate": translate.command,
    "caption": caption.command,
    "export": export.command,
    "serve": serve.command,
    "bench": command_bench,
    "demo": demo.command,
}

# The commands that always run on the TensorFlow stack (tf.data, tf-text
# tokenizers, sacrebleu, SavedModel, ONNX); `bench` needs it for some parts
# only, which missing_modules_as_user_errors reports when they import it.
TENSORFLOW_COMMANDS = ("train", "evaluate", "translate", "caption", "export", "demo")


def needs_tensorflow_extra(args):
    if args.command == "demo":
        return not args.layers  # the layer demo runs on Keras alone
    return args.command in TENSORFLOW_COMMANDS


def imports_tensorflow(args):
    """Whether the command will load TensorFlow: it needs the extra, or Keras
    runs on its TensorFlow backend (the default when KERAS_BACKEND is unset)."""
    if args.command == "list":
        return False
    if args.command == "serve":
        return serve.loads_tensorflow(args)  # an ONNX export is served without it
    if needs_tensorflow_extra(args):
        return True
    return (
        os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow"
        and importlib.util.find_spec("tensorflow") is not None
    )


@contextlib.contextmanager
def _warnings_to_stderr(command):
    """The `zoo` loggers' warnings (a resumed run, a damaged checkpoint, a
    skipped image) as `zoo COMMAND: ...` lines on stderr, for this call only."""
    logger = logging.getLogger("zoo")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(f"zoo {command}: %(message)s"))
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return USER_ERROR
    try:
        with _warnings_to_stderr(args.command), extras.missing_modules_as_user_errors():
            if needs_tensorflow_extra(args):
                extras.require()  # before a run directory or any output is made
            # The arguments alone first, then the run directory's files
            # (whose check may warn): both before TensorFlow and the backend load.
            check_arguments(args)
            if getattr(args, "run_dir", None) is not None:
                check_run_directory(args.run_dir)
            if imports_tensorflow(args):
                import_quietly("tensorflow")  # first, so that its start-up lines are held back
            COMMANDS[args.command](args)
    except ZooUserError as error:
        print(f"zoo {args.command}: error: {error}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print(f"zoo {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0
