"""RNNsearch: Bahdanau, Cho and Bengio (2014), attention-based translation."""

import contextlib

import keras
from keras import ops

from zoo.layers import AdditiveAttention
from zoo.layers import BahdanauDecoder
from zoo.layers import BahdanauMonotonicAttention
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import source_mask

ATTENTION_TYPES = ("additive", "monotonic")
# Raffel et al.'s weight-normalised energy and pre-sigmoid noise of unit
# variance: without the noise the expected alignment trained in `fit` stays
# soft, and the hard one decoding reads then stops in the wrong places
# (docs/performance.md, monotonic attention). The bias r starts at 0, not the
# paper's suggested -4: on sentences of the synthetic corpus's lengths, -4
# trained energies that stay negative, and the hard alignment stopped nowhere
# (docs/experiments/2026-12-07-monotonic-attention.md).
MONOTONIC_SETTINGS = {"normalize": True, "sigmoid_noise": 1.0, "score_bias_init": 0.0}


@keras.saving.register_keras_serializable(package="zoo")
class RNNSearch(Seq2SeqRecipe):
    """The RNNsearch translator of Bahdanau et al. (2014).

    - Encoder: a bidirectional GRU; the annotation h_j is the concatenation
      of its forward and backward states.
    - Decoder: at step i it attends from its previous state s_{i-1}
      (`AdditiveAttention`, the keys `U_a h_j` projected once per sentence),
      then updates `s_i = GRU([E y_{i-1}; c_i], s_{i-1})` (a
      `BahdanauDecoder`); the first state is `s_0 = tanh(W_s h_1_backward)`.
    - Deep output with maxout (appendix A.2.2):
      `t_i = max-pool_2(U_o s_{i-1} + V_o E y_{i-1} + C_o c_i)`,
      `p(y_i) = softmax(W_o t_i)`.

    With `attention="monotonic"` the decoder attends with
    `BahdanauMonotonicAttention` (Raffel et al., 2017) instead: each step
    scans the source from where the previous step stopped and never moves
    back. `call(..., training=True)` (what `fit` trains) uses the expected
    alignment (`mode="parallel"`); otherwise, as in `decode_step`, greedy
    and beam search, `attention_weights` and the exported models, the hard
    alignment (`mode="hard"`), so that teacher forcing and decoding compute
    the same thing. The alignment is carried in the state (`"alignment"`).

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        embedding_dim: int, word embedding size (m in the paper, 620).
        hidden_dim: int, GRU size of encoder and decoder (n, 1000).
        attention_units: int, size of the alignment model (n', 1000).
        maxout_units: int, size of the maxout layer (l, 500).
        attention: `"additive"` (the paper's) or `"monotonic"`.
        dropout: float, dropout on embeddings and on the deep output.
        **kwargs: see `Seq2SeqRecipe`.

    References:
        - [Bahdanau et al., 2014](https://arxiv.org/abs/1409.0473)
        - [Raffel et al., 2017](https://arxiv.org/abs/1704.00784), for
          `attention="monotonic"`.
    """

    # The contract's declarations (zoo.recipes.contract).
    constant_state_keys = ("memory", "projected_keys", "source_mask")

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        attention_units=1000,
        maxout_units=500,
        dropout=0.0,
        attention="additive",
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        if attention not in ATTENTION_TYPES:
            raise ValueError(
                f"`attention` must be one of {', '.join(repr(a) for a in ATTENTION_TYPES)}. "
                f"Received: attention={attention!r}"
            )
        self.attention_type = attention
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.attention_units = attention_units
        self.maxout_units = maxout_units
        self.dropout = dropout
        policy = self.dtype_policy
        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=policy,
            name="source_embedding",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size, embedding_dim, dtype=policy, name="target_embedding"
        )
        self.encoder = keras.layers.Bidirectional(
            keras.layers.GRU(
                hidden_dim, return_sequences=True, return_state=True, dtype=policy
            ),
            dtype=policy,
            name="encoder",
        )
        self.initial_state_dense = keras.layers.Dense(
            hidden_dim, activation="tanh", dtype=policy, name="initial_state"
        )
        if attention == "monotonic":
            attention_layer = BahdanauMonotonicAttention(
                attention_units, **MONOTONIC_SETTINGS, dtype=policy, name="attention"
            )
        else:
            attention_layer = AdditiveAttention(attention_units, dtype=policy, name="attention")
        self.decoder = BahdanauDecoder(
            keras.layers.GRUCell(hidden_dim, dtype=policy, name="decoder_cell"),
            attention_layer,
            dtype=policy,
            name="decoder",
        )
        self.readout = keras.layers.Dense(2 * maxout_units, dtype=policy, name="readout")
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="output_projection"
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy)

    @property
    def recurrent_state_keys(self):
        # The monotonic alignment changes every step, so beam search reorders it.
        return ("decoder_state",) + (("alignment",) if self.decoder.carries_alignment else ())

    @contextlib.contextmanager
    def _attention_mode(self, training):
        """Runs a monotonic attention in its training mode (`"parallel"`)
        when `training`, in its decoding mode (`"hard"`) otherwise.

        The decoder passes no mode to its attention, which reads its `mode`
        attribute when called, so the attribute is set around the one call
        (and trace) that reads it.
        """
        attention = self.decoder.attention
        if not self.decoder.carries_alignment:
            yield
            return
        saved, attention.mode = attention.mode, "parallel" if training else "hard"
        try:
            yield
        finally:
            attention.mode = saved

    def encode(self, source, training=None):
        mask = source_mask(source, self.pad_id)
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        annotations, _, backward_first = self.encoder(embedded, mask=mask, training=training)
        if not self.decoder.built:
            self.decoder.build((None, None, self.embedding_dim), tuple(annotations.shape))
        state = {
            "memory": annotations,
            "projected_keys": self.decoder.project_memory(annotations),
            "source_mask": mask,
            "decoder_state": self.initial_state_dense(backward_first),
        }
        if self.decoder.carries_alignment:
            state["alignment"] = self.decoder.attention.initial_alignment(
                ops.shape(source)[0], ops.shape(source)[1]
            )
        return state

    def embed_targets(self, tokens, training=None):
        return self.embedding_dropout(self.target_embedding(tokens), training=training)

    def recurrent_step(self, embedded, state, step):
        previous = state["decoder_state"]
        with self._attention_mode(training=False):
            outputs, state, attention = self.decoder_step(embedded, state, step)
        context = outputs[..., self.hidden_dim :]
        # The readout uses s_{i-1}, as in the paper's appendix A.2.2.
        features = ops.concatenate([previous, embedded, context], axis=-1)
        return features, state, attention

    def run_recurrence(self, embedded, state, training=None):
        with self._attention_mode(training):
            outputs, attention = self.decoder_over_target(embedded, state, training=training)
        states, contexts = outputs[..., : self.hidden_dim], outputs[..., self.hidden_dim :]
        # s_{i-1} at every step i: s_0, then the states of the steps before.
        first = ops.expand_dims(ops.cast(state["decoder_state"], states.dtype), 1)
        previous = ops.concatenate([first, states[:, :-1]], axis=1)
        features = ops.concatenate(
            [previous, ops.cast(embedded, states.dtype), contexts], axis=-1
        )
        return features, attention

    def output_logits(self, features, training=None):
        pre_maxout = self.readout(features)
        # Maxout over pairs of units; which units are paired does not matter
        # since the readout is learned, so pair unit k with unit k + l.
        maxout = ops.maximum(
            pre_maxout[..., : self.maxout_units], pre_maxout[..., self.maxout_units :]
        )
        return self.output_projection(self.output_dropout(maxout, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "attention_units": self.attention_units,
                "maxout_units": self.maxout_units,
                "dropout": self.dropout,
                "attention": self.attention_type,
            }
        )
        return config
