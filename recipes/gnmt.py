"""GNMT: Wu et al. (2016), Google's Neural Machine Translation System, section 3."""

import keras
from keras import ops

from zoo.layers import AdditiveAttention
from zoo.layers import GNMTDecoder
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import check_initial_state
from zoo.recipes.seq2seq import source_mask

# The paper's: residual connections from the third layer on, in the encoder
# and the decoder (the first two layers' inputs have other sizes).
FIRST_RESIDUAL_LAYER = 3


@keras.saving.register_keras_serializable(package="zoo")
class GNMT(Seq2SeqRecipe):
    """The GNMT translator of Wu et al. (2016), section 3.

    - Encoder: `num_layers` LSTM layers. The bottom one is bidirectional
      (its forward and backward outputs, `hidden_dim` each, concatenated);
      the others are unidirectional; from layer 3 on (counted from 1) each
      layer's input is added to its output (`x^{i+1} = LSTM_i(x^i) + x^i`).
    - Decoder (a `GNMTDecoder`): `num_layers` LSTM layers. At step t the
      bottom layer's previous output queries the encoder's top layer with
      the paper's normalised Bahdanau attention (`AdditiveAttention(...,
      normalize=True)`, keys projected once per sentence); the context
      `c_t` is fed to every decoder layer beside its input, and the decoder
      has the encoder's residuals from layer 3 on.
    - Output: `p(y_t) = softmax(W y^L_t)` from the top decoder layer alone,
      as in the paper and TensorFlow NMT's GNMT; with `output_context=True`
      the softmax reads `[y^L_t; c_t]`, as RNNsearch's and Luong's outputs
      read the context. Without it the attention can settle on the first
      source word and stay there (docs/experiments/2026-12-04-four-recipes-multi30k.md,
      "What sinks GNMT's attention").

    Decoder layer i starts from the final state of encoder layer i, as
    TensorFlow NMT's GNMT does (the paper does not say): layer 1 from the
    backward direction's, which has read the whole sentence and ends at its
    first word. Dropout is on the embeddings, on each encoder layer's input
    and before the softmax; not inside the decoder's step, where `fit`'s
    compiled JAX train step refuses a random draw. The paper's length and
    coverage penalties are beam search's (`zoo.recipes.decoding`,
    `length_penalty`, `coverage_penalty`).

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        embedding_dim: int, word embedding size (1024 in the paper).
        hidden_dim: int, LSTM size of every layer, and of each direction of
            the bidirectional one (1024).
        num_layers: int >= 2, the LSTM layers of the encoder (the
            bidirectional one included) and of the decoder (8).
        attention_units: int, the size of the attention's projections (1024).
        dropout: float, see above.
        output_context: bool, the softmax also reads the context `c_t`.
        initial_state: `"encoder"` (decoder layer i starts from encoder
            layer i's final state, as above) or `"zeros"`.
        **kwargs: see `Seq2SeqRecipe`.

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144)
        - [Luong, Brevdo and Zhao, 2017](https://github.com/tensorflow/nmt),
          TensorFlow NMT's GNMT, for what the paper leaves open.
    """

    # The contract's declarations (zoo.recipes.contract).
    constant_state_keys = ("memory", "projected_keys", "source_mask")

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=1024,
        hidden_dim=1024,
        num_layers=8,
        attention_units=1024,
        dropout=0.0,
        output_context=False,
        initial_state="encoder",
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        check_initial_state(initial_state)
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 2:
            raise ValueError(
                "`num_layers` must be an int >= 2 (the bidirectional layer and at "
                f"least one above it). Received: num_layers={num_layers!r}"
            )
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.attention_units = attention_units
        self.dropout = dropout
        self.output_context = bool(output_context)
        self.initial_state = initial_state
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
        # Named, so that its directions' weight paths (forward_lstm, backward_lstm)
        # do not depend on how many LSTMs the process has made before.
        self.bidirectional_encoder = keras.layers.Bidirectional(
            keras.layers.LSTM(
                hidden_dim, return_sequences=True, return_state=True, dtype=policy, name="lstm"
            ),
            dtype=policy,
            name="encoder_0",
        )
        self.encoder_layers = [
            keras.layers.LSTM(
                hidden_dim,
                return_sequences=True,
                return_state=True,
                dtype=policy,
                name=f"encoder_{i}",
            )
            for i in range(1, num_layers)
        ]
        self.decoder = GNMTDecoder(
            [
                keras.layers.LSTMCell(hidden_dim, dtype=policy, name=f"decoder_cell_{i}")
                for i in range(num_layers)
            ],
            AdditiveAttention(attention_units, normalize=True, dtype=policy, name="attention"),
            first_residual_layer=FIRST_RESIDUAL_LAYER,
            output_context=self.output_context,
            dtype=policy,
            name="decoder",
        )
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="output_projection"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)

    @property
    def recurrent_state_keys(self):
        # The decoder's state, bottom layer first: the order of its `state_size`.
        return tuple(f"{kind}_{i}" for i in range(self.num_layers) for kind in ("h", "c"))

    def encode(self, source, training=None):
        mask = source_mask(source, self.pad_id)
        embedded = self.dropout_layer(self.source_embedding(source), training=training)
        outputs, _, _, backward_h, backward_c = self.bidirectional_encoder(
            embedded, mask=mask, training=training
        )
        state = {"source_mask": mask, "h_0": backward_h, "c_0": backward_c}
        for i, layer in enumerate(self.encoder_layers, start=1):
            layer_input = outputs
            outputs, state[f"h_{i}"], state[f"c_{i}"] = layer(
                self.dropout_layer(layer_input, training=training), mask=mask, training=training
            )
            if i + 1 >= FIRST_RESIDUAL_LAYER:
                outputs = outputs + layer_input
        if self.initial_state == "zeros":
            for key in self.recurrent_state_keys:
                state[key] = ops.zeros_like(state[key])
        if not self.decoder.built:
            self.decoder.build((None, None, self.embedding_dim), tuple(outputs.shape))
        state["memory"] = outputs
        state["projected_keys"] = self.decoder.project_memory(outputs)
        return state

    def embed_targets(self, tokens, training=None):
        return self.dropout_layer(self.target_embedding(tokens), training=training)

    def recurrent_step(self, embedded, state, step):
        # The top decoder layer's output is the features.
        return self.decoder_step(embedded, state, step)

    def run_recurrence(self, embedded, state, training=None):
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
                "attention_units": self.attention_units,
                "dropout": self.dropout,
                "output_context": self.output_context,
                "initial_state": self.initial_state,
            }
        )
        return config
