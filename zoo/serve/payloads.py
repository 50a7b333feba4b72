"""The server's limits, and the JSON requests read and checked against them.

Every refusal is a `RequestError`: an HTTP status and one line that names
the problem and the limit, which the app answers as `{"error": LINE}`.
"""

import base64
import binascii
import json
import math
from dataclasses import asdict
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Limits:
    """What one request, and the server as a whole, may ask for."""

    max_body_bytes: int = 1_000_000
    max_sentences: int = 64
    max_chars: int = 1000
    # The exports' defaults (`zoo.export.onnx_runner.DEFAULT_LIMITS`).
    max_image_bytes: int = 20_000_000
    max_image_side: int = 8192
    max_beam: int = 16
    max_batch: int = 64
    batch_wait_ms: float = 5.0
    max_queue: int = 1024

    def as_dict(self):
        return asdict(self)


# What each limit bounds, for `zoo serve --help`.
LIMIT_HELP = {
    "max_body_bytes": "the most bytes of a request body; over it: 413",
    "max_sentences": "the most sentences (or images) a request; over it: 413",
    "max_chars": "the most characters a sentence; over it: 400",
    "max_image_bytes": "captioning: the most bytes of an image file; over it: 413",
    "max_image_side": "captioning: the most pixels of an image's longer side; over it: 413",
    "max_beam": "the widest beam a request may ask for; over it: 400",
    "max_batch": "the most sentences (or images) decoded in one engine call",
    "batch_wait_ms": "how long the first request of a batch waits for others, in milliseconds",
    "max_queue": "the most sentences (or images) waiting to be decoded; over it: 503",
}


class RequestError(Exception):
    """A request refused: `status` and a one-line `message`."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Search(NamedTuple):
    """A request's search settings; requests are batched only with their own.
    A `length_penalty` of None is the engine's default."""

    beam: int
    n_best: int = 0
    alignments: bool = False
    length_penalty: float = None


TRANSLATE_FIELDS = ("text", "beam", "n_best", "alignments", "length_penalty")
CAPTION_FIELDS = ("images", "beam", "length_penalty")


class CaptionSearch(NamedTuple):
    """A captioning request's search settings (as `Search`)."""

    beam: int
    length_penalty: float = None


def parse_json(body):
    """The JSON object of a request body, or a 400 naming the problem."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"the body is not valid JSON: {error}") from None
    if not isinstance(payload, dict):
        received = type(payload).__name__
        raise RequestError(400, f"the body must be a JSON object; received {received}")
    return payload


def translate_request(payload, limits, default_beam):
    """`(sentences, Search)` of a `POST /translate` body:
    `{"text": [...], "beam": K, "n_best": N, "alignments": bool, "length_penalty": X}`."""
    _check_fields(payload, TRANSLATE_FIELDS, "text", "a list of sentences (strings)")
    text = payload["text"]
    sentences = checked_sentences([text] if isinstance(text, str) else text, "text", limits)
    beam = _integer(payload, "beam", default_beam, 1, limits.max_beam, "--max-beam")
    n_best = _integer(payload, "n_best", 0, 0, beam, "at most the beam")
    alignments = payload.get("alignments", False)
    if not isinstance(alignments, bool):
        raise RequestError(400, f'"alignments" must be true or false; received {alignments!r}')
    return sentences, Search(beam, n_best, alignments, _length_penalty(payload))


def caption_request(payload, limits, default_beam):
    """`(image file contents, CaptionSearch)` of a `POST /caption` body:
    `{"images": [BASE64, ...], "beam": K, "length_penalty": X}`, each image a
    base64 string or TensorFlow Serving's `{"b64": BASE64}`."""
    _check_fields(payload, CAPTION_FIELDS, "images", "a list of base64 image files")
    images = checked_images(payload["images"], "images", limits)
    beam = _integer(payload, "beam", default_beam, 1, limits.max_beam, "--max-beam")
    return images, CaptionSearch(beam, _length_penalty(payload))


def predict_request(payload, limits, captioning=False):
    """The inputs of a TensorFlow Serving predict body: `{"instances":
    ["a sentence", ...]}` or `[{"text": "..."}, ...]`; for a captioning
    model `[{"b64": BASE64}, ...]` or `[{"images": {"b64": BASE64}}, ...]`
    (the image contents, decoded from base64)."""
    expected = "images as {\"b64\": BASE64}" if captioning else "sentences or {\"text\": sentence}"
    if "instances" not in payload:
        raise RequestError(400, f'missing field "instances": a list of {expected}')
    instances = payload["instances"]
    key = "images" if captioning else "text"
    if isinstance(instances, list):
        instances = [
            item[key] if isinstance(item, dict) and set(item) == {key} else item
            for item in instances
        ]
    if captioning:
        return checked_images(instances, "instances", limits)
    return checked_sentences(instances, "instances", limits)


def checked_sentences(sentences, field, limits):
    """`sentences` if a non-empty list of strings within the limits."""
    _check_count(sentences, field, "sentences", "strings", limits)
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise RequestError(
                400, f'"{field}"[{index}] must be a string; received {type(sentence).__name__}'
            )
        if len(sentence) > limits.max_chars:
            raise RequestError(
                400,
                f'"{field}"[{index}] has {len(sentence)} characters, more than the limit of '
                f"{limits.max_chars} (--max-chars)",
            )
    return sentences


def checked_images(images, field, limits):
    """The decoded contents of `images`, a non-empty list of base64 strings
    (or `{"b64": ...}` objects) within the limits."""
    _check_count(images, field, "images", "base64 strings", limits)
    contents = []
    for index, image in enumerate(images):
        if isinstance(image, dict) and set(image) == {"b64"}:
            image = image["b64"]
        if not isinstance(image, str):
            raise RequestError(
                400, f'"{field}"[{index}] must be a base64 string or {{"b64": BASE64}}'
            )
        try:
            contents.append(base64.b64decode(image, validate=True))
        except binascii.Error as error:
            raise RequestError(400, f'"{field}"[{index}] is not valid base64: {error}') from None
    return contents


def _check_count(items, field, what, kind, limits):
    """A 400 unless `items` is a non-empty list, a 413 over `max_sentences`."""
    if not isinstance(items, list):
        received = type(items).__name__
        raise RequestError(400, f'"{field}" must be a list of {kind}; received {received}')
    if not items:
        raise RequestError(400, f'"{field}" is empty: send at least one')
    if len(items) > limits.max_sentences:
        raise RequestError(
            413,
            f"the request has {len(items)} {what}, more than the limit of "
            f"{limits.max_sentences} a request (--max-sentences); send fewer a request",
        )


def _check_fields(payload, fields, required, what):
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise RequestError(
            400,
            f"unknown field {', '.join(map(repr, unknown))}; the fields are {', '.join(fields)}",
        )
    if required not in payload:
        raise RequestError(400, f'missing field "{required}": {what}')


def _length_penalty(payload):
    """`payload["length_penalty"]` if a number >= 0; None (the engine's) if absent."""
    value = payload.get("length_penalty")
    if value is not None and (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise RequestError(400, f'"length_penalty" must be a number >= 0; received {value!r}')
    return value


def _integer(payload, field, default, low, high, limit_name):
    """`payload[field]` if an int in [low, high]; `default` if absent or null."""
    value = payload.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(
            400, f'"{field}" must be an int from {low} to {high} ({limit_name}); received {value!r}'
        )
    return value
