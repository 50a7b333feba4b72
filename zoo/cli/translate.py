"""`zoo translate`: sentences or a file in, one translation a line out.

A file (or standard input) is read and translated a chunk of lines at a
time, so that a file of any length is never held in memory; the translator
sorts each chunk by length into batches, and the translations are written
in input order. `--output` and `--alignments` files are written under a
temporary name beside them and renamed when the input is done (see
`zoo.files.replacing`): an error or an interrupt leaves no output file.

Output formats:
- translations: one line per input line; a blank (or white-space) line of
  the input file gives a blank line and is not decoded. (A positional
  sentence is translated as given: an empty one is read as a lone EOS, as
  `Translator.translate` and the exported signature read it.)
- `--n-best K`: Moses' n-best format, K lines per input line, best first,
  `LINE ||| TRANSLATION ||| log_prob= LOGP finished= F ||| SCORE` where LINE
  counts input lines from 0, LOGP is log P(translation | source), F is 1 for
  a hypothesis that ended with EOS and 0 for an unfinished one that fills
  the list, and SCORE the penalised score the beam ranked by (descending);
  a blank line has none.
- `--alignments FILE`: Pharaoh format, one line per input line, `i-j` links
  between source word i and target word j of the best translation (0-based;
  words as the tokenizer splits them, punctuation a word of its own); see
  `zoo.evaluation.alignment`.
"""

import contextlib
import itertools
import sys
from pathlib import Path

from zoo.arguments import positive_int
from zoo.cli import progress as progress_line
from zoo.cli.search_options import add_search_flags
from zoo.cli.search_options import add_progress_flag
from zoo.cli.search_options import open_run
from zoo.cli.search_options import search_settings
from zoo.cli.search_options import settle_search
from zoo.cli.errors import UserError
from zoo.files import check_writable
from zoo.files import replacing

STDIN = "-"


def add_parser(commands):
    translate = commands.add_parser(
        "translate",
        help="translate sentences or a file with a trained run",
        description="Translate the sentences given, or each line of --input, writing one "
        "translation a line in input order. A file is read and translated in chunks, so it "
        "may be of any length. An input longer than the run's limit is split after '. ! ?' and "
        "the parts' translations joined; a part still too long is cut; both are reported on "
        "stderr with the line number. --output and --alignments are written under a temporary "
        "name and renamed at the end: an error or an interrupt leaves no output file. A blank "
        "line of the file gives a blank line. Formats: docs/translating.md.",
    )
    translate.add_argument("run_dir", help="a run directory written by `zoo train`")
    translate.add_argument("sentences", nargs="*", help="sentences to translate (or --input)")
    translate.add_argument(
        "--input", metavar="FILE", help="translate each line of a UTF-8 file ('-': standard input)"
    )
    translate.add_argument(
        "--output", metavar="FILE", help="write the translations there (default: standard output)"
    )
    add_search_flags(translate)
    translate.add_argument(
        "--batch-size", type=positive_int, default=64, help="sentences decoded at once (default 64)"
    )
    translate.add_argument(
        "--n-best",
        type=positive_int,
        metavar="K",
        help="write the K best translations of each line (needs --beam K or more), Moses "
        "style: 'LINE ||| TRANSLATION ||| log_prob= LOGP finished= F ||| SCORE', LINE from 0, "
        "best first, F 0 for an unfinished hypothesis that fills the list",
    )
    translate.add_argument(
        "--alignments",
        metavar="FILE",
        help="write each line's word alignment there in Pharaoh format ('0-0 1-2 ...': "
        "source-target word indices from the attention's peak)",
    )
    translate.add_argument("--plot", help="save the alignment heat map of the first sentence (PNG)")
    add_progress_flag(translate)


def check_arguments(args, error):
    """The mistakes found before the model loads, raised as `error`."""
    if not args.sentences and not args.input:
        raise error("nothing to translate: give sentences or --input FILE ('-' for standard input)")
    if args.sentences and args.input:
        raise error("give sentences to translate or --input FILE ('-' for standard input), not both")
    settle_search(args)
    search_settings(args, error)  # --n-best at most --beam
    if args.input and args.input != STDIN and not Path(args.input).is_file():
        raise error(f"input file {args.input!r} does not exist or is not a file")
    for flag, path in (("--output", args.output), ("--alignments", args.alignments)):
        if path is None:
            continue
        path = Path(path)
        if path.is_dir():
            raise error(f"{flag} {str(path)!r} is a folder; name a file")
        if not path.parent.is_dir():
            raise error(f"{flag} {str(path)!r}: folder {str(path.parent)!r} does not exist")
        check_writable(path, flag, error)
        if args.input and args.input != STDIN and path.exists() and path.samefile(args.input):
            raise error(f"{flag} {str(path)!r} is the input file; choose another name")


def command(args):
    from zoo.evaluation import plots

    translator = open_run(args, "translate")
    first = translate(args, translator, UserError)
    if args.plot and first is not None and not first.alignment.any():
        # An all-zero matrix would plot as a black square that says nothing.
        print(
            f"zoo translate: --plot: nothing plotted, the model ({translator.config['recipe']}) "
            "has no attention (its attention is all zero)",
            file=sys.stderr,
        )
    elif args.plot and first is not None:
        path = plots.plot_alignment(
            first.alignment, first.source_pieces, first.target_pieces, args.plot
        )
        print(f"alignment: {path}", file=sys.stderr)


def read_lines(path, chunk_lines, error):
    """Yields `(first line number, lines)` chunks of a UTF-8 text file (or
    of standard input for '-'), line ends removed; a line that is not UTF-8
    raises `error` naming it."""
    name = "standard input" if path == STDIN else repr(path)
    with contextlib.ExitStack() as stack:
        stream = sys.stdin.buffer if path == STDIN else stack.enter_context(open(path, "rb"))
        numbered = enumerate(stream, start=1)
        while chunk := list(itertools.islice(numbered, chunk_lines)):
            lines = []
            for number, raw in chunk:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    raise error(
                        f"{name}: line {number} is not valid UTF-8 "
                        f"(byte 0x{raw[bad.start]:02x} at byte {bad.start + 1} of the line)"
                    ) from None
                if number == 1:
                    line = line.removeprefix("\ufeff")  # a byte-order mark is no text
                lines.append(line.rstrip("\r\n"))
            yield chunk[0][0], lines


def length_note(sentence, translation, limit):
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


def translate_lines(translator, lines, blank_lines, progress=None, **options):
    """`translator.translate(lines, **options)`, with None for each blank
    line when `blank_lines` (not decoded), counted as done at once."""
    if not blank_lines:
        return translator.translate(lines, progress=progress, **options)
    rows = [row for row, line in enumerate(lines) if line.strip()]
    if progress is not None and len(rows) < len(lines):
        progress(len(lines) - len(rows))
    translations = [None] * len(lines)
    if rows:
        decoded = translator.translate([lines[row] for row in rows], progress=progress, **options)
        for row, translation in zip(rows, decoded):
            translations[row] = translation
    return translations


def format_n_best(index, translation):
    return "".join(
        f"{index} ||| {h.text} ||| log_prob= {h.score:.4f} finished= {int(h.finished)} "
        f"||| {h.penalized_score:.4f}\n"
        for h in translation.n_best
    )


def translate(args, translator, error):
    """Runs `zoo translate` on an opened `translator`: writes the outputs,
    and returns the first translation (for --plot). A bad input line
    raises `error` (the command line's `UserError`)."""
    from zoo.evaluation import alignment as word_alignment

    batch_size = args.batch_size
    if args.sentences:
        chunks = [(1, list(args.sentences))]
        label = "sentence"
    else:
        chunks = read_lines(args.input, 32 * batch_size, error)
        label = "line"
    first, attended = None, False
    with contextlib.ExitStack() as stack:
        out = sys.stdout
        if args.output:
            temporary = stack.enter_context(replacing(args.output))
            out = stack.enter_context(open(temporary, "w", encoding="utf-8", newline="\n"))
        alignments = None
        if args.alignments:
            temporary = stack.enter_context(replacing(args.alignments))
            alignments = stack.enter_context(open(temporary, "w", encoding="utf-8", newline="\n"))
        counter = stack.enter_context(progress_line.shown(args.progress))
        empty = True
        for start, lines in chunks:
            empty = False
            translations = translate_lines(
                translator,
                lines,
                blank_lines=not args.sentences,
                beam=args.beam,
                length_penalty=args.length_penalty,
                coverage_penalty=args.coverage_penalty,
                stopping=args.beam_stop,
                batch_size=batch_size,
                n_best=args.n_best or 0,
                progress=counter,
            )
            for number, (line, translation) in enumerate(zip(lines, translations), start=start):
                if translation is None:  # a blank line
                    out.write("" if args.n_best else "\n")
                    if alignments:
                        alignments.write("\n")
                    continue
                note = length_note(line, translation, translator.max_source_length)
                if note:
                    sys.stderr.write(f"zoo translate: {label} {number}: {note}\n")
                if args.n_best:
                    out.write(format_n_best(number - 1, translation))
                else:
                    out.write(translation.text + "\n")
                if alignments:
                    links = word_alignment.word_alignment(
                        translation.alignment, translation.source_pieces, translation.target_pieces
                    )
                    alignments.write(word_alignment.format_pharaoh(links) + "\n")
                if first is None and translation.target_pieces:
                    first = translation
                attended = attended or bool(translation.alignment.any())
            out.flush()
    if empty:
        # Not an error (an empty file in a pipeline gives an empty output),
        # but a silent exit 0 looks like a lost translation.
        name = "standard input" if args.input == STDIN else repr(args.input)
        sys.stderr.write(f"zoo translate: note: {name} is empty; nothing was translated\n")
    if alignments and first is not None and not attended:
        sys.stderr.write(
            "zoo translate: --alignments: every line is empty, the model "
            f"({translator.config['recipe']}) has no attention (its attention is all zero)\n"
        )
    return first

