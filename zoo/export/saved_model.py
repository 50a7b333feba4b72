"""Export a trained run as a TensorFlow SavedModel for serving.

TensorFlow only by nature (SavedModel, `tf.strings`, tensorflow-text): the
models are written in `keras.ops`, and on the TensorFlow backend their graph
is what is saved. `zoo export DIR --out PATH [--beam K]` calls
`export_saved_model`. The SavedModel needs nothing of this package to run:
only TensorFlow, and tensorflow-text imported before loading (it registers
the tokenizer's ops), e.g.

    import tensorflow as tf
    import tensorflow_text  # the WordPiece, SentencePiece and UTF-8 normalization ops
    served = tf.saved_model.load("exported/rnnsearch_small")
    served.signatures["translate"](text=tf.constant(["a small dog sees a cat."]))

TensorFlow's `saved_model_cli` alone stops with "Op type not registered
'NormalizeUTF8'" (it can't load tensorflow-text's ops), so run it through a
wrapper that imports them first:

    python -c "import sys, tensorflow_text; from tensorflow.python.tools \
        import saved_model_cli; sys.exit(saved_model_cli.main())" run \
        --dir exported/rnnsearch_small --tag_set serve \
        --signature_def translate --input_exprs 'text=["a small dog sees a cat."]'

Signatures of a translation run (`export_saved_model`):

- `translate(text: string [B]) -> {"translation": string [B], "score":
  float32 [B]}`: tokenization, search (greedy, or beam search with the GNMT
  length penalty, as exported) and detokenization in the graph. The output
  is `Translator.translate`'s `text` and `score` for the same sentences, the
  request decoded as one batch (as `Translator.translate` decodes up to 64
  sentences).
- `logits(source: int32 [B, S], target_in: int32 [B, T]) -> {"logits":
  float32 [B, T, V]}`: the teacher-forced logits of the model's `call`.

Signatures of a captioning run:

- `caption(images: string [B]) -> {"caption": string [B], "score": float32
  [B]}`: each string the bytes of an image file (JPEG, PNG, GIF, BMP,
  WebP), decoded and resized in the graph exactly as training reads files
  (`zoo.data.caption_pipeline.decode_image_bytes`), then searched and
  detokenized: `Captioner.caption_files`'s `text` and `score` (for up to
  64 images, the batch `Captioner.caption` decodes at once).
- `logits(image: float32 [B, S, S, 3] in [0, 1], target_in: int32 [B, T])
  -> {"logits": float32 [B, T, V]}`.

Both tasks also have `limits() -> {name: int64 scalar}`: the request
limits below as the export set them, for a client to read (it takes no
input: `served.signatures["limits"]()`).

The first signature is also `serving_default`. `score` is log P(Y|X) of the
chosen hypothesis. The search settings (`beam`, `length_penalty`,
`stopping`) are fixed at export. Runs whose dtype policy computes in float16 or bfloat16 are
refused (see `check_dtype_policy`).

Bounded input: each sentence is cut to its first `max_input_length` word
pieces (by default the run's training `max_length`, the cut
`Translator.translate` makes), and, before tokenization, to its first
`CHARACTERS_PER_PIECE * max_input_length` characters, so that one long
string can't make the tokenizer exhaust the server. (Bytes that aren't
valid UTF-8 are not refused: the tokenizer reads what it can of them.)
Decoding stops after the step limit of
`zoo.recipes.decoding.max_decoding_steps`. A request over one of the
`limits` (`export_saved_model`'s argument; the defaults are the ONNX
export's, `zoo.export.onnx_runner.DEFAULT_LIMITS`) is refused whole, before
any of it is tokenized or decoded, with `tf.errors.InvalidArgumentError`
(an HTTP 400 from TensorFlow Serving) whose message names the limit:

- `max_batch`: the most sentences (`translate`) or images (`caption`) of
  one request;
- `max_image_bytes`: the most bytes of one image string;
- `max_image_side`: the most pixels of a decoded image's height or width,
  read from the file's header before decoding for JPEG, PNG, GIF and BMP,
  and checked after decoding for WebP (whose format allows at most 16383
  pixels a side, so its decode stays bounded).
"""

from dataclasses import replace
from pathlib import Path

import keras
import tensorflow as tf

import zoo
from zoo import files
from zoo import runs
from zoo.data.caption_pipeline import decode_image_pixels
from zoo.data.caption_pipeline import resize_decoded_image
from zoo.export.onnx_runner import DEFAULT_LIMITS
from zoo.export.onnx_runner import check_limits
from zoo.errors import ZooUserError
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import check_run_directory
from zoo.tasks import task_for
from zoo.inference.search_choice import choose_search
from zoo.inference.search_settings import SearchSettings
from zoo.inference.translator import SOURCE_WIDTH_MULTIPLE

# Before tokenization a sentence is cut to this many characters per word
# piece allowed; a piece is at least one character, so this keeps every
# piece of any sentence that isn't mostly white space.
CHARACTERS_PER_PIECE = 16


class ExportError(ZooUserError):
    """A run or an option that can't be exported as asked."""


def export_saved_model(
    run_dir,
    out,
    beam=1,
    length_penalty=0.6,
    max_input_length=None,
    overwrite=False,
    stopping="early",
    limits=None,
):
    """Exports a run directory as a SavedModel with serving signatures.

    The SavedModel is written to a temporary folder beside `out` and renamed
    to `out` at the end, so a failed export leaves nothing half-written.

    Args:
        run_dir: a run directory written by `zoo train`.
        out: the folder to write the SavedModel to.
        beam: int >= 1, the beam width of the exported search (1: greedy).
        length_penalty: float >= 0, the GNMT length penalty alpha of beam
            search (unused when greedy).
        max_input_length: optional int >= 1, the most source word pieces
            read (translation only; longer sentences are cut). Default: the
            run's training `max_length`.
        overwrite: replace an existing, non-empty `out`.
        stopping: beam search's rule, "early" (default) or "exact" (see
            `zoo.recipes.decoding.beam_search`; unused when greedy).
        limits: optional dict overriding some of
            `zoo.export.onnx_runner.DEFAULT_LIMITS` (`max_batch`,
            `max_image_bytes`, `max_image_side`; ints >= 1): the requests
            the signatures refuse (see the module docstring).

    Returns:
        The SavedModel folder, a `Path`.

    Raises:
        ExportError: `out` exists and is not empty (without `overwrite`), a
            bad option (the search's: `zoo.inference.search_settings`), or a
            model whose dtype policy can't be exported.
        zoo.runs.RunDirectoryError: `run_dir` is missing or incomplete.
    """
    run_dir = check_run_directory(run_dir)
    out = Path(out)
    files.check_output_folder(out, overwrite, ExportError)
    settings = SearchSettings.checked(
        ExportError, beam=beam, length_penalty=length_penalty, stopping=stopping
    )
    _check_max_input_length(max_input_length)
    limits = check_limits(limits, ExportError)
    # Before loading: a show_attend_tell model can't even be built under
    # some policies (see `check_dtype_policy`).
    check_dtype_policy(runs.read_json(run_dir / runs.CONFIG))
    run = zoo.load(run_dir)
    archive = keras.export.ExportArchive()
    archive.track(run.model)
    task = task_for(run.config)
    ENDPOINTS[task](archive, run, settings, max_input_length, limits)
    _add_limits_endpoint(archive, {name: limits[name] for name in TASK_LIMITS[task]})
    with files.replacing(out, folder=True) as temporary:
        archive.write_out(temporary, verbose=False)
    return out


def check_dtype_policy(config):
    """Refuses a run whose model's dtype policy this export can't serve.

    The policy is the config's `model.dtype`, else Keras' global policy.

    - A float16 or bfloat16 compute dtype is refused: at that precision the
      served outputs depend on details of the compiled graph, so they need
      not be the Python API's.
    - `show_attend_tell` is refused under any policy but `float32`, the
      only one its export is checked under.
    - `float32` and `float64` give the Python API's outputs.

    Args:
        config: the run's config dict.

    Raises:
        ExportError: the policy is one of those refused above.
    """
    name = config["model"].get("dtype") or keras.config.dtype_policy().name
    policy = keras.dtype_policies.get(name)
    where = (
        "config.json's model.dtype"
        if config["model"].get("dtype")
        else "Keras' global dtype policy"
    )
    fix = (
        "set model.dtype to \"float32\" in config.json"
        if config["model"].get("dtype")
        else "call keras.config.set_dtype_policy(\"float32\") before exporting"
    )
    if policy.compute_dtype in ("float16", "bfloat16"):
        raise ExportError(
            f"cannot export a model with dtype policy {policy.name!r} ({where}): under "
            f"{policy.compute_dtype} computation the SavedModel's outputs can differ from the "
            f"Python API's (measured on a Transformer); {fix}"
        )
    if config["recipe"] == "show_attend_tell" and policy.compute_dtype != "float32":
        raise ExportError(
            f"cannot export a show_attend_tell model with dtype policy {policy.name!r} "
            f"({where}): the recipe builds only under float32; {fix}"
        )


def _check_max_input_length(max_input_length):
    if max_input_length is not None and (
        not isinstance(max_input_length, int) or max_input_length < 1
    ):
        raise ExportError(
            f"max_input_length must be an int >= 1; received {max_input_length!r}"
        )


def _input_limit(translator, max_input_length):
    limit = max_input_length or translator.max_source_length
    if limit is None:
        raise ExportError(
            "the run's config sets no training max_length: pass --max-input-length N "
            "to bound the sentences the SavedModel reads"
        )
    width = -(-limit // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE
    model_limit = getattr(translator.model, "max_source_length", None)
    if model_limit is not None and width > model_limit:
        raise ExportError(
            f"max_input_length {limit} pads to {width} source positions, more than the "
            f"model's max_source_length {model_limit}; pass --max-input-length "
            f"{model_limit // SOURCE_WIDTH_MULTIPLE * SOURCE_WIDTH_MULTIPLE} or less"
        )
    return limit


def _add_translation_endpoints(archive, translator, settings, max_input_length, limits):
    model = translator.model
    limit = _input_limit(translator, max_input_length)
    search = choose_search(model, settings, one_loop=True)

    def translate(text):
        with tf.control_dependencies([_check_batch(text, "sentences", limits["max_batch"])]):
            text = tf.strings.substr(text, 0, CHARACTERS_PER_PIECE * limit, unit="UTF8_CHAR")
        ids = translator.source_tokenizer.tokenize(text)[:, :limit]
        lengths = ids.row_lengths()
        # As `Translator.translate` pads a batch: to the longest source,
        # rounded up to a multiple of SOURCE_WIDTH_MULTIPLE, an empty
        # sentence read as a lone EOS.
        longest = tf.maximum(tf.reduce_max(lengths), 1)
        width = -(-longest // SOURCE_WIDTH_MULTIPLE) * SOURCE_WIDTH_MULTIPLE
        source = ids.to_tensor(model.pad_id, shape=tf.stack([ids.nrows(), width]))
        empty = tf.logical_and(
            tf.equal(lengths, 0)[:, None], tf.equal(tf.range(width), 0)[None, :]
        )
        source = tf.where(empty, model.eos_id, source)
        # Rows in Translator's order (by length), so the search runs on the
        # very batch Translator.translate decodes: a batched kernel need not
        # round a row the same way at every place in the batch.
        order = tf.argsort(tf.maximum(lengths, 1), stable=True)
        result = search(tf.gather(source, order))
        restore = tf.argsort(order)
        return {
            "translation": tf.gather(
                translator.target_tokenizer.detokenize(result.tokens), restore
            ),
            "score": tf.gather(result.scores, restore),
        }

    archive.add_endpoint(
        "translate", translate, input_signature=[tf.TensorSpec([None], tf.string, name="text")]
    )
    _add_logits_endpoint(archive, model)


def _add_captioning_endpoints(archive, captioner, settings, max_input_length, limits):
    model = captioner.model
    size = model.image_size
    settings = replace(settings, max_length=captioner.max_caption_length)
    search = choose_search(model, settings, one_loop=True)

    def decode(contents, index):
        with tf.control_dependencies([_check_side(_declared_side(contents), index, limits)]):
            image = decode_image_pixels(contents)
        # A format whose header isn't read above (WebP) is checked here.
        with tf.control_dependencies([_check_side(tf.shape(image)[:2], index, limits)]):
            return resize_decoded_image(image, size)

    def caption(images):
        checks = [
            _check_batch(images, "images", limits["max_batch"]),
            _check_bytes(images, limits["max_image_bytes"]),
        ]
        with tf.control_dependencies(checks):
            pixels = tf.map_fn(
                lambda elements: decode(*elements),
                (images, tf.range(tf.shape(images)[0])),
                fn_output_signature=tf.TensorSpec([size, size, 3], tf.float32),
            )
        result = search(pixels)
        return {"caption": captioner.tokenizer.detokenize(result.tokens), "score": result.scores}

    archive.add_endpoint(
        "caption", caption, input_signature=[tf.TensorSpec([None], tf.string, name="images")]
    )
    _add_logits_endpoint(archive, model)


# Each task's serving signatures (a captioning export reads images, whose
# size is the model's, so it has no input length to bound).
ENDPOINTS = {TRANSLATION: _add_translation_endpoints, CAPTIONING: _add_captioning_endpoints}
# The limits each task's signatures apply, which its `limits` signature gives.
TASK_LIMITS = {TRANSLATION: ("max_batch",), CAPTIONING: tuple(DEFAULT_LIMITS)}


def _add_limits_endpoint(archive, limits):
    """`limits() -> {name: int64}`: the request limits, for clients to read."""

    def read_limits():
        return {name: tf.constant(value, tf.int64) for name, value in limits.items()}

    archive.add_endpoint("limits", read_limits, input_signature=[])


# --- request limits (see the module docstring) --------------------------------
#
# Each check is an op that fails the request with InvalidArgumentError; the
# ops it guards run under `tf.control_dependencies` on it, since a decode op
# is stateless and would otherwise be free to run first.


def _refuse_unless(condition, template, *values):
    """An assertion whose message is `template` formatted with `values`."""
    return tf.debugging.Assert(condition, [tf.strings.format(template, values)])


def _check_batch(requests, what, max_batch):
    count = tf.shape(requests)[0]
    return _refuse_unless(
        count <= max_batch,
        f"request has {{}} {what}, more than max_batch={max_batch}; "
        "split it into smaller requests",
        count,
    )


def _check_bytes(images, max_image_bytes):
    lengths = tf.strings.length(images)
    first = tf.argmax(tf.cast(lengths > max_image_bytes, tf.int32), output_type=tf.int32)
    return _refuse_unless(
        tf.reduce_all(lengths <= max_image_bytes),
        f"images[{{}}] has {{}} bytes, more than "
        f"max_image_bytes={max_image_bytes}; send a smaller file",
        first,
        tf.gather(lengths, first),
    )


def _check_side(shape, index, limits):
    max_image_side = limits["max_image_side"]
    height = tf.cast(shape[0], tf.int64)
    width = tf.cast(shape[1], tf.int64)
    return _refuse_unless(
        tf.maximum(height, width) <= max_image_side,
        f"images[{{}}] is {{}}x{{}} pixels (height x width), more than "
        f"max_image_side={max_image_side}; send a smaller image",
        index,
        height,
        width,
    )


# The file signatures that `tf.io.decode_image` recognizes, and the bytes
# of the header read for a declared size.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GIF_SIGNATURE = b"GIF8"
BMP_SIGNATURE = b"BM"
JPEG_SIGNATURE = b"\xff\xd8\xff"
HEADER_BYTES = 26


def _declared_side(contents):
    """The int64 `[height, width]` an image file's header declares, without
    decoding it: JPEG (its frame header), PNG (IHDR, big-endian uint32 at
    bytes 16-24), GIF (the logical screen, little-endian uint16 at 6-10),
    BMP (little-endian int32 at 18-26, a negative height meaning top-down);
    `[0, 0]` for any other bytes (WebP, or what won't decode)."""
    # Zero-padded, so that a short string reads as zeros, not out of range.
    header = tf.strings.substr(
        tf.strings.join([contents, b"\0" * HEADER_BYTES]), 0, HEADER_BYTES
    )
    raw = tf.cast(tf.io.decode_raw(header, tf.uint8), tf.int64)

    def unsigned(start, count, big_endian):
        positions = range(start, start + count)
        order = reversed(positions) if big_endian else positions
        return sum(raw[i] * 256**k for k, i in enumerate(order))

    def signed32(start):
        value = unsigned(start, 4, big_endian=False)
        return tf.where(value >= 2**31, value - 2**32, value)

    def starts_with(signature):
        return tf.equal(tf.strings.substr(header, 0, len(signature)), signature)

    png = tf.stack([unsigned(20, 4, True), unsigned(16, 4, True)])
    gif = tf.stack([unsigned(8, 2, False), unsigned(6, 2, False)])
    bmp = tf.abs(tf.stack([signed32(22), signed32(18)]))
    declared = tf.where(
        starts_with(PNG_SIGNATURE),
        png,
        tf.where(
            starts_with(GIF_SIGNATURE),
            gif,
            tf.where(starts_with(BMP_SIGNATURE), bmp, tf.zeros([2], tf.int64)),
        ),
    )
    return tf.cond(
        starts_with(JPEG_SIGNATURE),
        lambda: tf.cast(tf.image.extract_jpeg_shape(contents)[:2], tf.int64),
        lambda: declared,
    )


def _add_logits_endpoint(archive, model):
    """`logits(<source>, target_in)`: the teacher-forced logits of `call`,
    its source input as the model's `source_spec` declares it."""
    source = model.source_spec

    def logits(source_batch, target_in):
        inputs = {source.name: source_batch, "target_in": target_in}
        return {"logits": model(inputs, training=False)}

    archive.add_endpoint(
        "logits",
        logits,
        input_signature=[
            tf.TensorSpec(source.shape, source.dtype, name=source.name),
            tf.TensorSpec([None, None], tf.int32, name="target_in"),
        ],
    )
