"""Keras' GRU and LSTM layers exported as ONNX's `GRU` and `LSTM` operators.

tf2onnx converts the `while_loop` that Keras' recurrent layers run on
TensorFlow into an ONNX `Loop` of a few dozen small nodes, run once per
time step: half of the RNNsearch encoder's time in onnxruntime
(docs/performance.md, "Serving latency"). ONNX has the
recurrent operators themselves, one kernel for the whole sequence, and
tf2onnx maps only TensorFlow 1's cuDNN and `tf.keras` loop patterns to them,
not Keras 3's. So while a function is traced for ONNX
(`recurrent_layers_as_onnx_operators`), each eligible layer's loop is traced
as a stand-in op (`CudnnRNNV3`, which has the right inputs and outputs and
is never run), and the handlers this module gives tf2onnx write each stand-in
as the ONNX operator, with the layer's weights reordered to ONNX's layout.

Eligible: a float32 `keras.layers.GRU`, `LSTM`, or `RNN` of a `GRUCell` or
`LSTMCell`, with the default activations and biases (a GRU with
`reset_after=True`, ONNX's `linear_before_reset=1`), not stateful. Others
keep tf2onnx's `Loop`. The mask, if any, must be a prefix of each row (right
padding, as every source of this package is): it becomes the operator's
sequence lengths.
"""

import contextlib
import functools
import logging
import re

import keras
import numpy as np
import tensorflow as tf
from onnx import TensorProto
from tf2onnx import utils as tf2onnx_utils

# The stand-in op's name carries the layer's index in the registry; the
# trailing "x" keeps index 1 from matching 10 when TensorFlow uniquifies names.
_STAND_IN = "zoo_recurrent_{}x"
_STAND_IN_PATTERN = re.compile(r"zoo_recurrent_(\d+)x")

# Keras' gate order and ONNX's: GRU update, reset, candidate in both; LSTM
# input, forget, cell, output in Keras and input, output, forget, cell in ONNX.
_GATES = {"GRU": ("zrh", "zrh"), "LSTM": ("ifco", "iofc")}


class _Recorded:
    """What the handler needs of one traced layer: its operator, weights in
    ONNX's layout, direction, and whether masked outputs repeat the last."""

    def __init__(self, layer, masked):
        self.operator = "GRU" if type(layer.cell) is keras.layers.GRUCell else "LSTM"
        cell = layer.cell
        with tf.init_scope():  # the weights' values, outside the trace
            kernel, recurrent, bias = (
                np.asarray(w.numpy(), "float32")
                for w in (cell.kernel, cell.recurrent_kernel, cell.bias)
            )
        self.units = recurrent.shape[0]
        self.input_weights = self._onnx_gates(kernel.T)[None]
        self.recurrent_weights = self._onnx_gates(recurrent.T)[None]
        if self.operator == "GRU":  # [2, 3H]: input bias, recurrent bias
            biases = [self._onnx_gates(b) for b in bias]
        else:  # one bias; ONNX adds an input and a recurrent one
            biases = [self._onnx_gates(bias), np.zeros_like(bias)]
        self.biases = np.concatenate(biases)[None]
        self.reverse = layer.go_backwards
        # Keras repeats the last output over the masked steps after a forward
        # sequence ends, unless told to zero them; ONNX writes zeros.
        self.repeat_last_output = (
            masked and not layer.go_backwards and not layer.zero_output_for_mask
        )

    def _onnx_gates(self, array):
        """`array`'s gate blocks (its first axis) in ONNX's order."""
        keras_order, onnx_order = _GATES[self.operator]
        blocks = np.split(array, len(keras_order), axis=0)
        return np.concatenate([blocks[keras_order.index(gate)] for gate in onnx_order], axis=0)


def _eligible(layer, sequences):
    cell = layer.cell
    if type(cell) is keras.layers.GRUCell:
        if not cell.reset_after:
            return False
    elif type(cell) is not keras.layers.LSTMCell:
        return False
    return (
        sequences.dtype == tf.float32
        and cell.use_bias
        and not layer.stateful
        and cell.activation is keras.activations.tanh
        and cell.recurrent_activation is keras.activations.sigmoid
    )


@contextlib.contextmanager
def recurrent_layers_as_onnx_operators():
    """While tracing a function for tf2onnx, the GRU and LSTM layers it
    calls trace as stand-ins; yields the `custom_op_handlers` that
    `tf2onnx.convert.from_function` needs to write them as ONNX operators.
    """
    recorded = []
    # GRU and LSTM override RNN's loop (for cuDNN); a plain RNN of a GRU or
    # LSTM cell is eligible too.
    originals = {
        cls: cls.__dict__["inner_loop"]
        for cls in (keras.layers.RNN, keras.layers.GRU, keras.layers.LSTM)
    }

    def inner_loop(layer, sequences, initial_state, mask, training=False):
        if not _eligible(layer, sequences):
            original = next(originals[cls] for cls in type(layer).__mro__ if cls in originals)
            return original(layer, sequences, initial_state, mask, training=training)
        record = _Recorded(layer, mask is not None)
        recorded.append(record)
        return _stand_in(record, len(recorded) - 1, sequences, initial_state, mask)

    for cls in originals:
        cls.inner_loop = inner_loop
    # The stand-in's cuDNN workspace outputs have no shape, which tf2onnx
    # warns of on the console; they are never used.
    shape_log = logging.getLogger("tf2onnx.shape_inference")
    log_level = shape_log.level
    shape_log.setLevel(logging.ERROR)
    try:
        # tf2onnx's handler arguments would name an ONNX op: the records are bound.
        yield {"CudnnRNNV3": (functools.partial(_write_operator, recorded), [])}
    finally:
        for cls, original in originals.items():
            cls.inner_loop = original
        shape_log.setLevel(log_level)


def _stand_in(record, index, sequences, initial_state, mask):
    """The traced op in the layer loop's place, with `inner_loop`'s
    results: the last output, the outputs (in the layer's time order), the
    final states."""
    if mask is None:
        lengths = tf.fill(tf.shape(sequences)[:1], tf.shape(sequences)[1])
    else:
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    hidden = initial_state[0][None]
    cell_state = initial_state[1][None] if record.operator == "LSTM" else hidden
    outputs, last_hidden, last_cell = tf.raw_ops.CudnnRNNV3(
        input=sequences,
        input_h=hidden,
        input_c=cell_state,
        params=tf.zeros([1]),
        sequence_lengths=lengths,
        rnn_mode=record.operator.lower(),
        time_major=False,
        is_training=False,
        name=_STAND_IN.format(index),
    )[:3]
    last_hidden = last_hidden[0]
    if record.repeat_last_output:
        outputs = tf.where(mask[:, :, None], outputs, last_hidden[:, None, :])
    if record.reverse:  # Keras gives a backward layer's outputs last step first
        outputs = tf.reverse(outputs, [1])
    states = [last_hidden] if record.operator == "GRU" else [last_hidden, last_cell[0]]
    return last_hidden, outputs, states


def _write_operator(recorded, ctx, node, name, args):
    """tf2onnx handler: the stand-in `node` as the ONNX operator."""
    record = recorded[int(_STAND_IN_PATTERN.search(node.name).group(1))]
    sequences, hidden, cell_state, _, lengths = node.input[:5]
    outputs = list(node.output)

    def constant(prefix, value):
        return ctx.make_const(tf2onnx_utils.make_name(prefix), value).output[0]

    time_major = ctx.make_node("Transpose", [sequences], attr={"perm": [1, 0, 2]}).output[0]
    lengths = ctx.make_node("Cast", [lengths], attr={"to": TensorProto.INT32}).output[0]
    inputs = [
        time_major,
        constant("W", record.input_weights),
        constant("R", record.recurrent_weights),
        constant("B", record.biases),
        lengths,
        hidden,
    ]
    if record.operator == "LSTM":
        inputs.append(cell_state)
    operator = ctx.make_node(
        record.operator,
        inputs,
        attr={
            "hidden_size": record.units,
            "direction": "reverse" if record.reverse else "forward",
            **({"linear_before_reset": 1} if record.operator == "GRU" else {}),
        },
        output_count=3 if record.operator == "LSTM" else 2,
    )
    ctx.remove_node(node.name)
    # Y is [T, directions, B, H]: the stand-in's output is [B, T, H].
    steps = ctx.make_node("Squeeze", [operator.output[0], constant("axis", np.array([1], "int64"))])
    ctx.make_node("Transpose", [steps.output[0]], attr={"perm": [1, 0, 2]}, outputs=[outputs[0]])
    ctx.make_node("Identity", [operator.output[1]], outputs=[outputs[1]])
    if record.operator == "LSTM":
        ctx.make_node("Identity", [operator.output[2]], outputs=[outputs[2]])
