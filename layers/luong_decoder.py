"""The Luong-style attention decoder: attend from h_t, attentional state, input feeding."""

import keras
from keras import ops

from zoo.layers.attention_decoder import AttentionDecoder
from zoo.layers.attention_decoder import _cell_output_size
from zoo.layers.base_attention import is_positive_int

ATTENTIONAL_ACTIVATIONS = ("tanh", "maxout")


@keras.saving.register_keras_serializable(package="zoo")
class LuongDecoder(AttentionDecoder):
    """A recurrent decoder that attends after each step (Luong et al.).

    At step t the cell runs first, and its new output `h_t` (the top cell's
    for a stack) queries the memory; the attentional state combines the
    context and `h_t`:

        h_t = cell(x_t, h_{t-1})                # [x_t; h~_{t-1}] with input feeding
        c_t, alpha_t = attention(h_t, memory)
        h~_t = tanh(W_c [c_t; h_t])

    The output of step t is `h~_t` (`p(y_t) = softmax(W_s h~_t)` in the
    paper). With input feeding, `h~_{t-1}` is fed to the cell beside the
    step's input, so the decoder knows its past alignments, and `h~` is part
    of the decoder's state. Without it nothing in the recurrence depends on
    the attention: a whole target runs the cell first (`keras.layers.RNN`)
    and attends at all steps at once.

    Works over a whole target (teacher forcing) or one step at a time
    (`project_memory`, `get_initial_state`, `step`), with the same weights
    and the same numbers.

    Args:
        cell: a Keras recurrent cell, a `keras.layers.StackedRNNCells`, or a
            list of cells (Luong's stacked LSTM).
        attention: `LuongAttention`, `LocalAttention` (the step index is
            passed on), `AdditiveAttention` or `SpatialSoftAttention`.
        units: int, the size of `h~` (`W_c`'s output); the cell's output size
            when None.
        input_feeding: bool, feed `h~_{t-1}` to the cell.
        attentional_activation: `"tanh"` (the paper's `h~ = tanh(W_c [c; h])`)
            or `"maxout"`: `h~` is the maximum of two affine maps of `[c; h]`,
            as RNNsearch's readout. Trained with Adam on the embedded
            synthetic corpus, the tanh units saturate within a few updates
            and the attention settles on one source position, where maxout
            lets it learn the alignment (docs/experiments/2026-12-06-luong-attention-sink.md).
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `[batch, T, E]`, the target inputs.
        memory: `[batch, S, D]` (or `[batch, H, W, D]` for
            `SpatialSoftAttention`).
        inputs_mask: optional boolean `[batch, T]`; a masked step keeps the
            state and gives zero outputs and attention. Taken from the
            inputs' Keras mask when not given.
        memory_mask: optional boolean `[batch, S]`. Taken from the memory's
            Keras mask when not given.
        initial_state: optional list of `[batch, size]` tensors: the cell's
            states, or the whole decoder state (`state_size`, the fed `h~`
            last); zeros for what is not given.
        projected_memory: optional output of `project_memory(memory)`.
        return_attention: also return the alignment history `[batch, T, S]`.
        return_state: also return the final state, a list.
        xla: see `BahdanauDecoder`.
        training: whether dropout is active.

    Returns:
        The attentional states `[batch, T, units]`; then the attention when
        `return_attention`, then the state when `return_state`.

    Example:

    >>> encoder_states = np.random.rand(2, 7, 8).astype("float32")
    >>> targets = np.random.rand(2, 5, 4).astype("float32")
    >>> decoder = LuongDecoder(
    ...     [keras.layers.LSTMCell(8), keras.layers.LSTMCell(8)],
    ...     LuongAttention(score="general"))
    >>> outputs, alignment = decoder(targets, encoder_states, return_attention=True)
    >>> tuple(outputs.shape), tuple(alignment.shape)
    ((2, 5, 8), (2, 5, 7))

    The same numbers one step at a time:

    >>> keys = decoder.project_memory(encoder_states)
    >>> state = decoder.get_initial_state(2)
    >>> for t in range(5):
    ...     output, state, alpha = decoder.step(
    ...         targets[:, t], state, encoder_states, projected_memory=keys, step=t)
    >>> numpy = keras.ops.convert_to_numpy
    >>> bool(np.allclose(numpy(output), numpy(outputs)[:, -1], atol=1e-5))
    True

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    def __init__(
        self,
        cell,
        attention,
        units=None,
        input_feeding=True,
        attentional_activation="tanh",
        **kwargs,
    ):
        super().__init__(cell, attention, **kwargs)
        if units is not None and not is_positive_int(units):
            raise ValueError(f"`units` must be a positive int or None. Received: units={units!r}")
        if attentional_activation not in ATTENTIONAL_ACTIVATIONS:
            raise ValueError(
                "`attentional_activation` must be one of "
                f"{', '.join(ATTENTIONAL_ACTIVATIONS)}. "
                f"Received: attentional_activation={attentional_activation!r}"
            )
        self.units = units
        self.input_feeding = bool(input_feeding)
        self.attentional_activation = attentional_activation
        maxout = attentional_activation == "maxout"
        # The paper's W_c has no bias; maxout's two pieces need theirs.
        self.attentional_dense = keras.layers.Dense(
            self.attentional_size * (2 if maxout else 1),
            activation=None if maxout else "tanh",
            use_bias=maxout,
            dtype=self.dtype_policy,
            name="attentional_state",
        )
        # The same cell over a whole target, when no step reads the attention.
        self.rnn = (
            None
            if self.input_feeding
            else keras.layers.RNN(
                self.cell,
                return_sequences=True,
                return_state=True,
                dtype=self.dtype_policy,
                name="rnn",
            )
        )

    @property
    def attentional_size(self):
        """The size of `h~`, the output."""
        return self.units or _cell_output_size(self.cell)

    @property
    def state_size(self):
        feed = [self.attentional_size] if self.input_feeding else []
        return super().state_size + feed

    def _cell_input_size(self, inputs_size, memory_size):
        return inputs_size + (self.attentional_size if self.input_feeding else 0)

    def _output_size(self, memory_size):
        return self.attentional_size

    def _build_own(self, inputs_shape, memory_shape):
        self.attentional_dense.build((None, memory_shape[-1] + _cell_output_size(self.cell)))
        if self.rnn is not None:
            self.rnn.build((None, None, inputs_shape[-1]))

    def _attentional_state(self, top, memory, projected_memory, memory_mask, step, training):
        """`(h~, attention)` for `h` `[B, H]` or `[B, T, H]`: `h~ = tanh(W_c [c; h])`,
        or with maxout the larger of the two affine maps of `[c; h]`."""
        context, attention = self._attend(
            top, memory, projected_memory, memory_mask, step, training
        )
        combined = ops.concatenate([ops.cast(context, top.dtype), top], axis=-1)
        attentional = self.attentional_dense(combined)
        if self.attentional_activation == "maxout":
            size = self.attentional_size
            attentional = ops.maximum(attentional[..., :size], attentional[..., size:])
        return attentional, attention

    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        count = self.cell_state_count
        if self.input_feeding:
            inputs = ops.concatenate([inputs, ops.cast(states[count], inputs.dtype)], axis=-1)
        top, new_states = self._run_cell(inputs, states[:count], training)
        attentional, attention = self._attentional_state(
            top, memory, projected_memory, memory_mask, step, training
        )
        if self.input_feeding:
            new_states = new_states + [attentional]
        return attentional, new_states, attention

    def _run_sequence(
        self, inputs, states, memory, projected_memory, memory_mask, inputs_mask, xla, training
    ):
        # Monotonic attention carries its alignment from step to step, which
        # the attention over all steps at once would not return as state.
        if self.input_feeding or self.carries_alignment:
            return super()._run_sequence(
                inputs, states, memory, projected_memory, memory_mask, inputs_mask, xla, training
            )
        top, *final = self.rnn(
            inputs,
            initial_state=self._nest_cell_states(states),
            mask=inputs_mask,
            training=training,
        )
        attentional, attention = self._attentional_state(
            top, memory, projected_memory, memory_mask, 0, training
        )
        if inputs_mask is not None:
            keep = ops.expand_dims(inputs_mask, -1)
            attentional = attentional * ops.cast(keep, attentional.dtype)
            attention = attention * ops.cast(keep, attention.dtype)
        return attentional, attention, list(keras.tree.flatten(final))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "input_feeding": self.input_feeding,
                "attentional_activation": self.attentional_activation,
            }
        )
        return config
