"""A bounded load generator for `zoo serve`: latency, throughput and errors
at each concurrency, as a Markdown table.

    python -m zoo.bench.serve_load http://127.0.0.1:8501 --data test.en \\
        --concurrency 1,8,32 --seconds 60 [--pid SERVER_PID]

At each concurrency C, C clients send one sentence a request (the lines of
--data in turn) to `POST /translate` (or the predict route, --predict NAME)
for --seconds, each sending its next request when its last is answered.
With --pid it samples the server's resident memory (Linux /proc) and
reports the peak. Needs httpx (the dev extra).
"""

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path

import httpx

MAX_CONCURRENCY = 1024
MAX_SECONDS = 3600


def bounded_int(low, high):
    def parse(text):
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be an int from {low} to {high}; received {text!r}"
            )
        return value

    return parse


def concurrencies(text):
    parse = bounded_int(1, MAX_CONCURRENCY)
    return [parse(part) for part in text.split(",")]


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m zoo.bench.serve_load", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8501")
    parser.add_argument("--data", required=True, help="a UTF-8 file of sentences, one a line")
    parser.add_argument(
        "--concurrency",
        type=concurrencies,
        default=[1, 8, 32],
        help="clients at once, comma-separated (default 1,8,32)",
    )
    parser.add_argument(
        "--seconds",
        type=bounded_int(1, MAX_SECONDS),
        default=60,
        help="seconds each concurrency runs (default 60)",
    )
    parser.add_argument(
        "--beam", type=bounded_int(1, 64), default=1, help="beam of the /translate requests"
    )
    parser.add_argument(
        "--predict", metavar="NAME", help="send to /v1/models/NAME:predict instead of /translate"
    )
    parser.add_argument(
        "--pid", type=int, help="the server's process id, to sample its resident memory"
    )
    return parser.parse_args(argv)


def resident_mib(pid):
    """The resident memory of process `pid` in MiB (Linux), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def request_body(args, sentence):
    if args.predict:
        return f"/v1/models/{args.predict}:predict", {"instances": [sentence]}
    return "/translate", {"text": [sentence], "beam": args.beam}


async def client(http, args, sentences, until, latencies, errors):
    """Sends requests one after another until `until` (a perf_counter time)."""
    while time.perf_counter() < until:
        path, body = request_body(args, next(sentences))
        start = time.perf_counter()
        try:
            response = await http.post(path, json=body)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            latencies.append(time.perf_counter() - start)
        else:
            errors.append(1)


async def sample_memory(pid, peak, stop):
    while not stop.is_set():
        peak.append(resident_mib(pid) or 0.0)
        await asyncio.sleep(0.5)


async def measure(args, concurrency, sentences):
    """One row of the table: the figures of `concurrency` clients."""
    latencies, errors, peak = [], [], []
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=args.url, limits=limits, timeout=60) as http:
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_memory(args.pid, peak, stop)) if args.pid else None
        start = time.perf_counter()
        until = start + args.seconds
        await asyncio.gather(
            *(client(http, args, sentences, until, latencies, errors) for _ in range(concurrency))
        )
        elapsed = time.perf_counter() - start
        stop.set()
        if sampler:
            await sampler
    latencies.sort()
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "sentences/s": len(latencies) / elapsed,
        "p50 ms": percentile(latencies, 0.50) * 1000,
        "p99 ms": percentile(latencies, 0.99) * 1000,
        "errors": len(errors),
        "peak RSS MiB": max(peak) if peak else None,
    }


def percentile(ordered, fraction):
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def markdown_table(rows):
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns)]
    for row in rows:
        cells = [
            "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
            for value in row.values()
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    lines = [line.strip() for line in Path(args.data).read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        sys.exit(f"serve_load: {args.data} holds no sentence")
    sentences = itertools.cycle(lines)
    rows = [asyncio.run(measure(args, c, sentences)) for c in args.concurrency]
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
