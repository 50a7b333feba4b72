"""The recurrent recipes' shared target side, and the translation recipes' base.

Every recipe is a `zoo.recipes.contract.SequenceGenerator` (the contract:
`call`, `encode`, `decode_step` and the declarations that decoding and export
read). `AttentionDecoderModel` holds the target side, whatever the source;
`Seq2SeqRecipe` adds a token source (translation). The recurrent recipes
run a `zoo.layers` attention decoder: over the whole target for `call`
(`run_recurrence`) and one step for `decode_step` (`recurrent_step`), the
same layer's two ways of running, so the two paths compute the same thing.
"""

import keras
from keras import ops

from zoo.recipes.contract import PAD_ID
from zoo.recipes.contract import SequenceGenerator


# Where a recurrent decoder starts: the encoder's final states (the papers'),
# or zeros (docs/experiments/2026-12-06-luong-attention-sink.md).
INITIAL_STATES = ("encoder", "zeros")


def check_initial_state(initial_state):
    """Raises a one-line ValueError unless `initial_state` is one of `INITIAL_STATES`."""
    if initial_state not in INITIAL_STATES:
        raise ValueError(
            f"`initial_state` must be one of {', '.join(INITIAL_STATES)}. "
            f"Received: initial_state={initial_state!r}"
        )


def source_mask(source, pad_id=PAD_ID):
    """`[B, S]` booleans: True where `source` is a real token."""
    return ops.not_equal(source, pad_id)


def reverse_valid_tokens(tokens, pad_id=PAD_ID):
    """Reverses each row's tokens before its padding: `a b c 0 0 -> c b a 0 0`."""
    mask = ops.not_equal(tokens, pad_id)
    lengths = ops.sum(ops.cast(mask, "int32"), axis=1, keepdims=True)
    positions = ops.expand_dims(ops.arange(ops.shape(tokens)[1], dtype="int32"), 0)
    source_positions = ops.where(positions < lengths, lengths - 1 - positions, positions)
    return ops.take_along_axis(tokens, source_positions, axis=1)


class AttentionDecoderModel(SequenceGenerator):
    """Base class of every recipe that decodes a sequence with attention.

    It holds the target side of the contract, whatever the source is (a
    sentence for translation, an image for captioning): `decode_step`.
    Subclasses implement `encode`, `embed_targets`, `recurrent_step` (one
    step), `run_recurrence` (the whole target) and `output_logits`, list in `recurrent_state_keys` the state entries that
    change from step to step, and declare the others, computed once by
    `encode` and only read, in `constant_state_keys` (see
    `SequenceGenerator`).

    Args:
        **kwargs: see `zoo.recipes.contract.SequenceGenerator`.
    """

    recurrent_state_keys = ()
    # Whether the train step compiles with XLA on TensorFlow by default (see
    # `zoo.training.jit_compile`): not for the recurrent recipes, whose XLA step is
    # slower, or too little faster to repay a compilation per batch shape in
    # the steps their presets train (`zoo bench train`; docs/performance.md).
    xla_on_tensorflow = False

    def decode_step(self, previous_tokens, state, step):
        """One target step: `previous_tokens` `[B]` -> logits `[B, V]`."""
        embedded = self.embed_targets(previous_tokens)
        features, state, attention = self.recurrent_step(embedded, state, step)
        return self.output_logits(features), state, attention

    def embed_targets(self, tokens, training=None):
        raise NotImplementedError

    def recurrent_step(self, embedded, state, step):
        """`embedded` `[B, E]` -> (features `[B, F]`, state, attention `[B, S]`)."""
        raise NotImplementedError

    def output_logits(self, features, training=None):
        raise NotImplementedError

    # The recurrence over a whole target ---------------------------------------

    def run_recurrence(self, embedded, state, training=None):
        """The decoder over a whole target `embedded` `[B, T, E]`, teacher-forced.

        Returns features `[B, T, F]` and attention `[B, T, S]`, the numbers
        `recurrent_step` gives one step at a time. A recipe runs its
        `zoo.layers` decoder here (`BahdanauDecoder`, `LuongDecoder`), which
        holds the loop over the steps.
        """
        raise NotImplementedError

    @property
    def step_loop_compiles_with_xla(self):
        """Whether the train step compiles with XLA on TensorFlow: the
        decoders' `xla` argument (their loop over the steps depends on it)."""
        return keras.backend.backend() == "tensorflow" and self.jit_compile is True


class Seq2SeqRecipe(AttentionDecoderModel):
    """Base class of the translation recipes: a token source.

    Inputs are `{"source": [B, S] ids, "target_in": [B, T] ids}`. See
    `AttentionDecoderModel` for what a subclass implements (or override
    `call` and `decode_step` entirely, as the Transformer does).

    Args:
        source_vocabulary_size: int, size of the source vocabulary.
        target_vocabulary_size: int, size of the target vocabulary.
        **kwargs: see `AttentionDecoderModel`.
    """

    def __init__(self, source_vocabulary_size, target_vocabulary_size, **kwargs):
        super().__init__(target_vocabulary_size, **kwargs)
        self._check_vocabulary_size(
            "source_vocabulary_size", source_vocabulary_size, self.pad_id, self.bos_id, self.eos_id
        )
        self.source_vocabulary_size = source_vocabulary_size

    def build(self, input_shape=None):
        # Every weight's shape follows from the config, so one call on a
        # dummy batch builds them all (a subclassed model has no other way
        # to know its sublayers' input shapes).
        dummy = {
            "source": ops.ones((1, 2), "int32") * self.eos_id,
            "target_in": ops.ones((1, 1), "int32") * self.bos_id,
        }
        self.call(dummy)
        self.built = True

    def call(self, inputs, training=None):
        source, target_in = inputs["source"], inputs["target_in"]
        state = self.encode(source, training=training)
        embedded = self.embed_targets(target_in, training=training)
        features, _ = self.run_recurrence(embedded, state, training=training)
        return self.output_logits(features, training=training)

    def attention_weights(self, inputs):
        """The teacher-forced alignment `[B, T, S]` of a batch (for plots)."""
        state = self.encode(inputs["source"])
        embedded = self.embed_targets(inputs["target_in"])
        return self.run_recurrence(embedded, state)[1]

    # A recipe's `zoo.layers` decoder (`self.decoder`) over the state's
    # `memory`, `projected_keys` and `source_mask`, with its own state in the
    # entries `recurrent_state_keys` names, in that order.

    def decoder_step(self, embedded, state, step):
        """One step of `self.decoder`: `(outputs [B, F], state with the new
        recurrent entries, attention [B, S])`."""
        keys = self.recurrent_state_keys
        outputs, new_states, attention = self.decoder.step(
            embedded,
            [state[key] for key in keys],
            state["memory"],
            projected_memory=state["projected_keys"],
            memory_mask=state["source_mask"],
            step=step,
        )
        return outputs, dict(state, **dict(zip(keys, new_states))), attention

    def decoder_over_target(self, embedded, state, training=None):
        """`self.decoder` over a whole target `[B, T, E]`, teacher-forced:
        `(outputs [B, T, F], attention [B, T, S])`."""
        return self.decoder(
            embedded,
            state["memory"],
            memory_mask=state["source_mask"],
            initial_state=[state[key] for key in self.recurrent_state_keys],
            projected_memory=state["projected_keys"],
            return_attention=True,
            xla=self.step_loop_compiles_with_xla,
            training=training,
        )

    def get_config(self):
        return {"source_vocabulary_size": self.source_vocabulary_size, **super().get_config()}
