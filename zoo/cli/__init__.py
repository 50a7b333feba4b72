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
    zoo bench [layers|decode|train|export|all] [--backend B] [--out results.json]
    zoo demo [--layers]

A user mistake (unknown preset, missing run directory or data file, bad
option, a command run without the TensorFlow extra it needs) prints one line
to stderr and exits with status 2; no traceback.
"""

import argparse
import contextlib
import importlib.util
import logging
import os
import sys

from zoo import extras
from zoo import runs
from zoo.arguments import BEAM_STOPPING_RULES
from zoo.arguments import fraction
from zoo.arguments import non_negative_float
from zoo.arguments import non_negative_int
from zoo.arguments import positive_float
from zoo.arguments import positive_int
from zoo.errors import ZooUserError
from zoo.quiet_import import import_quietly
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import check_run_directory
from zoo.tasks import task_for
from zoo.training import PRECISIONS
from zoo.training import SCHEDULES
from zoo.training import STRATEGIES

# Set before TensorFlow is first imported (by zoo.data, lazily): its C++ start-up
# chatter is not for the user of a command line.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

USER_ERROR = 2


class UserError(ZooUserError):
    """A mistake of the user's found by the command line itself."""


def add_beam_stop(parser):
    parser.add_argument(
        "--beam-stop",
        choices=BEAM_STOPPING_RULES,
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


def build_parser():
    parser = argparse.ArgumentParser(
        prog="zoo", description="keras-attention-zoo: attention layers and the papers' models."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands.add_parser(
        "list",
        help="list the presets",
        description="List the presets, each with its one-line description: the names "
        "`zoo train PRESET` takes (docs/recipes.md describes each recipe).",
    )

    train = commands.add_parser("train", help="train a preset into a run directory")
    train.add_argument("preset", help="a preset name (see `zoo list`)")
    train.add_argument(
        "--data",
        help="training data: 'synthetic' (default for the small presets); for "
        "translation 'SOURCE,TARGET' aligned text files (.gz allowed) or a TSV file; "
        "for captioning 'CAPTIONS,IMAGE_DIR[,SPLIT]' (Flickr token file or COCO .json)",
    )
    train.add_argument("--epochs", type=positive_int, help="override the preset's epochs")
    train.add_argument("--batch-size", type=positive_int, help="override the preset's batch size")
    train.add_argument(
        "--train-size", type=positive_int, help="use at most N training pairs (images for captioning)"
    )
    train.add_argument(
        "--valid-size",
        type=positive_int,
        metavar="N",
        help="validate on N pairs (images): the synthetic data's validation split, "
        "or the held-out end of a corpus (at most a tenth of it)",
    )
    train.add_argument(
        "--test-size",
        type=non_negative_int,
        metavar="N",
        help="synthetic data: score the trained model on N test pairs (images); 0: none",
    )
    train.add_argument(
        "--out",
        help="run directory (default runs/PRESET); if it holds an unfinished run of "
        "the same preset and options, training resumes from its last checkpoint",
    )
    train.add_argument(
        "--overwrite", action="store_true", help="replace an existing run directory, finished or not"
    )
    train.add_argument(
        "--continue",
        dest="continue_run",
        action="store_true",
        help="train the finished run in --out further, to --epochs (above the epochs it has "
        "done), from its last checkpoint (weights and optimizer), with the same options; the "
        "learning-rate schedule goes on where it stopped, no restart: cosine stays at its "
        "floor, a tenth of the peak",
    )
    train.add_argument(
        "--checkpoint-every-steps",
        type=positive_int,
        metavar="N",
        help="also checkpoint every N batches inside an epoch (default: after each epoch only)",
    )
    train.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="devices to train on (default one-device): 'auto' (several GPUs if there are), "
        "'mirrored' (tensorflow, local GPUs), 'multi-worker' (tensorflow, cluster from "
        "TF_CONFIG), 'data-parallel' (jax); --batch-size is the global batch",
    )
    train.add_argument(
        "--mixed-precision",
        choices=(*PRECISIONS, "auto", "float32"),
        default="auto",
        help="compute in bfloat16 or float16 (float32 weights), or in float32; 'auto' "
        "(default): bfloat16 where the CPU reports bf16 matrix units (amx_bf16 in "
        "/proc/cpuinfo), else float32",
    )
    train.add_argument(
        "--label-smoothing",
        type=fraction,
        metavar="E",
        help="override the preset's label smoothing (0 <= E < 1; the *_multi30k presets use 0.1)",
    )
    train.add_argument(
        "--learning-rate",
        type=positive_float,
        metavar="LR",
        help="override the preset's learning rate: the peak of its schedule, reached "
        "after the warm-up",
    )
    train.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="override the preset's learning-rate schedule: 'cosine' (decay to a tenth) or "
        "'inverse_sqrt' (the Transformer's; needs --warmup-steps >= 1)",
    )
    train.add_argument(
        "--warmup-steps",
        type=non_negative_int,
        metavar="N",
        help="override the preset's linear learning-rate warm-up, in updates",
    )
    train.add_argument(
        "--average-last",
        type=non_negative_int,
        metavar="N",
        help="after the last epoch, make the run's weights the mean of its last N epoch "
        "checkpoints, as `zoo average --last N` does (default: the preset's; 0: none)",
    )
    train.add_argument(
        "--seed",
        type=non_negative_int,
        metavar="N",
        help="the run's seed: the synthetic data, the initial weights, the dropout masks, the "
        "batch order and hard attention's samples (default 0; the same seed trains alike)",
    )
    train.add_argument(
        "--validation-bleu",
        action=argparse.BooleanOptionalAction,
        help="decode the validation split greedily after each epoch and log its BLEU as val_bleu "
        "(default: on for the real-corpus translation presets); picks best.weights.h5",
    )
    train.add_argument(
        "--jit-compile",
        choices=("on", "off"),
        help="compile the train step with XLA (jax.jit on jax) or not (default: the recipe's "
        "choice for this backend, see `zoo bench train`)",
    )

    train.add_argument(
        "--tokenizer",
        choices=runs.TOKENIZERS,
        help="subword vocabularies: 'sentencepiece' (keeps case; default for a real corpus) or "
        "'wordpiece' (lowercase; default for the synthetic data and for captioning)",
    )
    train.add_argument(
        "--shared-vocabulary",
        action="store_true",
        default=None,
        help="translation: one vocabulary learned from both languages (default: one each)",
    )
    train.add_argument(
        "--vocabulary-size",
        type=positive_int,
        metavar="N",
        help="override the preset's vocabulary size: the most subwords each vocabulary (or the "
        "shared one) may have, the 4 reserved tokens included; a small corpus gives fewer",
    )

    average = commands.add_parser(
        "average",
        help="average the weights of a run's last N epoch checkpoints",
        description="Average the weights of the last N epoch checkpoints of a finished run. "
        "By default the average becomes the run's model.weights.h5 (what evaluate, translate "
        "and export read), and the weights training ended with are kept as "
        "model.unaveraged.weights.h5; --out writes the average elsewhere instead.",
    )
    average.add_argument("run_dir", help="a finished run directory written by `zoo train`")
    average.add_argument(
        "--last", type=positive_int, required=True, metavar="N", help="how many epoch checkpoints"
    )
    average.add_argument(
        "--out", help="write the averaged weights to this .weights.h5 file, leaving the run as it is"
    )

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
    evaluate.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    add_length_penalty(evaluate)
    evaluate.add_argument("--limit", type=positive_int, help="evaluate the first N pairs only")
    add_beam_stop(evaluate)
    add_progress_flag(evaluate)

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
    translate.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    add_length_penalty(translate)
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
    add_beam_stop(translate)
    translate.add_argument("--plot", help="save the alignment heat map of the first sentence (PNG)")
    add_progress_flag(translate)

    caption = commands.add_parser("caption", help="caption images with a trained run")
    caption.add_argument("run_dir", help="a captioning run directory written by `zoo train`")
    caption.add_argument(
        "images", nargs="+", help="image files (JPEG, PNG, GIF (its first frame), BMP, WebP)"
    )
    caption.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    add_length_penalty(caption)
    add_beam_stop(caption)
    caption.add_argument(
        "--plot", help="save the attention of each word over the first image (PNG)"
    )

    export = commands.add_parser(
        "export",
        help="export a trained run for serving (TensorFlow SavedModel or ONNX)",
        description="Export a trained run for serving. saved_model: signatures "
        "`translate` (strings -> strings) or `caption` (image file bytes -> strings), "
        "and `logits` (teacher-forced); they need TensorFlow and tensorflow-text, "
        "not this package (see zoo/export/saved_model.py). onnx: a folder that runs with "
        "onnxruntime alone: encoder.onnx and decoder_step.onnx with dynamic batch and length "
        "axes, the tokenizer files, manifest.json, README.md and run.py (`python run.py "
        "\"a sentence\"`; see zoo/export/onnx_export.py). Both refuse requests over the "
        "--max-batch, --max-image-bytes and --max-image-side limits.",
    )
    export.add_argument("run_dir", help="a run directory written by `zoo train`")
    export.add_argument(
        "--format",
        choices=("saved_model", "onnx"),
        default="saved_model",
        help="saved_model (default) or onnx",
    )
    export.add_argument(
        "--out", help="where to write the export (default: RUN_DIR/export/FORMAT)"
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing, non-empty output (refused otherwise)",
    )
    export.add_argument(
        "--beam",
        type=positive_int,
        default=1,
        help="beam width of the exported search (default 1: greedy); for onnx, run.py's default",
    )
    add_length_penalty(export)
    export.add_argument(
        "--coverage-penalty",
        type=non_negative_float,
        default=0.0,
        help="onnx: GNMT coverage penalty of run.py's beam search (default 0)",
    )
    export.add_argument(
        "--quantize",
        choices=("int8",),
        help="onnx: int8 dynamic quantization of the matrix products (onnxruntime's)",
    )
    from zoo.export.onnx_runner import DEFAULT_LIMITS  # numpy and onnxruntime only

    for name, what in (
        ("max_batch", "sentences or images a request"),
        ("max_image_bytes", "bytes of an image file (captioning)"),
        ("max_image_side", "pixels of a decoded image's longer side (captioning)"),
    ):
        export.add_argument(
            "--" + name.replace("_", "-"),
            type=positive_int,
            default=DEFAULT_LIMITS[name],
            help=f"refuse requests over this many {what} (default {DEFAULT_LIMITS[name]})",
        )
    add_beam_stop(export)
    export.add_argument(
        "--max-input-length",
        type=positive_int,
        help="saved_model, translation: the most source word pieces read; longer "
        "sentences are cut (default: the run's training max_length)",
    )

    from zoo import bench  # keras-free at import: the parser stays quick

    bench.add_parser(commands)

    demo = commands.add_parser(
        "demo", help="the main job: RNNencdec vs RNNsearch on the synthetic corpus"
    )
    demo.add_argument("--out", default="runs/demo", help="where the demo keeps its runs")
    demo.add_argument(
        "--layers", action="store_true", help="instead: the attention layers on a toy task"
    )
    return parser


def command_list(args):
    from zoo import registry

    descriptions = registry.presets()
    width = max(map(len, descriptions))
    for name, description in descriptions.items():
        print(f"{name:<{width}}  {description}")


def check_arguments(args):
    """The mistakes that the arguments alone show, raised before TensorFlow
    and Keras load (seconds): an unknown preset, nothing to translate."""
    if args.command == "train":
        from zoo import registry

        registry.get_preset(args.preset)
    elif args.command == "translate":
        from zoo.cli import translating

        translating.check_arguments(args, UserError)


def command_train(args):
    from zoo.training import loop as training

    out = training.train(
        args.preset,
        args.out or os.path.join("runs", args.preset),
        data_spec=args.data,
        epochs=args.epochs,
        batch_size=args.batch_size,
        train_size=args.train_size,
        valid_size=args.valid_size,
        test_size=args.test_size,
        overwrite=args.overwrite,
        checkpoint_every_steps=args.checkpoint_every_steps,
        strategy=args.strategy,
        mixed_precision=None if args.mixed_precision == "float32" else args.mixed_precision,
        jit_compile=None if args.jit_compile is None else args.jit_compile == "on",
        label_smoothing=args.label_smoothing,
        learning_rate=args.learning_rate,
        schedule=args.schedule,
        warmup_steps=args.warmup_steps,
        validation_bleu=args.validation_bleu,
        tokenizer=args.tokenizer,
        shared_vocabulary=args.shared_vocabulary,
        vocabulary_size=args.vocabulary_size,
        average_last=args.average_last,
        seed=args.seed,
        continue_run=args.continue_run,
    )
    print(f"run directory: {out}")
    print((out / "metrics.json").read_text().strip())


def command_average(args):
    from zoo.training import averaging

    path, names = averaging.average_run(args.run_dir, args.last, args.out)
    print(f"averaged {', '.join(names)}: {path}")


def evaluate_captioner(captioner, args):
    from zoo.cli import progress

    if args.gold_alignments:
        raise UserError("--gold-alignments scores a translation run's attention, not captions")
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


def command_evaluate(args):
    import zoo

    run = zoo.load(args.run_dir)
    EVALUATIONS[task_for(run.config)](run, args)


def evaluate_translator(translator, args):
    from zoo.evaluation import bleu as evaluation

    from zoo.cli import progress
    from zoo.tasks.translation import alignment_metrics

    pairs, golds = TRANSLATION.test_alignments(translator.config, args.data, args.gold_alignments)
    pairs = pairs[: args.limit]
    with progress.shown(args.progress, len(pairs)) as counter:
        result = translator.evaluate(
            pairs,
            beam=args.beam,
            length_penalty=args.length_penalty,
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


# What `zoo evaluate` prints for a run of each task.
EVALUATIONS = {TRANSLATION: evaluate_translator, CAPTIONING: evaluate_captioner}


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


def command_translate(args):
    from zoo.cli import translating
    from zoo.evaluation import plots

    translator = open_run(args, "translate")
    first = translating.translate(args, translator, UserError)
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


def command_caption(args):
    from zoo.evaluation import plots

    captioner = open_run(args, "caption")
    captions = captioner.caption_files(
        args.images, beam=args.beam, length_penalty=args.length_penalty, stopping=args.beam_stop
    )
    for caption in captions:
        print(caption.text)
    if args.plot:
        from zoo.data import load_image

        first = captions[0]
        words = first.words_without_eos
        path = plots.plot_caption_attention(
            load_image(args.images[0], captioner.image_size),
            words,
            first.attention[: len(words)],
            args.plot,
        )
        print(f"attention: {path}", file=sys.stderr)


def command_export(args):
    out = args.out or os.path.join(args.run_dir, "export", args.format)
    if args.format == "onnx":
        from zoo.export import onnx_export

        path = onnx_export.export_onnx(
            args.run_dir,
            out,
            overwrite=args.overwrite,
            beam=args.beam,
            length_penalty=args.length_penalty,
            coverage_penalty=args.coverage_penalty,
            stopping=args.beam_stop,
            limits=request_limits(args),
            quantize=args.quantize,
        )
    else:
        from zoo.export import saved_model as export

        path = export.export_saved_model(
            args.run_dir,
            out,
            beam=args.beam,
            length_penalty=args.length_penalty,
            max_input_length=args.max_input_length,
            overwrite=args.overwrite,
            stopping=args.beam_stop,
            limits=request_limits(args),
        )
    print(f"{args.format}: {path}")


def request_limits(args):
    """The export's request limits, from the command line's flags."""
    return {name: getattr(args, name) for name in ("max_batch", "max_image_bytes", "max_image_side")}


def command_bench(args):
    from zoo import bench

    bench.command(args)


def command_demo(args):
    if args.layers:
        from zoo.cli import layer_demo

        layer_demo.run(verbose=2)
        return
    from zoo.cli import demo

    demo.run(args.out)


COMMANDS = {
    "list": command_list,
    "train": command_train,
    "average": command_average,
    "evaluate": command_evaluate,
    "translate": command_translate,
    "caption": command_caption,
    "export": command_export,
    "bench": command_bench,
    "demo": command_demo,
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
