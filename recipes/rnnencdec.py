"""RNNencdec: the fixed-vector encoder-decoder (Cho et al. 2014; Sutskever et al. 2014)."""

import keras
from keras import ops

from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import reverse_valid_tokens
from zoo.recipes.seq2seq import source_mask

CELL_TYPES = {"gru": keras.layers.GRUCell, "lstm": keras.layers.LSTMCell}


@keras.saving.register_keras_serializable(package="zoo")
class RNNEncDec(Seq2SeqRecipe):
    """The encoder-decoder without attention: the baseline RNNsearch beat.

    The encoder reads the source into one fixed vector c, its last state;
    the decoder starts from `tanh(W c)` and sees c at every step, with the
    previous word (Cho et al. 2014):
    `s_t = RNN([E y_{t-1}; c], s_{t-1})`,
    `p(y_t) = softmax(W_o tanh(W_r [s_t; E y_{t-1}; c]))`.
    With `reverse_source=True` the source words are read in reverse order,
    Sutskever et al.'s trick that shortens the distance from the first source
    words to the first target words.

    It has no attention: the `attention` of `decode_step` is all zeros, so
    that decoding and plots treat every recipe alike.

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        embedding_dim: int, word embedding size.
        hidden_dim: int, RNN size of encoder and decoder.
        cell_type: `"gru"` (Cho) or `"lstm"` (Sutskever).
        reverse_source: bool, read the source backwards.
        readout_dim: int, size of the tanh readout layer.
        dropout: float, dropout on embeddings and readout.
        **kwargs: see `Seq2SeqRecipe`.

    References:
        - [Cho et al., 2014](https://arxiv.org/abs/1406.1078)
        - [Sutskever et al., 2014](https://arxiv.org/abs/1409.3215)
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        cell_type="gru",
        reverse_source=False,
        readout_dim=500,
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        if cell_type not in CELL_TYPES:
            raise ValueError(
                f"`cell_type` must be one of {', '.join(CELL_TYPES)}. "
                f"Received: cell_type={cell_type!r}"
            )
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.cell_type = cell_type
        self.reverse_source = bool(reverse_source)
        self.readout_dim = readout_dim
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
        self.encoder = keras.layers.RNN(
            CELL_TYPES[cell_type](hidden_dim, dtype=policy),
            return_state=True,
            dtype=policy,
            name="encoder",
        )
        self.initial_state_dense = keras.layers.Dense(
            hidden_dim, activation="tanh", dtype=policy, name="initial_state"
        )
        self.decoder_cell = CELL_TYPES[cell_type](hidden_dim, dtype=policy, name="decoder_cell")
        # The same cell, run over a whole target for teacher forcing.
        self.decoder = keras.layers.RNN(
            self.decoder_cell,
            return_sequences=True,
            return_state=True,
            dtype=policy,
            name="decoder",
        )
        self.readout = keras.layers.Dense(
            readout_dim, activation="tanh", dtype=policy, name="readout"
        )
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="output_projection"
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy)

    # The contract's declarations (zoo.recipes.contract).
    constant_state_keys = ("summary", "source_mask")

    @property
    def recurrent_state_keys(self):
        return ("decoder_h", "decoder_c") if self.cell_type == "lstm" else ("decoder_h",)

    def encode(self, source, training=None):
        mask = source_mask(source, self.pad_id)
        tokens = reverse_valid_tokens(source, self.pad_id) if self.reverse_source else source
        embedded = self.embedding_dropout(self.source_embedding(tokens), training=training)
        summary = self.encoder(embedded, mask=mask, training=training)[1]  # last h
        initial = self.initial_state_dense(summary)
        state = {"summary": summary, "source_mask": mask, "decoder_h": initial}
        if self.cell_type == "lstm":
            state["decoder_c"] = ops.zeros_like(initial)
        return state

    def embed_targets(self, tokens, training=None):
        return self.embedding_dropout(self.target_embedding(tokens), training=training)

    def _cell_states(self, state):
        return [state[k] for k in self.recurrent_state_keys]

    def recurrent_step(self, embedded, state, step):
        summary = state["summary"]
        output, new_states = self.decoder_cell(
            ops.concatenate([embedded, summary], axis=-1), self._cell_states(state)
        )
        new_state = dict(state, **dict(zip(self.recurrent_state_keys, new_states)))
        features = ops.concatenate([output, embedded, summary], axis=-1)
        no_attention = ops.zeros(ops.shape(state["source_mask"]), features.dtype)
        return features, new_state, no_attention

    def call(self, inputs, training=None):
        # Without attention the decoder is a plain RNN over the target: no
        # step-by-step loop of our own is needed for teacher forcing.
        state = self.encode(inputs["source"], training=training)
        embedded = self.embed_targets(inputs["target_in"], training=training)
        # [B, T, 1] + [B, 1, H]: the summary at every target step.
        summary = ops.zeros_like(embedded[..., :1]) + ops.expand_dims(state["summary"], 1)
        outputs = self.decoder(
            ops.concatenate([embedded, summary], axis=-1),
            initial_state=self._cell_states(state),
            training=training,
        )[0]
        features = ops.concatenate([outputs, embedded, summary], axis=-1)
        return self.output_logits(features, training=training)

    def attention_weights(self, inputs):
        """All zeros `[B, T, S]`, as the attention of `decode_step`: the
        model has no attention, so no alignment to plot or score."""
        source, target_in = inputs["source"], inputs["target_in"]
        shape = (ops.shape(target_in)[0], ops.shape(target_in)[1], ops.shape(source)[1])
        return ops.zeros(shape, self.compute_dtype)

    def output_logits(self, features, training=None):
        readout = self.output_dropout(self.readout(features), training=training)
        return self.output_projection(readout)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "cell_type": self.cell_type,
                "reverse_source": self.reverse_source,
                "readout_dim": self.readout_dim,
                "dropout": self.dropout,
            }
        )
        return config
