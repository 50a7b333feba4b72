"""`zoo train`: a preset trained into a run directory (`zoo.training.loop.train`)."""

import argparse
import os

from zoo.arguments import positive_int
from zoo.training import PRECISIONS
from zoo.training import STRATEGIES
from zoo.training import config


def add_parser(commands):
    train = commands.add_parser("train", help="train a preset into a run directory")
    train.add_argument("preset", help="a preset name (see `zoo list`)")
    add_training_flags(train)
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


def add_training_flags(parser):
    """A flag for each `TrainingConfig` field with a help text, `--epochs`
    for `epochs`, defaulting to None: the preset's value."""
    for field in config.flag_fields():
        meta = field.metadata
        flag = "--" + field.name.replace("_", "-")
        if config.is_bool(field) and not meta["parse"]:
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, help=meta["help"]
            )
            continue
        parser.add_argument(
            flag,
            dest=field.name,
            type=config.flag_parser(field),
            metavar=meta["metavar"] or (f"{{{','.join(meta['choices'])}}}" if meta["choices"] else None),
            help=meta["help"] if "default" in meta["help"] else f"{meta['help']} (default: the preset's)",
        )


def training_config(args):
    """The preset's `TrainingConfig` with the flags given over it."""
    from zoo import registry

    flags = {field.name: getattr(args, field.name) for field in config.flag_fields()}
    return registry.get_preset(args.preset)["training"].overridden(**flags)


def check_arguments(args):
    """An unknown preset, and a translation corpus that is not there,
    refused before TensorFlow and Keras load."""
    from zoo import registry
    from zoo.data import corpus_scan

    preset = registry.get_preset(args.preset)
    training_config(args)
    is_corpus = args.data not in (None, "synthetic")
    if is_corpus and registry.task_of(preset["recipe"]) == "translation":
        # A glob that matches nothing or a mistyped path, answered in seconds.
        corpus_scan.corpus_files(args.data)


def command(args):
    from zoo.training import loop as training

    out = training.train(
        args.preset,
        args.out or os.path.join("runs", args.preset),
        training_config(args),
        overwrite=args.overwrite,
        continue_run=args.continue_run,
        checkpoint_every_steps=args.checkpoint_every_steps,
        strategy=args.strategy,
        mixed_precision=None if args.mixed_precision == "float32" else args.mixed_precision,
    )
    print(f"run directory: {out}")
    print((out / "metrics.json").read_text().strip())
