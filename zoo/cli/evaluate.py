"""`zoo evaluate`: BLEU and the attention's AER of a translation run, or the
caption metrics of a captioning run, on a test set."""

from zoo.arguments import positive_int
from zoo.cli import progress
from zoo.cli.search_options import add_progress_flag
from zoo.cli.search_options import add_search_flags
from zoo.cli.search_options import settle_search
from zoo.cli.errors import UserError
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import task_for


def add_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="BLEU and attention AER (or caption metrics) of a trained run"
    )
    evaluate.add_argument("run_dir", help="a run directory written by `zoo train`")
    evaluate.add_argument(
        "--data",
        help="test data ('SOURCE,TARGET' files or TSV; for captioning 'CAPTIONS,IMAGE_DIR[,SPLIT]'); "
        "default: the run's synthetic test set",
    )
    evaluate.add_argument(
        "--gold-alignments",
        metavar="FILE",
        help="translation: gold word alignments of the test pairs, Pharaoh format, one line per "
        "pair ('i-j' sure, 'i?j' possible; 0-based space-separated words), to score the "
        "attention's alignment error rate (default: the synthetic corpus's own; none for --data)",
    )
    add_search_flags(evaluate)
    evaluate.add_argument("--limit", type=positive_int, help="evaluate the first N pairs only")
    add_progress_flag(evaluate)


def command(args):
    import zoo

    settle_search(args)
    run = zoo.load(args.run_dir)
    EVALUATIONS[task_for(run.config)](run, args)


def evaluate_translator(translator, args):
    from zoo.evaluation import bleu as evaluation
    from zoo.tasks.translation import alignment_metrics

    pairs, golds = TRANSLATION.test_alignments(translator.config, args.data, args.gold_alignments)
    pairs = pairs[: args.limit]
    with progress.shown(args.progress, len(pairs)) as counter:
        result = translator.evaluate(
            pairs,
            beam=args.beam,
            length_penalty=args.length_penalty,
            coverage_penalty=args.coverage_penalty,
            progress=counter,
            stopping=args.beam_stop,
        )
    print(f"cased BLEU:      {result['bleu']}")
    print(f"lowercased BLEU: {result['bleu_lowercased']}")
    print()
    print("cased BLEU by source length (words):")
    print(evaluation.format_bleu_table({translator.config["preset"]: result["by_length"]}))
    if golds is None:
        return
    scores = translator.alignment_scores(pairs, golds[: args.limit])
    metrics = alignment_metrics(scores)
    print()
    if not metrics:
        print("attention alignment: none (the model's attention is all zero)")
        return
    print(
        f"attention alignment, peak per target word with the reference fed in "
        f"({scores.links} links; gold {scores.sure} sure, {scores.possible} possible):"
    )
    print(f"  AER:       {metrics['aer']:.2f}")
    print(f"  precision: {metrics['alignment_precision']:.2f}")
    print(f"  recall:    {metrics['alignment_recall']:.2f}")


def evaluate_captioner(captioner, args):
    if args.gold_alignments:
        raise UserError("--gold-alignments scores a translation run's attention, not captions")
    if args.coverage_penalty:
        raise UserError(
            "--coverage-penalty: a captioning run's beam search has no coverage penalty; leave it out"
        )
    examples = CAPTIONING.test_examples(captioner.config, args.data)[: args.limit]
    with progress.shown(args.progress, len(examples), unit="images") as counter:
        result = captioner.evaluate(
            examples,
            beam=args.beam,
            length_penalty=args.length_penalty,
            progress=counter,
            stopping=args.beam_stop,
        )
    for name, value in result["scores"].items():
        print(f"{name}: {value:.2f}" if isinstance(value, float) else f"{name}: {value}")
    if result["localisation"] is not None:
        print("attention localisation (words that name an object):")
        for name, value in result["localisation"].items():
            print(f"  {name}: {value:.3f}" if isinstance(value, float) else f"  {name}: {value}")


# What `zoo evaluate` prints for a run of each task.
EVALUATIONS = {TRANSLATION: evaluate_translator, CAPTIONING: evaluate_captioner}
