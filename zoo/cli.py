"""The `zoo` command line.

    zoo list
    zoo train PRESET [--data SPEC] [--epochs N] [--out DIR] [--strategy S] [--mixed-precision P]
    zoo evaluate DIR [--data SPEC] [--beam K]
    zoo translate DIR "a sentence" [--beam K] [--plot out.png]
    zoo caption DIR image.png [--beam K] [--plot out.png]
    zoo bench [layers|decode|train|export|all] [--backend B] [--out results.json]
    zoo demo [--layers]

A user mistake (unknown preset, missing run directory or data file, bad
option) prints one line to stderr and exits with status 2; no traceback.
"""

import argparse
import os
import sys

from zoo.errors import ZooUserError
from zoo.runs import check_run_directory

# Set before TensorFlow is first imported (by zoo.data, lazily): its C++ start-up
# chatter is not for the user of a command line.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

USER_ERROR = 2
# zoo.distributed.STRATEGIES and PRECISIONS, repeated so that parsing stays
# free of Keras (test_distributed.py holds the copies equal).
STRATEGIES = ("auto", "one-device", "mirrored", "multi-worker", "data-parallel")
PRECISIONS = ("bfloat16", "float16")


class UserError(ZooUserError):
    """A mistake of the user's found by the command line itself."""


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="zoo", description="keras-attention-zoo: attention layers and the papers' models."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands.add_parser("list", help="list the presets")

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
    train.add_argument("--out", help="run directory (default runs/PRESET)")
    train.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    train.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="devices to train on (default one-device): 'auto' (several GPUs if there are), "
        "'mirrored' (tensorflow, local GPUs), 'multi-worker' (tensorflow, cluster from "
        "TF_CONFIG), 'data-parallel' (jax); --batch-size is the global batch",
    )
    train.add_argument(
        "--mixed-precision", choices=PRECISIONS, help="compute in bfloat16 or float16 (float32 weights)"
    )

    evaluate = commands.add_parser("evaluate", help="BLEU (and caption metrics) of a trained run")
    evaluate.add_argument("run_dir", help="a run directory written by `zoo train`")
    evaluate.add_argument(
        "--data",
        help="test data ('SOURCE,TARGET' files or TSV; for captioning 'CAPTIONS,IMAGE_DIR[,SPLIT]'); "
        "default: the run's synthetic test set",
    )
    evaluate.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    evaluate.add_argument("--length-penalty", type=non_negative_float, default=0.6)
    evaluate.add_argument("--limit", type=positive_int, help="evaluate the first N pairs only")

    translate = commands.add_parser("translate", help="translate sentences with a trained run")
    translate.add_argument("run_dir", help="a run directory written by `zoo train`")
    translate.add_argument("sentences", nargs="+", help="sentences to translate")
    translate.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    translate.add_argument("--length-penalty", type=non_negative_float, default=0.6)
    translate.add_argument("--plot", help="save the alignment heat map of the first sentence (PNG)")

    caption = commands.add_parser("caption", help="caption images with a trained run")
    caption.add_argument("run_dir", help="a captioning run directory written by `zoo train`")
    caption.add_argument("images", nargs="+", help="image files (PNG, JPEG, BMP, GIF)")
    caption.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    caption.add_argument("--length-penalty", type=non_negative_float, default=0.6)
    caption.add_argument(
        "--plot", help="save the attention of each word over the first image (PNG)"
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


def command_train(args):
    from zoo import registry

    registry.get_preset(args.preset)  # an unknown preset fails before TensorFlow loads
    from zoo import training

    out = training.train(
        args.preset,
        args.out or os.path.join("runs", args.preset),
        data_spec=args.data,
        epochs=args.epochs,
        batch_size=args.batch_size,
        train_size=args.train_size,
        overwrite=args.overwrite,
        strategy=args.strategy,
        mixed_precision=args.mixed_precision,
    )
    print(f"run directory: {out}")
    print((out / "metrics.json").read_text().strip())


def test_pairs(translator, data_spec):
    from zoo import data
    from zoo import training

    if data_spec:
        return data.read_corpus(data_spec).pairs
    settings = translator.config["training"]
    if settings["data"] != "synthetic":
        raise UserError(
            "this run was not trained on the synthetic corpus: name its test set with --data"
        )
    return training.load_pairs(settings)[2]


def test_images(captioner, data_spec):
    from zoo import data
    from zoo import training

    if data_spec:
        return data.read_captions(data_spec).images
    settings = captioner.config["training"]
    if settings["data"] != "synthetic":
        raise UserError(
            "this run was not trained on the synthetic images: name its test set with --data"
        )
    return training.load_caption_splits(settings)[2]


def evaluate_captioner(captioner, args):
    examples = test_images(captioner, args.data)[: args.limit]
    result = captioner.evaluate(examples, beam=args.beam, length_penalty=args.length_penalty)
    for name, value in result["scores"].items():
        print(f"{name}: {value:.2f}" if isinstance(value, float) else f"{name}: {value}")
    if result["localisation"] is not None:
        print("attention localisation (words that name an object):")
        for name, value in result["localisation"].items():
            print(f"  {name}: {value:.3f}" if isinstance(value, float) else f"  {name}: {value}")


def command_evaluate(args):
    import zoo
    from zoo import evaluation

    check_run_directory(args.run_dir)  # before TensorFlow loads: a quick, quiet error
    run = zoo.load(args.run_dir)
    if run.config.get("task") == "captioning":
        return evaluate_captioner(run, args)
    translator = run
    pairs = test_pairs(translator, args.data)[: args.limit]
    result = translator.evaluate(pairs, beam=args.beam, length_penalty=args.length_penalty)
    print(result["bleu"])
    print()
    print(evaluation.format_bleu_table({translator.config["preset"]: result["by_length"]}))


def command_translate(args):
    import zoo
    from zoo import plots

    check_run_directory(args.run_dir)
    translator = zoo.load(args.run_dir)
    if translator.config.get("task") == "captioning":
        raise UserError(f"{args.run_dir!r} is a captioning run: use `zoo caption`")
    translations = translator.translate(
        args.sentences, beam=args.beam, length_penalty=args.length_penalty
    )
    for translation in translations:
        print(translation.text)
    if args.plot:
        first = translations[0]
        path = plots.plot_alignment(
            first.alignment, first.source_pieces, first.target_pieces, args.plot
        )
        print(f"alignment: {path}", file=sys.stderr)


def command_caption(args):
    import zoo
    from zoo import plots

    check_run_directory(args.run_dir)
    captioner = zoo.load(args.run_dir)
    if captioner.config.get("task") != "captioning":
        raise UserError(f"{args.run_dir!r} is a translation run: use `zoo translate`")
    captions = captioner.caption_files(
        args.images, beam=args.beam, length_penalty=args.length_penalty
    )
    for caption in captions:
        print(caption.text)
    if args.plot:
        from zoo.data import load_image

        first = captions[0]
        words = [w for w in first.words if w != "[EOS]"]
        path = plots.plot_caption_attention(
            load_image(args.images[0], captioner.image_size),
            words,
            first.attention[: len(words)],
            args.plot,
        )
        print(f"attention: {path}", file=sys.stderr)


def command_bench(args):
    from zoo import bench

    bench.command(args)


def command_demo(args):
    if args.layers:
        from zoo import layer_demo

        layer_demo.run(verbose=2)
        return
    from zoo import demo

    demo.run(args.out)


COMMANDS = {
    "list": command_list,
    "train": command_train,
    "evaluate": command_evaluate,
    "translate": command_translate,
    "caption": command_caption,
    "bench": command_bench,
    "demo": command_demo,
}


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return USER_ERROR
    try:
        COMMANDS[args.command](args)
    except ZooUserError as error:
        print(f"zoo {args.command}: error: {error}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print(f"zoo {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
