"""What training prints on stdout while it runs: a progress bar on a
terminal, plain log lines elsewhere.

Keras' progress bar redraws itself with backspaces and carriage returns
whenever the `posix` module is loaded (`keras.utils.Progbar`), so a log file
of it fills with control characters. Where stdout is not a terminal, `fit`
prints one line per epoch (verbose 2) and `StepLog` a line every
`LOG_EVERY_STEPS` steps, as OpenNMT-py and fairseq do.
"""

import datetime
import sys
import time

import keras

# Steps between two log lines (OpenNMT-py's report_every is 50, fairseq's
# log_interval 100).
LOG_EVERY_STEPS = 100


def fit_logging(verbose, epochs, first_step, tokens_per_step, stream=None, steps_per_epoch=None):
    """The verbosity and the callbacks that a `fit` of one part of a run
    gets, so that it prints what `verbose` asks.

    Args:
        verbose: 0, 1, 2, or "auto" (1 when `stream` is a terminal, else 2).
        epochs: the run's number of epochs, which the `Epoch i/N` lines count
            out of (a resumed run fits its rest in parts).
        first_step: the step this part starts at inside its first epoch
            (the rest of an epoch interrupted inside).
        tokens_per_step: a function returning the mean target tokens of a
            batch; called only for log lines (verbose 2).
        stream: where Keras prints (stdout by default).
        steps_per_epoch: the epoch's steps as counted before training
            (`TaskData.batches_per_epoch`), shown as "~N" where the data
            does not know its own (a stream whose size is estimated).

    Returns:
        `(verbose, callbacks)` for `fit`.
    """
    stream = stream or sys.stdout
    if verbose == "auto":
        verbose = 1 if getattr(stream, "isatty", lambda: False)() else 2
    callbacks = [RunProgbarLogger(epochs)]
    if verbose == 2:
        callbacks.append(
            StepLog(
                epochs, first_step, tokens_per_step(), every=LOG_EVERY_STEPS, stream=stream,
                steps_per_epoch=steps_per_epoch,
            )
        )
    return verbose, callbacks


class RunProgbarLogger(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, numbering epochs out of the run's `epochs`
    rather than out of the `epochs` argument of this `fit`."""

    def __init__(self, epochs):
        super().__init__()
        self.run_epochs = epochs

    def set_params(self, params):
        super().set_params(params)
        self.epochs = self.run_epochs


class StepLog(keras.callbacks.Callback):
    """Prints `epoch E/N, step S/T, loss L, R tokens/s, H:MM:SS elapsed`
    every `every` steps.

    The loss is the mean over the epoch so far (Keras' running metric);
    the rate is over the steps since the previous line, counting each step
    as a batch of `tokens_per_step` target tokens (the epoch's mean).

    Args:
        epochs: the run's number of epochs.
        first_step: the step the first epoch of this `fit` starts at.
        tokens_per_step: float, the mean target tokens of a batch.
        every: steps between two lines.
        stream: where to write.
        clock: a function returning seconds (a test can pass its own).
        steps_per_epoch: shown as "~N" when `fit` does not know the
            epoch's steps.
    """

    def __init__(
        self, epochs, first_step, tokens_per_step, every=LOG_EVERY_STEPS, stream=None,
        clock=time.monotonic, steps_per_epoch=None,
    ):
        super().__init__()
        self.epochs = epochs
        self.first_step = first_step
        self.tokens_per_step = tokens_per_step
        self.every = every
        self.stream = stream or sys.stdout
        self.clock = clock
        self.steps_per_epoch = steps_per_epoch

    def on_train_begin(self, logs=None):
        self._start = self.clock()
        self._offset = self.first_step

    def on_epoch_begin(self, epoch, logs=None):
        # The rate leaves out the previous epoch's validation.
        self._epoch, self._last, self._last_step = epoch, self.clock(), self._offset

    def on_epoch_end(self, epoch, logs=None):
        self._offset = 0  # only the first epoch of the fit starts inside

    def on_train_batch_end(self, batch, logs=None):
        step = self._offset + batch + 1
        if step % self.every:
            return
        now = self.clock()
        tokens = (step - self._last_step) * self.tokens_per_step
        rate = tokens / max(now - self._last, 1e-9)
        self._last, self._last_step = now, step
        known = self.params.get("steps")
        total = self._offset + known if known else f"~{self.steps_per_epoch or '?'}"
        elapsed = datetime.timedelta(seconds=round(now - self._start))
        loss = float((logs or {}).get("loss", float("nan")))
        self.stream.write(
            f"epoch {self._epoch + 1}/{self.epochs}, step {step}/{total}, loss {loss:.4f}, "
            f"{rate:.0f} tokens/s, {elapsed} elapsed\n"
        )
        self.stream.flush()


class FirstUpdate(keras.callbacks.Callback):
    """The seconds from `since` (a `time.monotonic()` reading taken when
    the training was called) to the end of its first step: what reading a
    corpus, learning its vocabularies and compiling the step cost before
    training starts (metrics.json's `first_update_seconds`).

    With a `stream`, it also prints them there in one line, with `parts`
    ({what: seconds}, e.g. the corpus's reading) inside it.
    """

    def __init__(self, since, parts=None, stream=None):
        super().__init__()
        self.since = since
        self.parts = parts or {}
        self.stream = stream
        self.seconds = None

    def on_train_batch_end(self, batch, logs=None):
        if self.seconds is not None:
            return
        self.seconds = time.monotonic() - self.since
        if self.stream is not None:
            parts = ", ".join(f"{what} {seconds:.1f} s" for what, seconds in self.parts.items())
            self.stream.write(f"first update {self.seconds:.1f} s after the start ({parts})\n")
            self.stream.flush()
