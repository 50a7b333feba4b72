"""`zoo export`: a trained run exported for serving, as a TensorFlow
SavedModel (`zoo.export.saved_model`), an ONNX folder
(`zoo.export.onnx_export`) or a CTranslate2 folder
(`zoo.export.ctranslate2_export`)."""

import importlib.util
import os

from zoo.arguments import positive_int
from zoo.cli.search_options import add_search_flags
from zoo.cli.search_options import settle_search
from zoo.errors import ZooUserError

CTRANSLATE2_INSTALL = 'pip install "keras-attention-zoo[ctranslate2]"'


def add_parser(commands):
    export = commands.add_parser(
        "export",
        help="export a trained run for serving (TensorFlow SavedModel, ONNX or CTranslate2)",
        description="Export a trained run for serving. saved_model: signatures "
        "`translate` (strings -> strings) or `caption` (image file bytes -> strings), "
        "and `logits` (teacher-forced); they need TensorFlow and tensorflow-text, "
        "not this package (see zoo/export/saved_model.py). onnx: a folder that runs with "
        "onnxruntime alone: encoder.onnx and decoder_step.onnx with dynamic batch and length "
        "axes, the tokenizer files, manifest.json, README.md, and run.py with its onnx_runner/ "
        "package (`python run.py "
        "\"a sentence\"`; see zoo/export/onnx_export.py). Both refuse requests over the "
        "--max-batch, --max-image-bytes and --max-image-side limits. ctranslate2 (Transformer "
        "runs with a SentencePiece vocabulary): a CTranslate2 model folder that runs with "
        "ctranslate2 and sentencepiece alone, with run.py and its ct2_runner/ package (see "
        "zoo/export/ctranslate2_export.py).",
    )
    export.add_argument("run_dir", help="a run directory written by `zoo train`")
    export.add_argument(
        "--format",
        choices=("saved_model", "onnx", "ctranslate2"),
        default="saved_model",
        help="saved_model (default), onnx, or ctranslate2 (Transformer runs only)",
    )
    export.add_argument(
        "--out", help="where to write the export (default: RUN_DIR/export/FORMAT)"
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing, non-empty output (refused otherwise)",
    )
    add_search_flags(
        export,
        beam_help="beam width of the exported search (1: greedy); for onnx and ctranslate2, "
        "run.py's default",
    )
    export.add_argument(
        "--quantize",
        choices=("int8", "int16", "float16", "bfloat16"),
        help="onnx: int8 dynamic quantization of the matrix products (onnxruntime's); "
        "ctranslate2: the weights' type (int8, int16, float16 or bfloat16; default float32)",
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
    export.add_argument(
        "--max-input-length",
        type=positive_int,
        help="saved_model, translation: the most source word pieces read; longer "
        "sentences are cut (default: the run's training max_length)",
    )


def command(args):
    settle_search(args)
    if args.coverage_penalty and args.format != "onnx":
        raise ZooUserError(
            f"--coverage-penalty {args.coverage_penalty} (the flag's or the run's): the "
            f"{args.format} export's beam search has none; pass --coverage-penalty 0, or "
            "export with --format onnx"
        )
    out = args.out or os.path.join(args.run_dir, "export", args.format)
    if args.format == "ctranslate2":
        if importlib.util.find_spec("ctranslate2") is None:
            raise ZooUserError(f"--format ctranslate2 needs ctranslate2: {CTRANSLATE2_INSTALL}")
        from zoo.export import ctranslate2_export

        path = ctranslate2_export.export_ctranslate2(
            args.run_dir,
            out,
            overwrite=args.overwrite,
            beam=args.beam,
            length_penalty=args.length_penalty,
            quantize=args.quantize,
        )
    elif args.format == "onnx":
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
