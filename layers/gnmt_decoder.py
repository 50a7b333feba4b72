"""The GNMT attention decoder: the bottom layer attends, every layer reads the context."""

import keras
from keras import ops

from zoo.layers.attention_decoder import AttentionDecoder
from zoo.layers.attention_decoder import _cell_output_size
from zoo.layers.attention_decoder import _state_count


@keras.saving.register_keras_serializable(package="zoo")
class GNMTDecoder(AttentionDecoder):
    """The stacked, residual attention decoder of GNMT (Wu et al., 2016).

    At step t the bottom layer's previous output `h^1_{t-1}` queries the
    memory, and the context `c_t` is fed to every layer of the stack beside
    that layer's input; from layer `first_residual_layer` on (counted from
    1), a layer's input is added to its output (the paper's eq. 6):

        c_t, alpha_t = attention(h^1_{t-1}, memory)
        x^1_t = x_t
        h^i_t = cell_i([x^i_t; c_t], h^i_{t-1})
        x^{i+1}_t = h^i_t + x^i_t   if i >= first_residual_layer
                    h^i_t           otherwise

    The output of step t is the top layer's `x^{L+1}_t` (the paper's softmax
    reads it), or `[x^{L+1}_t; c_t]` with `output_context=True`. Only the
    bottom layer's state queries, so the upper layers cost no attention;
    the residual adds the layer's input without the context, as TensorFlow
    NMT's GNMT does.

    The layer runs two ways with the same weights and the same numbers:
    called on a whole target (teacher forcing, inside any Keras model), or
    one step at a time with `step`, the keys projected once per source with
    `project_memory` (greedy and beam search).

    Args:
        cell: a list of Keras recurrent cells (bottom first; the paper's are
            `keras.layers.LSTMCell`s), a `keras.layers.StackedRNNCells`, or
            one cell. A residual layer's output size must equal the one
            below's.
        attention: a `zoo.layers` attention layer (`AdditiveAttention`, with
            `normalize=True` for the paper's normalised Bahdanau attention,
            `LuongAttention`, `LocalAttention`, a monotonic attention).
        first_residual_layer: int >= 2, the first layer (counted from 1)
            whose input is added to its output; 3 in the paper. A value above
            the number of layers turns the residuals off.
        output_context: bool, append the context `c_t` to each output.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `[batch, T, E]`, the target inputs (e.g. the embeddings of
            the previous tokens, teacher-forced).
        memory: `[batch, S, D]`, e.g. the encoder's top layer.
        inputs_mask: optional boolean `[batch, T]`; a masked step keeps the
            state and gives zero outputs and attention. Taken from the
            inputs' Keras mask when not given.
        memory_mask: optional boolean `[batch, S]`, False on padding. Taken
            from the memory's Keras mask when not given.
        initial_state: optional list of `[batch, size]` tensors, the cells'
            states bottom first (`state_size`); zeros when not given.
        projected_memory: optional output of `project_memory(memory)`.
        return_attention: also return the alignment history `[batch, T, S]`.
        return_state: also return the final state, a list.
        xla: see `BahdanauDecoder`.
        training: whether dropout is active.

    Returns:
        The outputs `[batch, T, output_size]`; then the attention when
        `return_attention`, then the state when `return_state`.

    Example:

    >>> encoder_states = np.random.rand(2, 7, 8).astype("float32")
    >>> targets = np.random.rand(2, 3, 4).astype("float32")
    >>> decoder = GNMTDecoder(
    ...     [keras.layers.LSTMCell(8) for _ in range(3)],
    ...     AdditiveAttention(units=6, normalize=True))
    >>> outputs, alignment = decoder(targets, encoder_states, return_attention=True)
    >>> tuple(outputs.shape), tuple(alignment.shape)
    ((2, 3, 8), (2, 3, 7))

    The same numbers one step at a time:

    >>> keys = decoder.project_memory(encoder_states)  # once per source
    >>> state = decoder.get_initial_state(2)
    >>> for t in range(3):
    ...     output, state, alpha = decoder.step(
    ...         targets[:, t], state, encoder_states, projected_memory=keys, step=t)
    >>> numpy = keras.ops.convert_to_numpy
    >>> bool(np.allclose(numpy(output), numpy(outputs)[:, -1], atol=1e-5))
    True

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 3.
    """

    def __init__(self, cell, attention, first_residual_layer=3, output_context=False, **kwargs):
        super().__init__(cell, attention, **kwargs)
        if (
            not isinstance(first_residual_layer, int)
            or isinstance(first_residual_layer, bool)
            or first_residual_layer < 2
        ):
            raise ValueError(
                "`first_residual_layer` must be an int >= 2 (layer 1 reads the "
                f"target inputs). Received: first_residual_layer={first_residual_layer!r}"
            )
        self.first_residual_layer = first_residual_layer
        self.output_context = bool(output_context)
        sizes = [_cell_output_size(c) for c in self.cells]
        for index in range(first_residual_layer - 1, len(sizes)):
            if sizes[index] != sizes[index - 1]:
                raise ValueError(
                    f"Layer {index + 1} is residual (`first_residual_layer`="
                    f"{first_residual_layer}), so its output size must equal its input's, "
                    f"the output of layer {index}. Received: cell output sizes {sizes}"
                )

    @property
    def cells(self):
        """The cells of the stack, bottom first."""
        if isinstance(self.cell, keras.layers.StackedRNNCells):
            return list(self.cell.cells)
        return [self.cell]

    def _is_residual(self, index):
        """Whether the layer at 0-based `index` adds its input to its output."""
        return index + 1 >= self.first_residual_layer

    def _query_index(self):
        # The bottom layer queries: its first state is h^1_{t-1}.
        return 0

    def _query_size(self):
        return _cell_output_size(self.cells[0])

    def _top_size(self):
        return _cell_output_size(self.cells[-1])

    def _cell_input_size(self, inputs_size, memory_size):
        return inputs_size + memory_size

    def _output_size(self, memory_size):
        return self._top_size() + (memory_size if self.output_context else 0)

    def _build_cell(self, inputs_shape, memory_shape):
        # Each cell reads the layer below's output and the context, which a
        # StackedRNNCells' build (the output alone) would not size.
        inputs_size, memory_size = inputs_shape[-1], memory_shape[-1]
        for cell in self.cells:
            if not cell.built:
                cell.build((None, inputs_size + memory_size))
            inputs_size = _cell_output_size(cell)
        self.cell.built = True

    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        query = states[self._query_index()]
        context, attention = self._attend(
            query, memory, projected_memory, memory_mask, step, training
        )
        context = ops.cast(context, inputs.dtype)
        layer_input, new_states, start = inputs, [], 0
        for index, cell in enumerate(self.cells):
            count = _state_count(cell)
            output, cell_states = cell(
                ops.concatenate([layer_input, context], axis=-1),
                list(states[start : start + count]),
                training=training,
            )
            start += count
            new_states.extend(keras.tree.flatten(cell_states))
            layer_input = output + layer_input if self._is_residual(index) else output
        output = layer_input
        if self.output_context:
            output = ops.concatenate([output, context], axis=-1)
        return output, new_states, attention

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "first_residual_layer": self.first_residual_layer,
                "output_context": self.output_context,
            }
        )
        return config
