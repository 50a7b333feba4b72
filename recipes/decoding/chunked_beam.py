"""`ChunkedBeamSearch`: `beam_search` run as a Python loop of compiled
chunks of steps, between which the examples that are done leave the batch
(the translators' beam search on TensorFlow and torch)."""

import numpy as np
from keras import ops

from zoo.recipes.decoding.beam import _beam_result
from zoo.recipes.decoding.beam import _beam_start
from zoo.recipes.decoding.beam import _beam_steps
from zoo.recipes.decoding.beam import _BeamSettings
from zoo.recipes.decoding.decode_result import DecodeResult
from zoo.recipes.decoding.decode_result import _is_int
from zoo.recipes.decoding.decode_result import max_decoding_steps


class ChunkedBeamSearch:
    """`beam_search` run as a Python loop of compiled chunks of steps, which
    drops the examples that are done from the batch between chunks and
    grows the step caches only as the steps need them.

    One compiled `beam_search` runs every row of a batch until its last
    example is done, and every step attends over, writes and (reordering
    the beams) copies caches as long as the step limit. Here each chunk of
    `chunk_steps` steps is one compiled loop (`_beam_steps`); between
    chunks the examples that are done are finished (`_beam_result` on them
    alone) and leave the batch, and the caches of `model.step_cache_axes`
    grow to the slots the next chunk needs. The results are those of
    `beam_search` with the same arguments (each example is searched
    independently of the others), up to the rounding of a batch of another
    size.

    It suits a backend whose compiled function takes batches and caches of
    any size without compiling again: TensorFlow's `tf.function` (with
    `reduce_retracing`, the translators' `compile_inference`), or torch,
    which runs eagerly. Under `jax.jit` every new size compiles: use
    `beam_search` there. A SavedModel or ONNX graph holds one loop, so
    the exports use `beam_search` too.

    Args:
        model: a model with the encode/decode_step contract.
        beam_width, length_penalty, coverage_penalty, max_length,
            max_length_ratio, max_length_offset, stopping: as in
            `beam_search`.
        chunk_steps: int >= 1, the steps between two compactions. Each
            compaction is a return to Python; fewer of them keep done
            examples in the batch longer (docs/performance.md says how the
            default was chosen).
        compile: a function that compiles a function of tensors (e.g.
            `tf.function`); default: none.

    Call arguments:
        source: the model's source batch, as in `beam_search`.

    Returns:
        A `DecodeResult` of NumPy arrays; `num_steps` is the steps run by
        the examples searched longest.
    """

    def __init__(
        self,
        model,
        beam_width=4,
        length_penalty=0.0,
        coverage_penalty=0.0,
        max_length=None,
        max_length_ratio=1.5,
        max_length_offset=10,
        stopping="early",
        chunk_steps=4,
        compile=None,
    ):
        if not _is_int(chunk_steps) or chunk_steps < 1:
            raise ValueError(
                f"`chunk_steps` must be a positive int. Received: chunk_steps={chunk_steps!r}"
            )
        self.model = model
        self.settings = _BeamSettings.checked(
            beam_width, length_penalty, coverage_penalty, stopping
        )
        self.limits = (max_length, max_length_ratio, max_length_offset)
        self.chunk_steps = int(chunk_steps)
        compile = compile or (lambda function: function)
        # What runs between two chunks is compiled too: eagerly, each of its
        # many small takes and pads would pay the dispatch of one op.
        self._start = compile(self._start_function)
        self._steps = compile(self._steps_function)
        self._finish = compile(self._finish_function)
        self._compact = compile(self._compact_function)

    def _start_function(self, source):
        state = self.model.encode(source)
        limit = max_decoding_steps(self.model, self.model.attention_width(state), *self.limits)
        if isinstance(limit, int):
            first_chunk = min(limit, self.chunk_steps)
        else:
            first_chunk = ops.minimum(limit, self.chunk_steps)
        started = _beam_start(self.model, source, state, limit, first_chunk, self.settings)
        return started, limit

    def _steps_function(self, limit, stop, step, tokens, state, search, coverage_mask):
        state = _grow_step_caches(self.model, state, stop)
        return _beam_steps(
            self.model, self.settings, coverage_mask, limit, stop, step, tokens, state, search
        )

    def _finish_function(self, search, examples, num_steps, coverage_mask):
        """The results of `examples` (indices into the batch)."""
        return _beam_result(
            _take_search(search, examples, self.settings.width),
            num_steps,
            self.settings,
            ops.take(coverage_mask, examples, axis=0),
            self.model.pad_id,
        )

    def _compact_function(self, tokens, state, search, coverage_mask, examples):
        """The batch cut to `examples` (indices into it)."""
        rows = _rows_of(examples, self.settings.width)
        return (
            ops.take(tokens, rows, axis=0),
            {key: ops.take(value, rows, axis=0) for key, value in state.items()},
            _take_search(search, examples, self.settings.width),
            ops.take(coverage_mask, examples, axis=0),
        )

    def __call__(self, source):
        source = ops.convert_to_tensor(source)
        (step, tokens, state, search, coverage_mask), limit = self._start(source)
        limit, step = int(limit), int(step)
        examples = np.arange(int(ops.shape(source)[0]))  # each example's place in the batch
        parts = []
        while True:
            stop = min(limit, step + self.chunk_steps)
            # Tensors, not python ints, so that `tf.function` does not trace
            # again for each value.
            step, tokens, state, search = self._steps(
                *(_int32(n) for n in (limit, stop, step)),
                tokens,
                state,
                search,
                coverage_mask,
            )
            step = int(step)
            ending = np.asarray(ops.convert_to_numpy(search["done"])) | (step >= limit)
            if ending.any():
                ended = np.flatnonzero(ending)
                result = self._finish(search, _int32(ended), _int32(step), coverage_mask)
                parts.append((examples[ended], result))
            if ending.all():
                return _gather_parts(parts, sum(len(e) for e, _ in parts), step)
            if ending.any():
                # The examples still searched go on alone.
                kept = np.flatnonzero(~ending)
                tokens, state, search, coverage_mask = self._compact(
                    tokens, state, search, coverage_mask, _int32(kept)
                )
                examples = examples[kept]


def _grow_step_caches(model, state, steps):
    """`state` with each entry of `model.step_cache_axes` padded with zero
    slots to at least `steps`, an int32 scalar (the inverse of
    `fit_step_caches`)."""
    grown = dict(state)
    for key, axis in getattr(model, "step_cache_axes", {}).items():
        value = state[key]
        padding = [(0, 0)] * len(value.shape)
        padding[axis] = (0, ops.maximum(steps - ops.shape(value)[axis], 0))
        grown[key] = ops.pad(value, padding)
    return grown


def _int32(value):
    return ops.convert_to_tensor(value, "int32")


def _rows_of(examples, width):
    """The beam rows of `examples` (int32 indices into the batch), `[n * K]`."""
    rows = ops.expand_dims(examples * width, 1) + ops.arange(width, dtype="int32")
    return ops.reshape(rows, (-1,))


def _take_search(search, examples, width):
    """The search state of `examples` (int32 indices into the batch) alone,
    with the row numbers that the history and the finished store hold
    renumbered for the smaller batch."""
    rows = _rows_of(examples, width)
    # Row e * K + k (beam k of example e) becomes k plus K times the
    # example's place among `examples`.
    places = ops.arange(ops.shape(examples)[0], dtype="int32")
    bases = ops.repeat(places * width, width)

    def renumber(row_numbers):
        return row_numbers % width + bases

    taken = {
        key: ops.take(value, rows, axis=0)
        for key, value in search.items()
        if key not in ("history", "done")
    }
    taken["finished_rows"] = renumber(taken["finished_rows"])
    taken["done"] = ops.take(search["done"], examples, axis=0)
    history = search["history"]
    taken["history"] = {
        "tokens": ops.take(history["tokens"], rows, axis=1),
        "parents": renumber(ops.take(history["parents"], rows, axis=1)),
        "attention": ops.take(history["attention"], rows, axis=1),
    }
    return taken


def _gather_parts(parts, batch, num_steps):
    """One `DecodeResult` of NumPy arrays from the results of parts of the
    batch, `(examples, DecodeResult)` each."""
    fields = {}
    for name in DecodeResult._fields:
        if name == "num_steps":
            continue
        for examples, result in parts:
            value = np.asarray(ops.convert_to_numpy(getattr(result, name)))
            if name not in fields:
                fields[name] = np.zeros((batch,) + value.shape[1:], value.dtype)
            fields[name][examples] = value
    return DecodeResult(num_steps=np.int32(num_steps), **fields)
