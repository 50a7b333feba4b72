"""A short demonstration of the attention layers: learning to reverse.

Each layer is trained, in a tiny model, to output its source sequence
reversed. The only way to get the token at target step t right is to attend
to source position `length - 1 - t`, so the learned alignment matrix should
be the anti-diagonal. The demo prints, per layer, the token accuracy, the
share of steps whose attention peak is on the right source position, and one
alignment matrix.
"""

import time

import keras
import numpy as np

from zoo import layers

VOCABULARY = 16
LENGTH = 10


def reversal_data(count, seed):
    rng = np.random.default_rng(seed)
    source = rng.integers(1, VOCABULARY, size=(count, LENGTH))
    return source, source[:, ::-1].copy()


def attention_layers():
    return {
        "AdditiveAttention(units=32)": layers.AdditiveAttention(units=32),
        "LuongAttention(score='general')": layers.LuongAttention(score="general"),
        "LocalAttention(mode='local-p', window=3)": layers.LocalAttention(
            mode="local-p", window=3
        ),
        "MultiHeadAttention(num_heads=2, key_dim=16)": layers.MultiHeadAttention(
            num_heads=2, key_dim=16
        ),
    }


# Why a layer may stand below the others on this task, printed under its result.
NOTES = {
    "LocalAttention(mode='local-p', window=3)": (
        "local-p learns its window centre p_t only from the 7 positions inside its "
        "window: a centre that settles too far from the reversed position (most often "
        "at the ends of the source) is never pulled back, and those steps stay wrong"
    ),
}


def reversal_model(attention, depth=32):
    """Queries are target positions; keys and values are source tokens and positions."""
    source = keras.Input((LENGTH,), dtype="int32")
    positions = keras.ops.zeros_like(source) + keras.ops.arange(LENGTH, dtype="int32")
    memory = keras.layers.Embedding(VOCABULARY, depth)(source)
    memory = memory + keras.layers.Embedding(LENGTH, depth)(positions)
    query = keras.layers.Embedding(LENGTH, depth)(positions)
    context, weights = attention(query, memory, return_attention_scores=True)
    if len(weights.shape) == 4:  # multi-head: average the heads to plot one matrix
        weights = keras.ops.mean(weights, axis=1)
    logits = keras.layers.Dense(VOCABULARY)(context)
    return keras.Model(source, logits), keras.Model(source, weights)


def format_alignment(weights):
    shades = " .:-=+*#%@"
    rows = []
    for t, row in enumerate(weights):
        cells = "".join(shades[min(int(w * len(shades)), len(shades) - 1)] for w in row)
        rows.append(f"    target {t:2d} |{cells}|")
    return "\n".join(rows)


def run(epochs=8, train_size=4000, verbose=1):
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}")
    train_source, train_target = reversal_data(train_size, seed=0)
    test_source, test_target = reversal_data(500, seed=1)
    expected_peak = LENGTH - 1 - np.arange(LENGTH)
    results = {}
    for name, attention in attention_layers().items():
        print(f"\n== {name}")
        started = time.monotonic()
        model, alignment = reversal_model(attention)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        model.fit(
            train_source, train_target, batch_size=64, epochs=epochs, verbose=verbose
        )
        predicted = np.argmax(keras.ops.convert_to_numpy(model.predict(test_source, verbose=0)), -1)
        weights = keras.ops.convert_to_numpy(alignment.predict(test_source, verbose=0))
        token_accuracy = float(np.mean(predicted == test_target))
        peak_accuracy = float(np.mean(np.argmax(weights, -1) == expected_peak))
        results[name] = {"token_accuracy": token_accuracy, "peak_accuracy": peak_accuracy}
        print(
            f"   token accuracy {token_accuracy:.3f}, attention peak on the "
            f"reversed position {peak_accuracy:.3f}, {time.monotonic() - started:.0f} s"
        )
        if name in NOTES:
            print(f"   why it may stand lower: {NOTES[name]}")
        print("   alignment of the first test sentence (source positions across):")
        print(format_alignment(weights[0]))
    return results
