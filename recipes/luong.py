"""Luong, Pham and Manning (2015): global and local attention, input feeding."""

import keras
from keras import ops

from zoo.layers import LocalAttention
from zoo.layers import LuongAttention
from zoo.layers import LuongDecoder
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import check_initial_state
from zoo.recipes.seq2seq import source_mask

ATTENTION_TYPES = ("global", "local-m", "local-p")


@keras.saving.register_keras_serializable(package="zoo")
class Luong(Seq2SeqRecipe):
    """The attentional translator of Luong et al. (2015).

    Stacked LSTMs encode the source and decode the target. Attention comes
    after the decoder's step: the top state h_t attends over the encoder's
    top states (global attention with the dot, general or concat score, or
    local-m / local-p attention over a window of `2 * window + 1`), and the
    attentional state `h~_t = tanh(W_c [c_t; h_t])` gives
    `p(y_t) = softmax(W_s h~_t)`. With input feeding, `h~_{t-1}` is fed to
    the first LSTM layer beside the previous word, so the model knows its
    past alignments; without it the decoder is a plain stacked LSTM and the
    whole target is attended at once. The decoder is a `LuongDecoder`.

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        embedding_dim: int, word embedding size.
        hidden_dim: int, LSTM size (1000 in the paper).
        num_layers: int, LSTM layers in encoder and decoder (4).
        attention: `"global"`, `"local-m"` or `"local-p"`.
        score: `"dot"`, `"general"` or `"concat"`.
        window: int, D of local attention (10).
        input_feeding: bool.
        probability_fn: `"softmax"` or `"sparsemax"`, the attention's
            distribution over the source positions.
        dropout: float, dropout between layers and before the softmax (0.2).
        bidirectional_encoder: bool, each encoder layer reads the source both
            ways, `hidden_dim / 2` units a direction, concatenated (OpenNMT's
            `brnn`); the paper's encoder is unidirectional.
        initial_state: `"encoder"` (the paper: each decoder layer starts from
            its encoder layer's final state) or `"zeros"`.
        attentional_activation: `"tanh"` (the paper) or `"maxout"`; see
            `zoo.layers.LuongDecoder`.
        **kwargs: see `Seq2SeqRecipe`.

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=1000,
        hidden_dim=1000,
        num_layers=4,
        attention="global",
        score="general",
        window=10,
        input_feeding=True,
        dropout=0.0,
        probability_fn="softmax",
        bidirectional_encoder=False,
        initial_state="encoder",
        attentional_activation="tanh",
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        if attention not in ATTENTION_TYPES:
            raise ValueError(
                f"`attention` must be one of {', '.join(ATTENTION_TYPES)}. "
                f"Received: attention={attention!r}"
            )
        check_initial_state(initial_state)
        if bidirectional_encoder and hidden_dim % 2:
            raise ValueError(
                "A bidirectional encoder gives each direction half of `hidden_dim`, "
                f"so it must be even. Received: hidden_dim={hidden_dim}"
            )
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.attention_type = attention
        self.score = score
        self.window = window
        self.input_feeding = bool(input_feeding)
        self.dropout = dropout
        self.probability_fn = probability_fn
        self.bidirectional_encoder = bool(bidirectional_encoder)
        self.initial_state = initial_state
        self.attentional_activation = attentional_activation
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
        self.encoder_layers = [self._encoder_layer(i) for i in range(num_layers)]
        if attention == "global":
            attention_layer = LuongAttention(
                score=score, probability_fn=probability_fn, dtype=policy, name="attention"
            )
        else:
            attention_layer = LocalAttention(
                mode=attention,
                window=window,
                score=score,
                probability_fn=probability_fn,
                dtype=policy,
                name="attention",
            )
        self.decoder = LuongDecoder(
            [
                keras.layers.LSTMCell(hidden_dim, dtype=policy, name=f"decoder_cell_{i}")
                for i in range(num_layers)
            ],
            attention_layer,
            input_feeding=input_feeding,
            attentional_activation=attentional_activation,
            dtype=policy,
            name="decoder",
        )
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="output_projection"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)

    def _encoder_layer(self, index):
        if not self.bidirectional_encoder:
            return keras.layers.LSTM(
                self.hidden_dim,
                return_sequences=True,
                return_state=True,
                dtype=self.dtype_policy,
                name=f"encoder_{index}",
            )
        return keras.layers.Bidirectional(
            keras.layers.LSTM(
                self.hidden_dim // 2,
                return_sequences=True,
                return_state=True,
                dtype=self.dtype_policy,
            ),
            dtype=self.dtype_policy,
            name=f"encoder_{index}",
        )

    def _run_encoder_layer(self, layer, inputs, mask, training):
        """`(outputs, h, c)` of one encoder layer; a bidirectional layer's
        final states are its two directions' side by side."""
        if not self.bidirectional_encoder:
            return layer(inputs, mask=mask, training=training)
        outputs, h_forward, c_forward, h_backward, c_backward = layer(
            inputs, mask=mask, training=training
        )
        return (
            outputs,
            ops.concatenate([h_forward, h_backward], axis=-1),
            ops.concatenate([c_forward, c_backward], axis=-1),
        )

    # The contract's declarations (zoo.recipes.contract).
    constant_state_keys = ("memory", "projected_keys", "source_mask")

    @property
    def recurrent_state_keys(self):
        keys = tuple(f"{kind}_{i}" for i in range(self.num_layers) for kind in ("h", "c"))
        return keys + (("feed",) if self.input_feeding else ())

    def encode(self, source, training=None):
        mask = source_mask(source, self.pad_id)
        outputs = self.source_embedding(source)
        state = {"source_mask": mask}
        for i, layer in enumerate(self.encoder_layers):
            outputs = self.dropout_layer(outputs, training=training)
            outputs, h, c = self._run_encoder_layer(layer, outputs, mask, training)
            if self.initial_state == "zeros":
                h, c = ops.zeros_like(h), ops.zeros_like(c)
            state[f"h_{i}"], state[f"c_{i}"] = h, c
        if not self.decoder.built:
            self.decoder.build((None, None, self.embedding_dim), tuple(outputs.shape))
        state["memory"] = outputs
        state["projected_keys"] = self.decoder.project_memory(outputs)
        if self.input_feeding:
            state["feed"] = ops.zeros_like(state["h_0"])
        return state

    def embed_targets(self, tokens, training=None):
        return self.dropout_layer(self.target_embedding(tokens), training=training)

    def recurrent_step(self, embedded, state, step):
        # The attentional state h~_t is the features.
        return self.decoder_step(embedded, state, step)

    def run_recurrence(self, embedded, state, training=None):
        # The decoder's state is the LSTMs' (h_i, c_i), then the fed h~:
        # the order of `recurrent_state_keys`.
        return self.decoder_over_target(embedded, state, training=training)

    def output_logits(self, features, training=None):
        return self.output_projection(self.dropout_layer(features, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers,
                "attention": self.attention_type,
                "score": self.score,
                "window": self.window,
                "input_feeding": self.input_feeding,
                "dropout": self.dropout,
                "probability_fn": self.probability_fn,
                "bidirectional_encoder": self.bidirectional_encoder,
                "initial_state": self.initial_state,
                "attentional_activation": self.attentional_activation,
            }
        )
        return config
