"""The server's limits, and the JSON requests read and checked against them.

Every refusal is a `RequestError`: an HTTP status and one line that names
the problem and the limit, which the app answers as `{"error": LINE}`.
"""

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
    max_beam: int = 16
    max_batch: int = 64
    batch_wait_ms: float = 5.0
    max_queue: int = 1024

    def as_dict(self):
        return asdict(self)


# What each limit bounds, for `zoo serve --help` and the docs.
LIMIT_HELP = {
    "max_body_bytes": "the most bytes of a request body; over it: 413",
    "max_sentences": "the most sentences a request; over it: 413",
    "max_chars": "the most characters a sentence; over it: 400",
    "max_beam": "the widest beam a request may ask for; over it: 400",
    "max_batch": "the most sentences decoded in one engine call",
    "batch_wait_ms": "how long the first request of a batch waits for others, in milliseconds",
    "max_queue": "the most sentences waiting to be decoded; over it: 503",
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
    unknown = sorted(set(payload) - set(TRANSLATE_FIELDS))
    if unknown:
        raise RequestError(
            400,
            f"unknown field {', '.join(map(repr, unknown))}; "
            f"the fields are {', '.join(TRANSLATE_FIELDS)}",
        )
    if "text" not in payload:
        raise RequestError(400, 'missing field "text": a list of sentences (strings)')
    text = payload["text"]
    sentences = checked_sentences([text] if isinstance(text, str) else text, "text", limits)
    beam = _integer(payload, "beam", default_beam, 1, limits.max_beam, "--max-beam")
    n_best = _integer(payload, "n_best", 0, 0, beam, "at most the beam")
    alignments = payload.get("alignments", False)
    if not isinstance(alignments, bool):
        raise RequestError(400, f'"alignments" must be true or false; received {alignments!r}')
    length_penalty = payload.get("length_penalty")
    if length_penalty is not None and (
        isinstance(length_penalty, bool)
        or not isinstance(length_penalty, (int, float))
        or not math.isfinite(length_penalty)
        or length_penalty < 0
    ):
        raise RequestError(
            400, f'"length_penalty" must be a number >= 0; received {length_penalty!r}'
        )
    return sentences, Search(beam, n_best, alignments, length_penalty)


def predict_request(payload, limits):
    """The sentences of a TensorFlow Serving predict body:
    `{"instances": ["a sentence", ...]}` or `{"instances": [{"text": "..."}, ...]}`."""
    if "instances" not in payload:
        raise RequestError(
            400, 'missing field "instances": a list of sentences, or of {"text": sentence} objects'
        )
    instances = payload["instances"]
    if isinstance(instances, list):
        instances = [
            item["text"] if isinstance(item, dict) and set(item) == {"text"} else item
            for item in instances
        ]
    return checked_sentences(instances, "instances", limits)


def checked_sentences(sentences, field, limits):
    """`sentences` if a non-empty list of strings within the limits."""
    if not isinstance(sentences, list):
        received = type(sentences).__name__
        raise RequestError(400, f'"{field}" must be a list of strings; received {received}')
    if not sentences:
        raise RequestError(400, f'"{field}" is empty: send at least one sentence')
    if len(sentences) > limits.max_sentences:
        raise RequestError(
            413,
            f"the request has {len(sentences)} sentences, more than the limit of "
            f"{limits.max_sentences} a request (--max-sentences); send fewer a request",
        )
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
