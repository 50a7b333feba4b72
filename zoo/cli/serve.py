"""`zoo serve`: a run directory or an ONNX export folder served over HTTP
(`zoo.serve`; docs/serving.md)."""

import importlib.util
from pathlib import Path

from zoo.arguments import positive_int
from zoo.cli.errors import UserError

INSTALL_COMMAND = 'pip install "keras-attention-zoo[serve]"'
SERVER_MODULES = ("starlette", "uvicorn")
DEFAULT_PORT = 8501  # TensorFlow Serving's REST port


def add_parser(commands):
    from zoo.serve.payloads import LIMIT_HELP
    from zoo.serve.payloads import Limits

    serve = commands.add_parser(
        "serve",
        help="serve a run or an ONNX export over HTTP (translation, captioning)",
        description="Serve translations over HTTP: POST /translate {\"text\": [...], \"beam\": K, "
        "\"n_best\": N, \"alignments\": true} (captions: POST /caption {\"images\": [BASE64]}), "
        "TensorFlow Serving's POST /v1/models/NAME:predict "
        "{\"instances\": [...]} and GET /v1/models/NAME, GET /info and GET /health. Requests that "
        "arrive together with the same search settings are decoded in one batch. A request over "
        "a limit gets a 4xx JSON error {\"error\": ...}, a full queue a 503. SIGTERM lets the "
        "requests in flight finish, then exits 0. Needs the serve extra: " + INSTALL_COMMAND + ".",
    )
    serve.add_argument(
        "export_or_run",
        metavar="EXPORT_OR_RUN",
        help="a run directory of `zoo train` or a folder of `zoo export --format onnx`",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=positive_int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--model-name", help="NAME in /v1/models/NAME (default: the folder's name)"
    )
    serve.add_argument(
        "--beam",
        type=positive_int,
        help="beam width of predict requests and of /translate and /caption requests that "
        "give none (default: the run's search settings for a run, the export's beam for an "
        "export folder)",
    )
    defaults = Limits()
    for name, what in LIMIT_HELP.items():
        default = getattr(defaults, name)
        serve.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default) if isinstance(default, float) else positive_int,
            default=default,
            help=f"{what} (default {default})",
        )


def require_serve_extra():
    """A one-line error naming the extra when its modules are not installed."""
    for module in SERVER_MODULES:
        if importlib.util.find_spec(module) is None:
            raise UserError(
                f"`zoo serve` needs {module}, which comes with the serve extra; "
                f"install it with: {INSTALL_COMMAND}"
            )


def loads_tensorflow(args):
    """Whether the path is a run directory, which Keras serves on TensorFlow."""
    from zoo.serve.engines import RunEngine

    return RunEngine.matches(args.export_or_run)


def command(args):
    require_serve_extra()
    from zoo.serve import server
    from zoo.serve.app import create_app
    from zoo.serve.engines import open_engine
    from zoo.serve.payloads import Limits

    if args.batch_wait_ms < 0:
        raise UserError(f"--batch-wait-ms must be >= 0; received {args.batch_wait_ms:g}")
    if args.max_queue < args.max_sentences:
        # A request of --max-sentences would otherwise never fit in the queue.
        raise UserError(
            f"--max-queue ({args.max_queue}) must be at least --max-sentences "
            f"({args.max_sentences})"
        )
    engine = open_engine(args.export_or_run)
    if args.beam is not None:
        engine.default_beam = args.beam
    if engine.default_beam > args.max_beam:
        raise UserError(
            f"the default beam {engine.default_beam} is over --max-beam {args.max_beam}"
        )
    limits = Limits(**{name: getattr(args, name) for name in Limits().as_dict()})
    name = args.model_name or Path(args.export_or_run).resolve().name
    server.run(create_app(engine, name, limits), args.host, args.port)
