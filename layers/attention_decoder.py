"""What the attention decoders share: a Keras recurrent cell, an attention
layer over a memory, and two ways to run them (a whole target at once, or one
step at a time)."""

import copy

import keras
from keras import ops

from zoo.layers._monotonic import MonotonicAttentionMixin
from zoo.layers.base_attention import BaseAttention
from zoo.layers.local_attention import LocalAttention
from zoo.layers.recurrence import run_over_steps
from zoo.layers.spatial_soft_attention import SpatialSoftAttention
from zoo.layers.spatial_soft_attention import flatten_grid

ATTENTION_TYPES = (BaseAttention, SpatialSoftAttention)


def _state_count(cell):
    size = cell.state_size
    return len(size) if isinstance(size, (list, tuple)) else 1


def _cell_output_size(cell):
    size = cell.output_size
    return int(size[-1] if isinstance(size, (list, tuple)) else size)


class AttentionDecoder(keras.layers.Layer):
    """Base class of the attention decoders: a recurrent cell that attends
    over a memory at every step.

    Subclasses implement `_step` (one step of the formula), `_cell_input_size`
    and `_output_size`; this class validates, builds, runs the steps over a
    whole target (`call`) and exposes the same step for search
    (`project_memory`, `get_initial_state`, `step`). The state of a decoder
    is a flat list of `[batch, size]` tensors, `state_size` long: the cell's
    states, in the order of `keras.tree.flatten(cell.state_size)`, then any
    of the decoder's own; with a monotonic attention it ends with one more,
    the previous step's alignment `[batch, S]` (`carries_alignment`).

    Args:
        cell: a Keras recurrent cell (`keras.layers.GRUCell`, `LSTMCell`, any
            cell whose first state is its output), a
            `keras.layers.StackedRNNCells`, or a list of cells (stacked).
        attention: a `zoo.layers` attention layer: `AdditiveAttention`,
            `LuongAttention`, `LocalAttention` (the step index is passed on),
            `BahdanauMonotonicAttention` or `LuongMonotonicAttention` (the
            previous alignment is carried in the state) or
            `SpatialSoftAttention` (a memory of image features).
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.
    """

    def __init__(self, cell, attention, **kwargs):
        super().__init__(**kwargs)
        if isinstance(cell, (list, tuple)) and len(cell) == 1:
            # keras' StackedRNNCells returns a lone cell's states unnested,
            # a carry structure JAX's scan refuses; one cell needs no stack.
            cell = cell[0]
        elif isinstance(cell, (list, tuple)):
            cell = keras.layers.StackedRNNCells(list(cell), dtype=self.dtype_policy)
        if not (isinstance(cell, keras.layers.Layer) and hasattr(cell, "state_size")):
            raise ValueError(
                "`cell` must be a Keras recurrent cell (with `state_size`), "
                f"such as keras.layers.GRUCell, or a list of cells. Received: cell={cell!r}"
            )
        if not isinstance(attention, ATTENTION_TYPES):
            raise ValueError(
                "`attention` must be a zoo.layers AdditiveAttention, "
                "LuongAttention, LocalAttention or SpatialSoftAttention. "
                f"Received: attention={attention!r}"
            )
        self.cell = cell
        self.attention = attention
        self.supports_masking = True
        # A monotonic attention's inputs of one step, set around the step
        # (see `_step_carrying_alignment` and `_run_sequence`).
        self._previous_alignment = None
        self._energy_noise = None

    # Sizes ---------------------------------------------------------------------

    @property
    def cell_state_count(self):
        """How many of the state's tensors are the cell's."""
        if isinstance(self.cell, keras.layers.StackedRNNCells):
            return sum(_state_count(cell) for cell in self.cell.cells)
        return _state_count(self.cell)

    @property
    def state_size(self):
        """The size of each tensor of the decoder's state."""
        return [int(size) for size in keras.tree.flatten(self.cell.state_size)]

    def _cell_input_size(self, inputs_size, memory_size):
        raise NotImplementedError

    def _output_size(self, memory_size):
        raise NotImplementedError

    def _query_index(self):
        """Index in the flat state of the cell's output: the top cell's first
        state."""
        if isinstance(self.cell, keras.layers.StackedRNNCells):
            return sum(_state_count(cell) for cell in self.cell.cells[:-1])
        return 0

    # Build ---------------------------------------------------------------------

    def _query_size(self):
        """The depth of the query: the size of the state `_query_index` names."""
        return _cell_output_size(self.cell)

    def build(self, inputs_shape, memory_shape):
        if not self.attention.built:
            self.attention.build((None, self._query_size()), tuple(memory_shape))
        if not self.cell.built:
            self._build_cell(inputs_shape, memory_shape)
        self._build_own(inputs_shape, memory_shape)
        self.built = True

    def _build_cell(self, inputs_shape, memory_shape):
        """Builds the cell (a stack: each cell on the one below's output)."""
        self.cell.build((None, self._cell_input_size(inputs_shape[-1], memory_shape[-1])))

    def _build_own(self, inputs_shape, memory_shape):
        """Builds the decoder's own weights, if any."""

    def _check_built(self, what):
        if not self.built:
            raise ValueError(
                f"Layer '{self.name}' is not built, so {what} has no weights "
                "yet. Call the layer once on a target and a memory, or call "
                "`layer.build(inputs_shape, memory_shape)`, first."
            )

    # The attention over the memory ---------------------------------------------

    def project_memory(self, memory):
        """The step-invariant part of the attention score (the projected keys),
        once per source; pass it as `projected_memory` on every step."""
        self._check_built("project_memory")
        if isinstance(self.attention, SpatialSoftAttention):
            return self.attention.project_features(memory)
        return self.attention.project_keys(memory)

    def _attend(self, query, memory, projected_memory, memory_mask, step, training):
        """(context, weights) of a query `[B, d]` (one step) or `[B, T, d]`."""
        if isinstance(self.attention, SpatialSoftAttention):
            return self.attention(
                query,
                memory,
                projected_features=projected_memory,
                return_attention_scores=True,
                training=training,
            )
        extra = {"step": step} if isinstance(self.attention, LocalAttention) else {}
        if self.carries_alignment:
            extra = {
                "previous_alignment": self._previous_alignment,
                "energy_noise": self._energy_noise,
            }
        return self.attention(
            query,
            memory,
            value_mask=memory_mask,
            projected_key=projected_memory,
            return_attention_scores=True,
            training=training,
            **extra,
        )

    def _nest_cell_states(self, flat):
        """The flat cell states in the structure the cell's `call` takes."""
        if not isinstance(self.cell, keras.layers.StackedRNNCells):
            return list(flat)
        nested, start = [], 0
        for cell in self.cell.cells:
            count = _state_count(cell)
            nested.append(list(flat[start : start + count]))
            start += count
        return nested

    def _run_cell(self, inputs, cell_states, training):
        output, new_states = self.cell(
            inputs, self._nest_cell_states(cell_states), training=training
        )
        return output, list(keras.tree.flatten(new_states))

    # One step ------------------------------------------------------------------

    @property
    def carries_alignment(self):
        """Whether the state ends with the previous step's alignment
        `[batch, S]`, which monotonic attention starts each step from."""
        return isinstance(self.attention, MonotonicAttentionMixin)

    def get_initial_state(self, batch_size, memory_length=None):
        """The zero state `[batch_size, size]` of every `state_size` entry;
        with a monotonic attention, then the initial alignment (one-hot at
        memory position 0) `[batch_size, memory_length]`."""
        state = [ops.zeros((batch_size, size), self.compute_dtype) for size in self.state_size]
        if self.carries_alignment:
            if memory_length is None:
                raise ValueError(
                    "A decoder with monotonic attention carries the previous "
                    "alignment in its state, so `get_initial_state` needs "
                    "`memory_length=` (the memory's S). Received: memory_length=None"
                )
            state.append(self.attention.initial_alignment(batch_size, memory_length))
        return state

    def _full_state(self, initial_state, batch_size, memory_length):
        """`initial_state` cast to the compute dtype; zeros when None, and
        zeros for the decoder's own entries when only the cell's are given
        (the initial alignment for a monotonic attention's)."""
        zeros = self.get_initial_state(batch_size, memory_length)
        if initial_state is None:
            return zeros
        initial_state = list(keras.tree.flatten(initial_state))
        if len(initial_state) not in (self.cell_state_count, len(self.state_size), len(zeros)):
            raise ValueError(
                f"`initial_state` must hold {self.cell_state_count} tensors "
                f"(the cell's states) or {len(zeros)} (the decoder's state, "
                f"`state_size`={self.state_size}"
                + (", then the alignment" if self.carries_alignment else "")
                + "). Received: "
                f"{len(initial_state)} tensors"
            )
        state = [ops.cast(s, self.compute_dtype) for s in initial_state]
        return state + zeros[len(state) :]

    def step(
        self,
        inputs,
        states,
        memory,
        projected_memory=None,
        memory_mask=None,
        step=0,
        training=None,
    ):
        """One decoding step, for greedy and beam search.

        Args:
            inputs: `[batch, E]`, e.g. the embedding of the previous token.
            states: the decoder's state (`get_initial_state`, or the state
                this method returned at the previous step).
            memory: `[batch, S, D]` (or `[batch, H, W, D]` for a spatial
                attention).
            projected_memory: optional output of `project_memory(memory)`,
                computed once per source.
            memory_mask: optional boolean `[batch, S]`.
            step: int or int scalar tensor, the target position (local
                attention reads it).
            training: whether dropout is active.

        Returns:
            `(outputs [batch, output_size], new_states, attention [batch, S])`.
        """
        self._check_built("step")
        memory = self._flat_memory(memory)
        if projected_memory is None:
            projected_memory = self.project_memory(memory)
        if self.carries_alignment and len(states) != len(self.state_size) + 1:
            raise ValueError(
                "The state of a decoder with monotonic attention ends with the "
                f"previous alignment: {len(self.state_size) + 1} tensors, from "
                "`get_initial_state(batch_size, memory_length)` or the last "
                f"step. Received: {len(states)} tensors"
            )
        return self._step_carrying_alignment(
            ops.cast(inputs, self.compute_dtype),
            list(states),
            memory,
            projected_memory,
            memory_mask,
            step,
            training,
        )

    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        """`(outputs, new_states, attention)` of one step (see `step`)."""
        raise NotImplementedError

    def _step_carrying_alignment(
        self, inputs, states, memory, projected_memory, memory_mask, step, training
    ):
        """`_step`, with a monotonic attention's alignment carried as the
        state's last entry: the new alignment is the step's attention."""
        if not self.carries_alignment:
            return self._step(inputs, states, memory, projected_memory, memory_mask, step, training)
        # A subclass's `_step` takes no attention state, so the previous
        # alignment reaches `_attend` through this attribute, set and
        # cleared around the one step (and trace) that reads it.
        self._previous_alignment = states[-1]
        try:
            outputs, new_states, attention = self._step(
                inputs, states[:-1], memory, projected_memory, memory_mask, step, training
            )
        finally:
            self._previous_alignment = None
        return outputs, list(new_states) + [ops.cast(attention, self.compute_dtype)], attention

    def _flat_memory(self, memory):
        if isinstance(self.attention, SpatialSoftAttention):
            return flatten_grid(memory)
        return memory

    # The whole target ----------------------------------------------------------

    def call(
        self,
        inputs,
        memory,
        inputs_mask=None,
        memory_mask=None,
        initial_state=None,
        projected_memory=None,
        return_attention=False,
        return_state=False,
        xla=None,
        training=None,
    ):
        self._validate(inputs, memory, memory_mask)
        inputs = ops.cast(inputs, self.compute_dtype)
        memory = self._flat_memory(memory)
        if projected_memory is None:
            projected_memory = self.project_memory(memory)
        if memory_mask is not None:
            memory_mask = ops.cast(memory_mask, "bool")
        states = self._full_state(initial_state, ops.shape(inputs)[0], ops.shape(memory)[1])
        outputs, attention, states = self._run_sequence(
            inputs,
            states,
            memory,
            projected_memory,
            memory_mask,
            inputs_mask,
            True if xla is None else bool(xla),
            training,
        )
        result = (outputs,)
        if return_attention:
            result += (attention,)
        if return_state:
            result += (states,)
        return result[0] if len(result) == 1 else result

    def _run_sequence(
        self, inputs, states, memory, projected_memory, memory_mask, inputs_mask, xla, training
    ):
        """`(outputs [B, T, F], attention [B, T, S], final state)`: the steps
        of `_step` one after the other. A masked target step keeps the state
        and gives zero outputs and attention."""
        steps = ops.swapaxes(inputs, 0, 1)
        depth = inputs.shape[-1]
        # One scanned sequence, not several (see `recurrence._scan_over_steps`):
        # the mask and a monotonic attention's noise travel as extra columns.
        if inputs_mask is not None:
            mask = ops.cast(ops.swapaxes(inputs_mask, 0, 1), steps.dtype)
            steps = ops.concatenate([steps, ops.expand_dims(mask, -1)], axis=-1)
        noisy = bool(training) and self.carries_alignment and self.attention.adds_noise_in_training
        if noisy:
            # Drawn here for every step: a draw inside the loop changes the
            # seed's state there, which JAX's compiled train step refuses.
            shape = (ops.shape(steps)[0], ops.shape(steps)[1], ops.shape(memory)[1])
            noise = ops.cast(self.attention.draw_energy_noise(shape), steps.dtype)
            steps = ops.concatenate([steps, noise], axis=-1)
        mask_columns = 0 if inputs_mask is None else 1

        def one_step(states, step_input, t):
            columns = step_input
            step_input = columns[..., :depth]
            keep = columns[..., depth : depth + mask_columns]
            self._energy_noise = columns[..., depth + mask_columns :] if noisy else None
            try:
                outputs, new_states, attention = self._step_carrying_alignment(
                    step_input, states, memory, projected_memory, memory_mask, t, training
                )
            finally:
                self._energy_noise = None
            if inputs_mask is not None:
                new_states = [
                    ops.where(ops.cast(keep, "bool"), new, old)
                    for new, old in zip(new_states, states)
                ]
                outputs = outputs * ops.cast(keep, outputs.dtype)
                attention = attention * ops.cast(keep, attention.dtype)
            return new_states, (outputs, attention)

        widths = (self._output_size(memory.shape[-1]), ops.shape(memory)[1])
        states, (outputs, attention) = run_over_steps(
            one_step, states, steps, widths, self.compute_dtype, xla
        )
        return ops.swapaxes(outputs, 0, 1), ops.swapaxes(attention, 0, 1), states

    def _validate(self, inputs, memory, memory_mask):
        if len(inputs.shape) != 3:
            raise ValueError(
                "`inputs` must have shape [batch, T, depth], a whole target. "
                "Use `step()` for one step. Received: "
                f"inputs.shape={tuple(inputs.shape)}"
            )
        spatial = isinstance(self.attention, SpatialSoftAttention)
        if len(memory.shape) not in ((3, 4) if spatial else (3,)):
            raise ValueError(
                "`memory` must have shape [batch, S, depth]"
                + (" or [batch, H, W, depth]" if spatial else "")
                + f". Received: memory.shape={tuple(memory.shape)}"
            )
        if spatial and memory_mask is not None:
            raise ValueError(
                "SpatialSoftAttention attends over every location of a grid, "
                "so it takes no `memory_mask`. Received a memory_mask of shape "
                f"{tuple(memory_mask.shape)}"
            )

    def compute_mask(self, inputs, previous_mask=None):
        # The outputs have the target's positions, so they carry its mask.
        return previous_mask

    def _memory_length(self, memory_shape):
        if len(memory_shape) == 4:
            return None if None in memory_shape[1:3] else memory_shape[1] * memory_shape[2]
        return memory_shape[1]

    def compute_output_shape(self, inputs_shape, memory_shape):
        """The outputs' shape (without the attention or the state)."""
        return (inputs_shape[0], inputs_shape[1], self._output_size(memory_shape[-1]))

    def compute_output_spec(
        self, inputs, memory, memory_mask=None, return_attention=False, return_state=False, **kwargs
    ):
        self._validate(inputs, memory, memory_mask)
        batch, length = inputs.shape[0], inputs.shape[1]
        dtype = self.compute_dtype
        outputs_shape = self.compute_output_shape(inputs.shape, memory.shape)
        result = (keras.KerasTensor(outputs_shape, dtype=dtype),)
        if return_attention:
            width = self._memory_length(memory.shape)
            result += (keras.KerasTensor((batch, length, width), dtype=dtype),)
        if return_state:
            sizes = list(self.state_size)
            if self.carries_alignment:
                sizes.append(self._memory_length(memory.shape))
            result += ([keras.KerasTensor((batch, size), dtype=dtype) for size in sizes],)
        return result[0] if len(result) == 1 else result

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.layers.serialize(self.cell),
                "attention": keras.layers.serialize(self.attention),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # A deep copy: StackedRNNCells.from_config pops from the dict it gets.
        config = copy.deepcopy(config)
        config["cell"] = keras.layers.deserialize(config["cell"])
        config["attention"] = keras.layers.deserialize(config["attention"])
        return cls(**config)
