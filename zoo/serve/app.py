"""The Starlette app of `zoo serve`: its routes, and its errors as JSON.

Routes:

    POST /translate                     {"text": [...], "beam", "n_best", "alignments",
                                         "length_penalty"}
    POST /caption                       {"images": [BASE64, ...], "beam", "length_penalty"}
    POST /v1/models/NAME:predict        TensorFlow Serving's REST predict: {"instances": [...]}
    GET  /v1/models/NAME                TensorFlow Serving's model status
    GET  /v1/models/NAME/metadata, GET /info     the model, the engine and the limits
    GET  /health

Every refusal is `{"error": "one line"}` with a 4xx status (`payloads`),
a full queue a 503; the server goes on serving after each.
"""

import asyncio
import contextlib
import logging

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.routing import Route

from zoo.serve.batcher import DynamicBatcher
from zoo.serve.batcher import QueueFull
from zoo.serve.engines import CAPTIONING
from zoo.serve.engines import TRANSLATION
from zoo.serve.images import decode_images
from zoo.serve.payloads import CaptionSearch
from zoo.serve.payloads import Limits
from zoo.serve.payloads import RequestError
from zoo.serve.payloads import Search
from zoo.serve.payloads import caption_request
from zoo.serve.payloads import parse_json
from zoo.serve.payloads import predict_request
from zoo.serve.payloads import translate_request

logger = logging.getLogger(__name__)


def error_response(status, message):
    return JSONResponse({"error": message}, status_code=status)


async def read_json(request, limits):
    """The request's JSON object, its body read up to `max_body_bytes`."""
    declared = request.headers.get("content-length", "")
    too_large = RequestError(
        413,
        f"the body is larger than the limit of {limits.max_body_bytes} bytes (--max-body-bytes)",
    )
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limits.max_body_bytes:
            raise too_large
    return parse_json(bytes(body))


class Service:
    """The routes' state: the engine, its batcher, the model's name, the limits."""

    def __init__(self, engine, model_name, limits):
        self.engine = engine
        self.model_name = model_name
        self.limits = limits
        self.batcher = None

    def decode(self, inputs, search):
        """The batcher's engine call (in its worker thread): sentences, or
        decoded images for a `CaptionSearch`."""
        if isinstance(search, CaptionSearch):
            return self.engine.caption(
                np.stack(inputs), beam=search.beam, length_penalty=search.length_penalty
            )
        return self.engine.translate(
            inputs,
            beam=search.beam,
            n_best=search.n_best,
            alignments=search.alignments,
            length_penalty=search.length_penalty,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        limits = self.limits
        self.batcher = DynamicBatcher(
            self.decode, limits.max_batch, limits.batch_wait_ms / 1000, limits.max_queue
        )
        self.batcher.start()
        try:
            yield
        finally:
            await self.batcher.close()  # after uvicorn has let the requests in flight finish

    def check_model(self, request):
        name = request.path_params["name"]
        if name != self.model_name:
            raise RequestError(
                404, f"model {name!r} is not served here; this server serves {self.model_name!r}"
            )

    def check_task(self, task, route):
        if self.engine.task != task:
            other = "/translate" if self.engine.task == TRANSLATION else "/caption"
            raise RequestError(
                404, f"this server serves a {self.engine.task} model: POST {other}, not {route}"
            )

    async def translate(self, request):
        self.check_task(TRANSLATION, "/translate")
        payload = await read_json(request, self.limits)
        sentences, search = translate_request(payload, self.limits, self.engine.default_beam)
        self.check_extras(search)
        results = await self.decoded(sentences, search)
        return JSONResponse({"translations": results})

    def check_extras(self, search):
        """Refuses, before queueing, an extra the engine's translations
        can't carry (the CTranslate2 runner gives neither)."""
        asked = {"n_best": search.n_best > 0, "alignments": search.alignments}
        for extra, wanted in asked.items():
            if wanted and extra not in self.engine.extras:
                raise RequestError(
                    400, f"the {self.engine.name} engine gives no {extra}; leave \"{extra}\" out"
                )

    async def caption(self, request):
        self.check_task(CAPTIONING, "/caption")
        payload = await read_json(request, self.limits)
        contents, search = caption_request(payload, self.limits, self.engine.default_beam)
        results = await self.decoded(await self.images(contents), search)
        return JSONResponse({"captions": results})

    async def predict(self, request):
        self.check_model(request)
        payload = await read_json(request, self.limits)
        captioning = self.engine.task == CAPTIONING
        inputs = predict_request(payload, self.limits, captioning)
        if captioning:
            inputs = await self.images(inputs)
            search = CaptionSearch(self.engine.default_beam)
        else:
            search = Search(self.engine.default_beam)
        results = await self.decoded(inputs, search)
        # The outputs of the SavedModel's `translate` or `caption` signature, by name.
        key = "caption" if captioning else "translation"
        return JSONResponse(
            {"predictions": [{key: r["text"], "score": r["score"]} for r in results]}
        )

    async def images(self, contents):
        """The image files decoded, in a thread: Pillow's decoding and the
        resize would hold up the event loop."""
        return list(
            await asyncio.to_thread(decode_images, contents, self.engine.image_size, self.limits)
        )

    async def decoded(self, inputs, search):
        try:
            return await self.batcher.submit(inputs, search)
        except QueueFull as error:
            raise RequestError(503, str(error)) from None

    async def model_status(self, request):
        self.check_model(request)
        return JSONResponse(
            {
                "model_version_status": [
                    {
                        "version": "1",
                        "state": "AVAILABLE",
                        "status": {"error_code": "OK", "error_message": ""},
                    }
                ]
            }
        )

    async def info(self, request):
        if "name" in request.path_params:
            self.check_model(request)
        return JSONResponse(
            {"model_name": self.model_name, **self.engine.info(), "limits": self.limits.as_dict()}
        )

    async def health(self, request):
        return JSONResponse({"status": "ok"})


async def refused(request, error):
    return error_response(error.status, error.message)


async def http_error(request, error):
    """Starlette's own refusals (an unknown route, a wrong method) as JSON."""
    if error.status_code == 404:
        path = request.url.path
        return error_response(404, f"no route {path}; see GET /info and docs/serving.md")
    if error.status_code == 405:
        return error_response(405, f"{request.method} is not allowed on {request.url.path}")
    return error_response(error.status_code, error.detail)


async def server_error(request, error):
    logger.error("the request to %s failed", request.url.path, exc_info=error)
    failure = f"{type(error).__name__}: {error}"
    return error_response(500, f"the server failed on this request: {failure}")


def create_app(engine, model_name, limits=None):
    """The app that serves `engine` (see `zoo.serve.engines`) as `model_name`."""
    service = Service(engine, model_name, limits or Limits())
    routes = [
        Route("/translate", service.translate, methods=["POST"]),
        Route("/caption", service.caption, methods=["POST"]),
        Route("/v1/models/{name}:predict", service.predict, methods=["POST"]),
        Route("/v1/models/{name}", service.model_status, methods=["GET"]),
        Route("/v1/models/{name}/metadata", service.info, methods=["GET"]),
        Route("/info", service.info, methods=["GET"]),
        Route("/health", service.health, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        lifespan=service.lifespan,
        exception_handlers={
            RequestError: refused,
            HTTPException: http_error,
            Exception: server_error,
        },
    )
