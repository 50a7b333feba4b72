"""RNNsearch: Bahdanau, Cho and Bengio (2014), attention-based translation."""

import keras
from keras import ops

from zoo.layers import AdditiveAttention
from zoo.layers import BahdanauDecoder
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import source_mask


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

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        embedding_dim: int, word embedding size (m in the paper, 620).
        hidden_dim: int, GRU size of encoder and decoder (n, 1000).
        attention_units: int, size of the alignment model (n', 1000).
        maxout_units: int, size of the maxout layer (l, 500).
        dropout: float, dropout on embeddings and on the deep output.
        **kwargs: see `Seq2SeqRecipe`.

    References:
        - [Bahdanau et al., 2014](https://arxiv.org/abs/1409.0473)
    """

    recurrent_state_keys = ("decoder_state",)
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
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
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
        self.decoder = BahdanauDecoder(
            keras.layers.GRUCell(hidden_dim, dtype=policy, name="decoder_cell"),
            AdditiveAttention(attention_units, dtype=policy, name="attention"),
            dtype=policy,
            name="decoder",
        )
        self.readout = keras.layers.Dense(2 * maxout_units, dtype=policy, name="readout")
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="output_projection"
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy)

    def encode(self, source, training=None):
        mask = source_mask(source, self.pad_id)
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        annotations, _, backward_first = self.encoder(embedded, mask=mask, training=training)
        if not self.decoder.built:
            self.decoder.build((None, None, self.embedding_dim), tuple(annotations.shape))
        return {
            "memory": annotations,
            "projected_keys": self.decoder.project_memory(annotations),
            "source_mask": mask,
            "decoder_state": self.initial_state_dense(backward_first),
        }

    def embed_targets(self, tokens, training=None):
        return self.embedding_dropout(self.target_embedding(tokens), training=training)

    def recurrent_step(self, embedded, state, step):
        previous = state["decoder_state"]
        outputs, new_states, attention = self.decoder.step(
            embedded,
            [previous],
            state["memory"],
            projected_memory=state["projected_keys"],
            memory_mask=state["source_mask"],
            step=step,
        )
        context = outputs[..., self.hidden_dim :]
        # The readout uses s_{i-1}, as in the paper's appendix A.2.2.
        features = ops.concatenate([previous, embedded, context], axis=-1)
        return features, dict(state, decoder_state=new_states[0]), attention

    def run_recurrence(self, embedded, state, training=None):
        outputs, attention = self.decoder(
            embedded,
            state["memory"],
            memory_mask=state["source_mask"],
            initial_state=[state["decoder_state"]],
            projected_memory=state["projected_keys"],
            return_attention=True,
            xla=self.step_loop_compiles_with_xla,
            training=training,
        )
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
            }
        )
        return config
