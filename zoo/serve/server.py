"""Runs an app with uvicorn until SIGTERM or Ctrl-C, shutting down gracefully."""

import signal

import uvicorn


def _already_handled(signum, frame):
    """Receives the SIGTERM that uvicorn raises again after its graceful
    shutdown, so that the process then exits with status 0."""


def run(app, host, port):
    """Serves `app` on `host:port`. On SIGTERM uvicorn stops accepting
    connections, lets the requests in flight finish, then runs the app's
    shutdown (the batcher drains); `run` then returns."""
    config = uvicorn.Config(app, host=host, port=port, access_log=False, log_level="info")
    signal.signal(signal.SIGTERM, _already_handled)
    uvicorn.Server(config).run()
