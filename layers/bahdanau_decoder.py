"""The Bahdanau-style attention decoder: attend from s_{t-1}, feed the context in."""

import keras
from keras import ops

from zoo.layers.attention_decoder import AttentionDecoder
from zoo.layers.attention_decoder import _cell_output_size


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauDecoder(AttentionDecoder):
    """A recurrent decoder that attends before each step (Bahdanau et al.).

    At step t the previous output `s_{t-1}` (the cell's first state; the top
    cell's for a stack) queries the memory, and the context enters the cell
    with the step's input:

        c_t, alpha_t = attention(s_{t-1}, memory)
        s_t = cell([x_t; c_t], s_{t-1})

    The output of step t is `[s_t; c_t]`, or `s_t` alone with
    `output_context=False`. With `AdditiveAttention` this is the decoder of
    RNNsearch; with `SpatialSoftAttention` over an image's feature grid (the
    gate `beta_t` included) it is the decoder of Show, Attend and Tell.

    The layer runs two ways with the same weights and the same numbers:
    called on a whole target (teacher forcing, inside any Keras model), or
    one step at a time with `step`, the keys projected once per source with
    `project_memory` (greedy and beam search).

    Args:
        cell: a Keras recurrent cell (`keras.layers.GRUCell`, `LSTMCell`, ...),
            a `keras.layers.StackedRNNCells`, or a list of cells.
        attention: `AdditiveAttention`, `LuongAttention`, `LocalAttention` or
            `SpatialSoftAttention`.
        output_context: bool, append the context `c_t` to each output.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: `[batch, T, E]`, the target inputs (e.g. the embeddings of
            the previous tokens, teacher-forced).
        memory: `[batch, S, D]`, e.g. the encoder's annotations, or
            `[batch, H, W, D]` for `SpatialSoftAttention`.
        inputs_mask: optional boolean `[batch, T]`; a masked step keeps the
            state and gives zero outputs and attention. Taken from the
            inputs' Keras mask when not given, and passed on to the outputs.
        memory_mask: optional boolean `[batch, S]`, False on padding. Taken
            from the memory's Keras mask when not given.
        initial_state: optional list of `[batch, size]` tensors, the cell's
            initial states (`state_size`); zeros when not given.
        projected_memory: optional output of `project_memory(memory)`.
        return_attention: also return the alignment history `[batch, T, S]`.
        return_state: also return the final state, a list.
        xla: whether the call may be compiled with XLA (TensorFlow's
            `jit_compile=True`, `fit`'s default on a GPU): the steps then run
            in a while loop XLA can compile, else in a scan, which is faster
            without XLA. None: True. Other backends always scan.
        training: whether dropout is active.

    Returns:
        The outputs `[batch, T, output_size]`; then the attention when
        `return_attention`, then the state when `return_state`.

    Example:

    A translator from these layers, trained with `fit`:

    >>> vocabulary, length = 20, 6
    >>> source = keras.Input((None,), dtype="int32")
    >>> target_in = keras.Input((None,), dtype="int32")
    >>> memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(
    ...     keras.layers.Embedding(vocabulary, 8, mask_zero=True)(source))
    >>> decoder = BahdanauDecoder(
    ...     keras.layers.GRUCell(16), AdditiveAttention(units=8))
    >>> outputs, alignment = decoder(
    ...     keras.layers.Embedding(vocabulary, 8)(target_in), memory,
    ...     return_attention=True)
    >>> logits = keras.layers.Dense(vocabulary)(outputs)
    >>> model = keras.Model([source, target_in], logits)
    >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> x = np.random.default_rng(0).integers(4, vocabulary, (32, length))
    >>> history = model.fit([x, x], x, epochs=1, verbose=0)
    >>> tuple(alignment.shape)
    (None, None, None)

    One step at a time, as a search runs it:

    >>> encoder_states = np.random.rand(2, 5, 16).astype("float32")
    >>> decoder = BahdanauDecoder(keras.layers.GRUCell(8), AdditiveAttention(units=4))
    >>> decoder.build((None, None, 3), encoder_states.shape)
    >>> keys = decoder.project_memory(encoder_states)  # once per source
    >>> state = decoder.get_initial_state(2)
    >>> for t in range(3):
    ...     y_t = np.ones((2, 3), "float32")  # a real decoder embeds its last token
    ...     output, state, alpha = decoder.step(
    ...         y_t, state, encoder_states, projected_memory=keys, step=t)
    >>> tuple(output.shape), tuple(alpha.shape)
    ((2, 24), (2, 5))

    References:
        - [Bahdanau et al., 2014](https://arxiv.org/abs/1409.0473)
        - [Xu et al., 2015](https://arxiv.org/abs/1502.03044)
    """

    def __init__(self, cell, attention, output_context=True, **kwargs):
        super().__init__(cell, attention, **kwargs)
        self.output_context = bool(output_context)

    def _cell_input_size(self, inputs_size, memory_size):
        return inputs_size + memory_size

    def _output_size(self, memory_size):
        cell_size = _cell_output_size(self.cell)
        return cell_size + memory_size if self.output_context else cell_size

    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        query = states[self._query_index()]
        context, attention = self._attend(
            query, memory, projected_memory, memory_mask, step, training
        )
        output, new_states = self._run_cell(
            ops.concatenate([inputs, ops.cast(context, inputs.dtype)], axis=-1),
            states,
            training,
        )
        if self.output_context:
            output = ops.concatenate([output, ops.cast(context, output.dtype)], axis=-1)
        return output, new_states, attention

    def get_config(self):
        config = super().get_config()
        config["output_context"] = self.output_context
        return config
