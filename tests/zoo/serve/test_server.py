"""`zoo serve`: the HTTP server of a run or an ONNX export (`zoo.serve`).

Each test starts the server on 127.0.0.1 on a free port, in a background
thread (`serving`) or in a subprocess (the SIGTERM test), and stops it.
A stub engine that sleeps and records its calls stands in for a model
where the test is about the server, not the translations.
"""

import base64
import concurrent.futures
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import tiny_configs
import uvicorn
from cli_checks import assert_one_line_error
from cli_checks import run_cli

from zoo import cli
from zoo.serve.app import create_app
from zoo.serve.engines import open_engine
from zoo.serve.images import decode_images
from zoo.serve.payloads import Limits

pytestmark = pytest.mark.tensorflow_only

REPOSITORY = Path(__file__).resolve().parents[3]
SENTENCES = ["a small dog sees a cat .", "the red circle is big .", "a cat ."]


class StubEngine:
    """Translates a sentence to itself reversed, with minus the beam as its
    score, after `delay` seconds a call; records each call's `(sentence
    count, beam)`."""

    name = "stub"
    default_beam = 1
    task = "translation"
    extras = ("n_best",)

    def __init__(self, delay=0.0):
        self.delay = delay
        self.calls = []
        self.lock = threading.Lock()

    def translate(self, sentences, beam=1, n_best=0, alignments=False, length_penalty=None):
        with self.lock:
            self.calls.append((len(sentences), beam))
        time.sleep(self.delay)
        return [{"text": sentence[::-1], "score": -float(beam)} for sentence in sentences]

    def info(self):
        return {"engine": "stub"}


@contextlib.contextmanager
def serving(engine, model_name="tiny", **limits):
    """The app of `engine` served by uvicorn in a thread; yields its URL."""
    app = create_app(engine, model_name, Limits(**limits))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def write_tiny_run(folder):
    """A complete, untrained, tiny `rnnsearch_small` run."""
    from zoo.data import RESERVED_TOKENS
    from zoo.data import TextTokenizer
    from zoo.data import synthetic_corpus
    from zoo.training import untrained

    pairs = synthetic_corpus(100, seed=1, min_length=3, max_length=8)

    def tokenizer(sentences):
        words = {word for sentence in sentences for word in sentence.replace(".", " .").split()}
        return TextTokenizer(list(RESERVED_TOKENS) + sorted(words))

    return untrained.write_untrained_run(
        folder,
        "rnnsearch_small",
        tokenizer([t for _, t in pairs] + SENTENCES),
        tokenizer([s for s, _ in pairs] + SENTENCES),
        model_overrides={**tiny_configs.TINY["rnnsearch"], "dropout": 0.0},
        training_overrides={"max_length": 10},
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    import keras

    keras.utils.set_random_seed(1234)  # a module fixture comes before the seeding one
    return write_tiny_run(tmp_path_factory.mktemp("serve") / "run")


@pytest.fixture(scope="module")
def onnx_dir(run_dir):
    """The tiny run's ONNX export, named as docs/serving.md's example is."""
    from zoo.export import onnx_export

    return onnx_export.export_onnx(run_dir, run_dir.parent / "rnnsearch_onnx")


def summary(output):
    """Text, score and n-best texts of a model's `Translation` or `Caption`,
    or of the server's answer for one."""
    if isinstance(output, dict):
        n_best = [h["text"] for h in output.get("n_best", [])]
        return output["text"], pytest.approx(output["score"], abs=1e-4), n_best
    return output.text, output.score, [h.text for h in getattr(output, "n_best", None) or []]


PHARAOH = re.compile(r"(\d+-\d+( \d+-\d+)*)?")


@pytest.mark.parametrize("kind", ["run", "onnx"])
def test_translate_and_predict_answer_the_models_own_translations(run_dir, onnx_dir, kind):
    path = onnx_dir if kind == "onnx" else run_dir
    engine = open_engine(path)
    assert engine.name == kind
    beam_search = engine.model.translate(SENTENCES, beam=2, n_best=2, length_penalty=0.6)
    greedy = engine.model.translate(SENTENCES, beam=1)
    with serving(engine, model_name="tiny") as url:
        translated = httpx.post(
            f"{url}/translate", json={"text": SENTENCES, "beam": 2, "n_best": 2, "alignments": True}
        )
        predicted = httpx.post(f"{url}/v1/models/tiny:predict", json={"instances": SENTENCES})
        objects = httpx.post(
            f"{url}/v1/models/tiny:predict", json={"instances": [{"text": s} for s in SENTENCES]}
        )
        status = httpx.get(f"{url}/v1/models/tiny")
        info = httpx.get(f"{url}/v1/models/tiny/metadata")
    assert translated.status_code == 200, translated.text
    answers = translated.json()["translations"]
    assert [summary(a) for a in answers] == [summary(t) for t in beam_search]
    assert all(PHARAOH.fullmatch(a["alignment"]) for a in answers), answers
    for response in (predicted, objects):
        predictions = response.json()["predictions"]
        assert [p["translation"] for p in predictions] == [t.text for t in greedy]
        scores = [p["score"] for p in predictions]
        assert scores == pytest.approx([t.score for t in greedy], abs=1e-4)
    assert status.json()["model_version_status"][0]["state"] == "AVAILABLE"
    assert info.json()["engine"] == kind and info.json()["recipe"] == "rnnsearch"
    # The command line loads TensorFlow for a run only (an export needs onnxruntime alone).
    assert cli.imports_tensorflow(cli.build_parser().parse_args(["serve", str(path)])) == (
        kind == "run"
    )
    assert info.json()["limits"]["max_queue"] == Limits().max_queue


def write_tiny_captioning_run(folder):
    """A complete, untrained, tiny `show_attend_tell_small` run."""
    from zoo.data import RESERVED_TOKENS
    from zoo.data import TextTokenizer
    from zoo.training import untrained

    words = sorted({"a", "red", "circle", "blue", "square", "on", "the", "left", "."})
    return untrained.write_untrained_run(
        folder,
        "show_attend_tell_small",
        TextTokenizer(list(RESERVED_TOKENS) + words),
        model_overrides={**tiny_configs.TINY["show_attend_tell"], "max_target_length": 8},
        training_overrides={"max_length": 6},
    )


def png(side, seed):
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype="uint8")
    file = io.BytesIO()
    Image.fromarray(pixels).save(file, format="PNG")
    return file.getvalue()


@pytest.mark.parametrize("kind", ["run", "onnx"])
def test_caption_and_predict_answer_the_models_own_captions(tmp_path, kind):
    path = write_tiny_captioning_run(tmp_path / "run")
    if kind == "onnx":
        from zoo.export import onnx_export

        path = onnx_export.export_onnx(path, tmp_path / "onnx")
    engine = open_engine(path)
    assert engine.task == "captioning"
    files = [png(20, seed) for seed in range(3)]
    images = decode_images(files, engine.image_size, Limits(max_image_side=64))
    beam_search = engine.model.caption(images, beam=2, length_penalty=0.6)
    greedy = engine.model.caption(images, beam=1)
    beams = []  # what reaches the engine: the outputs of beams 1 and 2 may coincide
    caption = engine.caption

    def recording(images, **search):
        beams.append(search["beam"])
        return caption(images, **search)

    engine.caption = recording
    encoded = [base64.b64encode(f).decode() for f in files]
    with serving(engine, model_name="tiny", max_image_side=64) as url:
        captioned = httpx.post(f"{url}/caption", json={"images": encoded, "beam": 2})
        predicted = httpx.post(
            f"{url}/v1/models/tiny:predict", json={"instances": [{"b64": e} for e in encoded]}
        )
        broken = httpx.post(f"{url}/caption", json={"images": ["not base64!"]})
        not_an_image = httpx.post(f"{url}/caption", json={"images": ["aGVsbG8="]})
        large = base64.b64encode(png(65, 0)).decode()
        too_large = httpx.post(f"{url}/caption", json={"images": [{"b64": large}]})
        translate = httpx.post(f"{url}/translate", json={"text": ["a cat"]})
    assert captioned.status_code == 200, captioned.text
    assert [summary(c) for c in captioned.json()["captions"]] == [summary(c) for c in beam_search]
    predictions = predicted.json()["predictions"]
    assert [p["caption"] for p in predictions] == [c.text for c in greedy]
    assert [p["score"] for p in predictions] == pytest.approx([c.score for c in greedy], abs=1e-4)
    assert beams == [2, engine.default_beam]
    assert broken.status_code == 400 and "base64" in broken.json()["error"]
    assert not_an_image.status_code == 400 and "image 0" in not_an_image.json()["error"]
    assert too_large.status_code == 413 and "--max-image-side 64" in too_large.json()["error"]
    assert translate.status_code == 404 and "/caption" in translate.json()["error"]


def test_the_image_limits_default_to_the_exports():
    from zoo.export.onnx_runner import DEFAULT_LIMITS

    assert Limits().max_image_bytes == DEFAULT_LIMITS["max_image_bytes"]
    assert Limits().max_image_side == DEFAULT_LIMITS["max_image_side"]


# (what is sent, the status, words the error names)
BAD_REQUESTS = [
    ("POST", "/translate", b'{"text": ["a cat"', 400, ["not valid JSON"]),
    ("POST", "/translate", b"[1, 2]", 400, ["JSON object"]),
    ("POST", "/translate", b'{"text": ["' + b"a" * 300 + b'"]}', 413, ["256 bytes", "--max-body-bytes"]),
    ("POST", "/translate", {"sentences": ["a cat"]}, 400, ["unknown field", "'sentences'", "text"]),
    ("POST", "/translate", {"beam": 2}, 400, ['missing field "text"']),
    ("POST", "/translate", {"text": "a cat", "beam": "5"}, 400, ['"beam"', "from 1 to 4", "--max-beam"]),
    ("POST", "/translate", {"text": "a cat", "beam": 9}, 400, ['"beam"', "from 1 to 4"]),
    ("POST", "/translate", {"text": "a cat", "beam": 2, "n_best": 3}, 400, ['"n_best"', "0 to 2"]),
    ("POST", "/translate", {"text": "a cat", "alignments": "yes"}, 400, ['"alignments"']),
    ("POST", "/translate", {"text": "a cat", "length_penalty": -1}, 400, ['"length_penalty"', ">= 0"]),
    ("POST", "/translate", {"text": "a cat", "alignments": True}, 400, ["stub engine", "alignments"]),
    ("POST", "/translate", {"text": [1]}, 400, ['"text"[0]', "string"]),
    ("POST", "/translate", {"text": []}, 400, ['"text" is empty']),
    ("POST", "/translate", {"text": ["a"] * 4}, 413, ["4 sentences", "limit of 3", "--max-sentences"]),
    ("POST", "/translate", {"text": ["a" * 21]}, 400, ["21 characters", "limit of 20", "--max-chars"]),
    ("POST", "/v1/models/tiny:predict", {"inputs": ["a cat"]}, 400, ['missing field "instances"']),
    ("POST", "/v1/models/tiny:predict", {"instances": "a cat"}, 400, ['"instances" must be a list']),
    ("POST", "/v1/models/other:predict", {"instances": ["a"]}, 404, ["'other'", "'tiny'"]),
    ("GET", "/v1/models/other", None, 404, ["'other'"]),
    ("GET", "/no/such/route", None, 404, ["no route /no/such/route"]),
    ("GET", "/translate", None, 405, ["GET is not allowed"]),
]


def test_each_bad_request_gets_its_status_and_a_one_line_json_error():
    limits = dict(max_body_bytes=256, max_sentences=3, max_chars=20, max_beam=4)
    with serving(StubEngine(), **limits) as url, httpx.Client(base_url=url) as client:
        for method, path, body, status, words in BAD_REQUESTS:
            content = body if isinstance(body, bytes) or body is None else json.dumps(body)
            response = client.request(method, path, content=content)
            assert response.status_code == status, (body, response.text)
            error = response.json()["error"]
            assert "\n" not in error and all(word in error for word in words), (body, error)
        # Sent in chunks, the body declares no length: the bytes read count.
        chunked = client.post("/translate", content=iter([b'{"text": ["', b"a" * 300, b'"]}']))
        assert chunked.status_code == 413 and "--max-body-bytes" in chunked.json()["error"]
        served = client.post("/translate", json={"text": ["a cat"]})
    assert served.json() == {"translations": [{"text": "tac a", "score": -1.0}]}


def test_a_flood_past_the_queue_limit_gets_503s_then_the_server_translates_again():
    engine = StubEngine(delay=0.2)
    with serving(engine, max_queue=2, max_batch=1, batch_wait_ms=0) as url:

        def send(index):
            return httpx.post(f"{url}/translate", json={"text": [f"sentence {index}"]}, timeout=30)

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            responses = list(pool.map(send, range(12)))
        after = httpx.post(f"{url}/translate", json={"text": ["a cat"]})
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) == {200, 503}, statuses
    for response in responses:
        if response.status_code == 503:
            assert "--max-queue" in response.json()["error"]
        else:
            index = response.request.content.decode().split("sentence ")[1].split('"')[0]
            assert response.json()["translations"][0]["text"] == f"sentence {index}"[::-1]
    assert after.status_code == 200 and after.json()["translations"][0]["text"] == "tac a"


def test_requests_that_arrive_together_are_decoded_in_one_call_with_their_own_search():
    engine = StubEngine()
    with serving(engine, max_batch=64, batch_wait_ms=500) as url:

        def send(index):
            time.sleep(0.02 * index)  # within the wait, but each alone were it not for it
            beam = 1 + index % 2
            response = httpx.post(
                f"{url}/translate", json={"text": [f"s{index}", "x"], "beam": beam}, timeout=30
            )
            first = response.json()["translations"][0]
            return beam, first["text"], first["score"]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(send, range(8)))
    assert answers == [(1 + i % 2, f"s{i}"[::-1], -float(1 + i % 2)) for i in range(8)]
    # Eight requests of two sentences, half with beam 1 and half with beam 2:
    # calls of several requests each, none mixing the two.
    assert sum(count for count, _ in engine.calls) == 16
    assert {beam for _, beam in engine.calls} == {1, 2}
    assert len(engine.calls) < 8 and max(count for count, _ in engine.calls) > 2, engine.calls


SERVER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from zoo.serve import server
    from zoo.serve.app import create_app

    class SlowEngine:
        default_beam = 1
        task = "translation"

        def translate(self, sentences, **search):
            print("decoding", flush=True)
            time.sleep(2)
            return [{"text": s.upper(), "score": 0.0} for s in sentences]

        def info(self):
            return {"engine": "slow"}

    server.run(create_app(SlowEngine(), "slow"), "127.0.0.1", int(sys.argv[1]))
    """
)


def free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_sigterm_lets_the_request_in_flight_finish_then_exits_0():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT, str(port)],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            time.sleep(0.1)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(
                httpx.post, f"{url}/translate", json={"text": ["a cat"]}, timeout=30
            )
            assert process.stdout.readline().strip() == "decoding"
            process.send_signal(signal.SIGTERM)
            response = in_flight.result()
        assert process.wait(timeout=30) == 0, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert response.status_code == 200 and response.json()["translations"][0]["text"] == "A CAT"


def test_a_path_that_is_neither_a_run_nor_an_export_is_a_one_line_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "serve", str(tmp_path))
    assert_one_line_error(code, err, "zoo serve: error:", "config.json", "encoder.onnx")


def test_without_the_serve_extra_zoo_serve_names_it(capsys, monkeypatch, tmp_path):
    import importlib.util

    find_spec = importlib.util.find_spec
    def without_uvicorn(name, *args):
        return None if name == "uvicorn" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_uvicorn)
    code, _, err = run_cli(capsys, "serve", str(tmp_path))
    assert_one_line_error(code, err, "uvicorn", 'pip install "keras-attention-zoo[serve]"')


SERVING_DOCS = Path(__file__).resolve().parents[3] / "docs" / "serving.md"


def documented_curl_calls():
    """The curl commands of docs/serving.md's `zoo serve` section that
    translate or ask about the model (not those that send an image file),
    continuation lines joined and trailing comments cut."""
    section = SERVING_DOCS.read_text().split("## `zoo serve`", 1)[1].split("\n## ", 1)[0]
    calls = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("curl ") and "base64" not in line:
                calls.append(line)
    return calls


def test_the_documented_curl_calls_get_their_answers(onnx_dir):
    calls = documented_curl_calls()
    assert len(calls) >= 7, calls
    with serving(open_engine(onnx_dir), model_name=onnx_dir.name) as url:
        for call in calls:
            done = subprocess.run(
                call.replace("http://127.0.0.1:8501", url),
                shell=True, capture_output=True, text=True, timeout=60,
            )
            assert done.returncode == 0, (call, done.stderr)
            answer = json.loads(done.stdout)
            # The limits' example shows a refusal; every other call an answer.
            assert ("error" in answer) == ('"beam": 99' in call), (call, answer)
