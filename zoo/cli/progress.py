"""The decoding progress line of `zoo translate` and `zoo evaluate`, on stderr.

Our own small writer, not `keras.utils.Progbar`: Progbar writes to standard
output (keras' `io_utils.print_msg`), which carries the translations, and
shows time per unit rather than sentences per second. Keras-free.
"""

import contextlib
import sys
import time

# Seconds between two redraws: often enough to look live on a terminal,
# rarely enough that a log file of it stays short.
_TERMINAL_INTERVAL = 0.2
_FILE_INTERVAL = 10.0


def wanted(flag, stream=None):
    """Whether to show progress: `flag` (`--progress` / `--no-progress`)
    when given, else whether `stream` (stderr) is a terminal."""
    if flag is not None:
        return flag
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Progress:
    """Counts finished sentences and shows `N[/TOTAL] sentences, R sentences/s`.

    On a terminal the line is redrawn in place; elsewhere (a log file) it is
    written as separate lines, at most one every few seconds. `close` writes
    the final count, unless a log file has it already.

    Args:
        total: the number of sentences to expect, or None (a stream).
        stream: where to write; standard error by default (never stdout,
            which carries the output).
        unit: the name of what is counted.
        clock: a function returning seconds (a test can pass its own).
    """

    def __init__(self, total=None, stream=None, unit="sentences", clock=time.monotonic):
        self.total = total
        self.stream = stream or sys.stderr
        self.unit = unit
        self.clock = clock
        self.done = 0
        self._start = clock()
        self._shown = None
        self._shown_done = None
        self._terminal = wanted(None, self.stream)

    def __call__(self, count):
        """Adds `count` finished sentences."""
        self.done += count
        interval = _TERMINAL_INTERVAL if self._terminal else _FILE_INTERVAL
        now = self.clock()
        if self._shown is None or now - self._shown >= interval:
            self._show(now)

    def line(self, now=None):
        elapsed = (self.clock() if now is None else now) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        return f"{count} {self.unit}, {rate:.1f} {self.unit}/s"

    def _show(self, now):
        self._shown, self._shown_done = now, self.done
        end = "\r" if self._terminal else "\n"
        self.stream.write(self.line(now) + end)
        self.stream.flush()

    def close(self):
        # A log file keeps every line it was given: the same count twice
        # would read as two reports.
        if self._terminal or self._shown_done != self.done:
            self._show(self.clock())
        if self._terminal:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


@contextlib.contextmanager
def shown(flag, total=None, unit="sentences"):
    """A `Progress` on stderr if `wanted(flag)`, else None, for a `with`."""
    if not wanted(flag):
        yield None
        return
    with Progress(total=total, unit=unit) as progress:
        yield progress
