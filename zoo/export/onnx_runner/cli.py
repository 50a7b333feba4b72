"""`python run.py ...`: the command line of an export folder (`main`)."""

import argparse
import contextlib
import sys
from pathlib import Path

from .alignment import pharaoh_alignment
from .layout import CAPTIONING
from .layout import TRANSLATION
from .layout import InputError
from .layout import RunnerError
from .layout import read_manifest
from .search_settings import STOPPING_RULES
from .search_settings import check_search
from .serving import Captioner
from .serving import load


STDIN = "-"


def _parser(task):
    inputs = "image files" if task == CAPTIONING else "sentences"
    parser = argparse.ArgumentParser(
        prog="run.py",
        description=f"{'Caption' if task == CAPTIONING else 'Translate'} with this ONNX export "
        "(onnxruntime alone). Give the "
        f"{inputs} as arguments, or --input FILE (one a line; '-' for standard input). "
        "Outputs are written one a line, in input order; --output and --alignments "
        "files are written under a temporary name and renamed at the end, so an error "
        "leaves none.",
    )
    parser.add_argument("inputs", nargs="*", help=f"{inputs} to {'caption' if task == CAPTIONING else 'translate'}")
    parser.add_argument("--input", metavar="FILE", help="read one input a line ('-': standard input)")
    parser.add_argument("--output", metavar="FILE", help="write there (default: standard output)")
    # The search flags are checked with the requests' settings (`_check_arguments`).
    parser.add_argument("--beam", type=int, help="beam width (default: the export's)")
    parser.add_argument("--length-penalty", type=float)
    parser.add_argument("--coverage-penalty", type=float)
    parser.add_argument(
        "--beam-stop", help=f"beam search's stopping rule: {' or '.join(STOPPING_RULES)}"
    )
    parser.add_argument(
        "--n-best", type=_positive_int, help="the K best of each input, Moses' n-best format"
    )
    parser.add_argument("--batch-size", type=_positive_int, default=32, help="decoded at once")
    if task == TRANSLATION:
        parser.add_argument(
            "--alignments", metavar="FILE", help="write each word alignment there (Pharaoh format)"
        )
    parser.add_argument("--progress", action="store_true", help="show inputs done and inputs/s")
    return parser


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1; received {text!r}")
    return value


def read_lines(path, chunk_lines):
    """Yields `(first line number, lines)` chunks of a UTF-8 text file (or
    standard input for '-'), line ends removed; a line that is not UTF-8
    raises `InputError` naming it."""
    name = "standard input" if path == STDIN else repr(path)
    stream = sys.stdin.buffer if path == STDIN else open(path, "rb")
    try:
        number, lines, first = 0, [], 1
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise InputError(
                    f"{name}: line {number} is not valid UTF-8 "
                    f"(byte 0x{raw[bad.start]:02x} at byte {bad.start + 1} of the line)"
                ) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            lines.append(line.rstrip("\r\n"))
            if len(lines) == chunk_lines:
                yield first, lines
                first, lines = number + 1, []
        if lines:
            yield first, lines
    finally:
        if path != STDIN:
            stream.close()


class _Replacing:
    """A file written under a temporary name beside `path` and renamed to
    it on success; removed on failure, so no half-written output is left."""

    def __init__(self, path):
        self.path = Path(path)
        self.temporary = self.path.with_name(f".{self.path.name}.partial")

    def __enter__(self):
        self.file = open(self.temporary, "w", encoding="utf-8", newline="\n")
        return self.file

    def __exit__(self, kind, value, traceback):
        self.file.close()
        if kind is None:
            self.temporary.replace(self.path)
        else:
            self.temporary.unlink(missing_ok=True)
        return False


class _Progress:
    """`N done, X/s` on standard error, rewritten in place."""

    def __init__(self, shown):
        import time

        self.clock = time.perf_counter
        self.start = self.clock()
        self.done = 0
        self.shown = shown

    def __call__(self, count):
        self.done += count
        if self.shown:
            rate = self.done / max(self.clock() - self.start, 1e-9)
            sys.stderr.write(f"\r{self.done} done, {rate:.1f}/s")
            sys.stderr.flush()

    def close(self):
        if self.shown and self.done:
            sys.stderr.write("\n")


def _check_arguments(args):
    """The flags' one-line errors, before the model is loaded."""
    flags = {
        "beam": args.beam,
        "length_penalty": args.length_penalty,
        "coverage_penalty": args.coverage_penalty,
        "stopping": args.beam_stop,
    }
    check_search({name: value for name, value in flags.items() if value is not None})
    if bool(args.inputs) == bool(args.input):
        raise RunnerError("give inputs as arguments or --input FILE ('-' for standard input), not both")
    if args.input and args.input != STDIN and not Path(args.input).is_file():
        raise RunnerError(f"input file {args.input!r} does not exist or is not a file")
    for flag in ("output", "alignments"):
        path = getattr(args, flag, None)
        if path is None:
            continue
        path = Path(path)
        if path.is_dir():
            raise RunnerError(f"--{flag} {str(path)!r} is a folder; name a file")
        if not path.parent.is_dir():
            raise RunnerError(f"--{flag} {str(path)!r}: folder {str(path.parent)!r} does not exist")


def _length_note(sentence, translation, limit):
    """What was done to a source longer than `limit` pieces, or None."""
    if translation.parts <= 1 and not translation.cut_parts:
        return None
    note = f"{len(sentence.split())} words, longer than the model's {limit}-piece limit"
    if translation.parts > 1:
        note += f"; split into {translation.parts} sentences"
        if translation.cut_parts:
            note += f", {translation.cut_parts} of them cut after piece {limit}"
        return note
    return note + f"; cut after piece {limit}"


def _n_best_lines(index, entries):
    return "".join(
        f"{index} ||| {h.text} ||| log_prob= {h.score:.4f} finished= {int(h.finished)} "
        f"||| {h.penalized_score:.4f}\n"
        for h in entries
    )


def serve(server, args, out, alignments, progress):
    """Decodes the inputs of `args` in requests of at most `max_batch` (and
    `--batch-size` a batch), writing each output line in input order."""
    chunk = min(server.limits["max_batch"], max(args.batch_size, 1) * 8)
    if args.inputs:
        chunks = ((1 + s, args.inputs[s : s + chunk]) for s in range(0, len(args.inputs), chunk))
    else:
        chunks = read_lines(args.input, chunk)
    options = dict(
        beam=args.beam,
        length_penalty=args.length_penalty,
        coverage_penalty=args.coverage_penalty,
        stopping=args.beam_stop,
        n_best=args.n_best or 0,
        batch_size=args.batch_size,
        progress=progress,
    )
    captioning = isinstance(server, Captioner)
    for start, lines in chunks:
        # A blank line of a file gives a blank output line, not decoded.
        rows = [r for r, line in enumerate(lines) if line.strip() or args.inputs]
        progress(len(lines) - len(rows))
        decode = server.caption if captioning else server.translate
        outputs = decode([lines[r] for r in rows], **options) if rows else []
        by_row = dict(zip(rows, outputs))
        for number, line in enumerate(lines, start=start):
            output = by_row.get(number - start)
            if output is None:
                out.write("" if args.n_best else "\n")
                if alignments:
                    alignments.write("\n")
                continue
            if not captioning:
                note = _length_note(line, output, server.max_source_length)
                if note:
                    sys.stderr.write(f"run.py: line {number}: {note}\n")
            if args.n_best:
                out.write(_n_best_lines(number - 1, output.n_best))
            else:
                out.write(output.text + "\n")
            if alignments:
                alignments.write(pharaoh_alignment(output) + "\n")
        out.flush()


def main(argv=None, folder=None):
    """`python run.py ...` (see `--help`): the folder is the one that holds
    this package (an export folder holds it beside its `run.py`), or
    `folder`. Returns the exit status: 0, or 2 after a one-line error."""
    folder = Path(folder) if folder is not None else Path(__file__).resolve().parents[1]
    try:
        task = read_manifest(folder)["task"]
        args = _parser(task).parse_args(argv)
        _check_arguments(args)
        server = load(folder)
        progress = _Progress(args.progress)
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(_Replacing(args.output)) if args.output else sys.stdout
            alignments = getattr(args, "alignments", None)
            if alignments:
                alignments = stack.enter_context(_Replacing(alignments))
            serve(server, args, out, alignments, progress)
        progress.close()
    except RunnerError as error:
        sys.stderr.write(f"run.py: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("run.py: interrupted; no output file was written\n")
        return 130
    return 0

