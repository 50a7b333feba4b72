"""Running one recurrent step function over a whole sequence, on every backend.

Keras' `keras.layers.RNN` runs a cell whose step sees only its input and its
states; an attention decoder's step also reads a memory, its projected keys
and the step index, and returns the attention weights beside its output.
This module runs such a step over the time axis with `keras.ops.scan` or
`keras.ops.while_loop`, whichever the backend can differentiate and compile.
"""

import keras
from keras import ops


def run_over_steps(step_fn, initial_state, steps, output_widths, dtype, xla):
    """Runs `step_fn` over the time-major `steps` `[T, B, ...]`.

    Args:
        step_fn: `(state, steps[t], t) -> (state, outputs)`, where `state` is
            a structure of tensors carried from step to step and `outputs` a
            tuple of `[B, width]` tensors.
        initial_state: the state before the first step.
        steps: `[T, B, ...]`, one row per step.
        output_widths: the width of each of `step_fn`'s outputs (ints or int
            scalar tensors).
        dtype: the dtype of the outputs.
        xla: whether the loop may be compiled with XLA on TensorFlow (see
            `_loop_over_steps`); ignored on the other backends.

    Returns:
        (the state after the last step, tuple of time-major outputs
        `[T, B, width]`).
    """
    if keras.backend.backend() == "tensorflow" and xla:
        return _loop_over_steps(step_fn, initial_state, steps, output_widths, dtype)
    return _scan_over_steps(step_fn, initial_state, steps, output_widths, dtype)


def _cast_outputs(outputs, dtype):
    return tuple(ops.cast(output, dtype) for output in outputs)


def _scan_over_steps(step_fn, initial_state, steps, output_widths, dtype):
    """`run_over_steps` as a scan.

    The while loop only where XLA compiles the step: without XLA its buffer
    writes copy the whole buffer at every step, which the scan's stacking
    does not.
    """
    batch = ops.shape(steps)[1]
    initial = (
        initial_state,
        tuple(ops.zeros((batch, width), dtype) for width in output_widths),
        ops.zeros((), "int32"),  # the step index
    )

    # keras' TensorFlow scan fails on several sequences when their length
    # is unknown, so the step index is in the carry; and it stacks outputs
    # shaped like the carry, so the step's outputs travel in the carry and
    # are stacked from it (the states stacked alongside are small).
    def scan_step(carry, step_input):
        state, _, t = carry
        state, outputs = step_fn(state, step_input, t)
        carry = (state, _cast_outputs(outputs, dtype), t + 1)
        return carry, carry

    (final_state, _, _), (_, outputs, _) = ops.scan(scan_step, initial, steps)
    return final_state, outputs


def _loop_over_steps(step_fn, initial_state, steps, output_widths, dtype):
    """`run_over_steps` as a while loop that writes each step's outputs into
    a row of preallocated time-major buffers.

    TensorFlow only. XLA needs a bound on a loop's trip count to size the
    gradient's per-step accumulators, and keras' TensorFlow scan sets none
    when the length is unknown at tracing (as in a train step of `fit` on
    batches of varying length), so `jit_compile=True` fails with "XLA
    compilation requires a fixed tensor list size"; `maximum_iterations` is
    that bound. JAX can't reverse-differentiate a while loop whose bound is a
    tensor, hence the scan on the other backends.
    """
    length, batch = ops.shape(steps)[0], ops.shape(steps)[1]

    def write_row(buffer, t, row):
        # Not `slice_update`: TensorFlow has no gradient for the XLA op under
        # it. An empty buffer (an empty batch: a worker's share of a short
        # last batch under multi-worker) refuses a scatter of one index, so
        # the index and the row are emptied with it.
        keep = ops.minimum(ops.size(buffer), 1)
        return ops.scatter_update(buffer, ops.reshape(t, (1, 1))[:keep], row[None][:keep])

    def body(t, state, buffers):
        state, outputs = step_fn(state, steps[t], t)
        rows = _cast_outputs(outputs, dtype)
        return t + 1, state, tuple(write_row(b, t, row) for b, row in zip(buffers, rows))

    initial = (
        ops.zeros((), "int32"),
        initial_state,
        tuple(ops.zeros((length, batch, width), dtype) for width in output_widths),
    )
    _, final_state, outputs = ops.while_loop(
        lambda t, *_: t < length, body, initial, maximum_iterations=length
    )
    return final_state, outputs
