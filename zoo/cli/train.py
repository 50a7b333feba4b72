"""`zoo train`: a preset trained into a run directory (`zoo.training.loop.train`)."""

import argparse
import os

from zoo import runs
from zoo.arguments import fraction
from zoo.arguments import non_negative_int
from zoo.arguments import positive_float
from zoo.arguments import positive_int
from zoo.training import PRECISIONS
from zoo.training import SCHEDULES
from zoo.training import STRATEGIES


def add_parser(commands):
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


def check_arguments(args):
    """An unknown preset, and a translation corpus that is not there,
    refused before TensorFlow and Keras load."""
    from zoo import registry
    from zoo.data import readers

    preset = registry.get_preset(args.preset)
    is_corpus = args.data not in (None, "synthetic")
    if is_corpus and registry.task_of(preset["recipe"]) == "translation":
        readers.check_corpus_files(args.data)


def command(args):
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
