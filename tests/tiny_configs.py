"""The smallest config of each recipe, shared by the tests that build every
family (the preset sweep, the ONNX export)."""

# The smallest sizes of each recipe; the preset's other settings (attention
# type, score, cell, input feeding, ...) are kept.
TINY = {
    "rnnencdec": {"embedding_dim": 6, "hidden_dim": 8, "readout_dim": 6},
    "rnnsearch": {"embedding_dim": 6, "hidden_dim": 8, "attention_units": 5, "maxout_units": 4},
    "luong": {"embedding_dim": 6, "hidden_dim": 8, "num_layers": 2, "window": 2},
    "transformer": {
        "d_model": 8,
        "num_heads": 2,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "feed_forward_dim": 12,
        "max_target_length": 16,
        "max_source_length": 16,
    },
    "show_attend_tell": {
        "image_size": 16,
        "encoder": "small_cnn",
        "encoder_filters": [4, 4],
        "feature_dim": 6,
        "encoder_weights": None,
        "encoder_layer": None,
        "embedding_dim": 6,
        "hidden_dim": 8,
        "attention_units": 5,
    },
}
