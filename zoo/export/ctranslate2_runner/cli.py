"""`python run.py ...`: translate arguments or lines of a file (or of
standard input), one translation a line."""

import argparse
import sys
from pathlib import Path

from .layout import RunnerError
from .serving import DEFAULT_BATCH_SIZE
from .serving import Translator

# `--input`'s name for standard input.
STDIN = "-"


def _parser(search):
    parser = argparse.ArgumentParser(
        prog="run.py",
        description="Translate with this CTranslate2 export (ctranslate2 and sentencepiece "
        "alone). Sentences come from the arguments, or one a line from --input "
        "(standard input when no sentence is given); one translation a line comes out.",
    )
    parser.add_argument("sentences", nargs="*", help="sentences to translate")
    parser.add_argument(
        "--input", help=f"a file of sentences, one a line ({STDIN!r}: standard input)"
    )
    parser.add_argument(
        "--beam", type=int, default=search["beam"], help=f"beam width (default {search['beam']})"
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=search["length_penalty"],
        help="CTranslate2's length penalty alpha: a hypothesis' log-probability is divided "
        "by length ** alpha, not by GNMT's ((5 + length) / 6) ** alpha of keras-attention-zoo, "
        "so beam results can differ from `zoo translate` for alpha > 0 "
        f"(default {search['length_penalty']})",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"sentences translated at once (default {DEFAULT_BATCH_SIZE})",
    )
    return parser


def read_lines(path):
    """The lines of `path` (`STDIN`: standard input), without their ends."""
    if path == STDIN:
        return sys.stdin.read().splitlines()
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines()


def main(argv=None, folder="."):
    """Runs the command line over the export folder `folder`; returns the
    exit status (2 and a one-line message for a user mistake)."""
    try:
        translator = Translator(Path(folder))
        args = _parser(translator.search).parse_args(argv)
        sentences = args.sentences
        if args.input or not sentences:
            sentences = sentences + read_lines(args.input or STDIN)
        translations = translator.translate(
            sentences,
            beam=args.beam,
            length_penalty=args.length_penalty,
            batch_size=args.batch_size,
        )
    except (RunnerError, OSError, UnicodeDecodeError) as error:
        print(f"run.py: {error}", file=sys.stderr)
        return 2
    for translation in translations:
        print(translation.text)
    return 0
