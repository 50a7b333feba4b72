"""`zoo serve`: an HTTP server for translation (and captioning) over a run
directory or an export folder, on Starlette and uvicorn (the `serve` extra).

    engines    the models it decodes with (a run, an ONNX export) behind one
               interface, and `open_engine`, which opens the one a path holds
    payloads   the limits, and the JSON requests read and checked against them
    images     a captioning request's image files, decoded and resized
    batcher    dynamic batching: requests that arrive together, one engine call
    app        the Starlette app: the routes, the errors as JSON
    server     runs the app with uvicorn, shutting down gracefully on SIGTERM

`zoo.cli.serve` is the command line. This package imports nothing at import,
so the command line can say that the extra is missing in one line.
"""
