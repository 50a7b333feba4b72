"""Our layers on every backend: no TensorFlow needed, weights portable."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask

import zoo.layers

BACKENDS = ("tensorflow", "jax", "torch")


def run_python(code, backend):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_layers_run_without_loading_tensorflow():
    # From the tensorflow process, check jax (TensorFlow is loaded there anyway).
    backend = keras.backend.backend()
    backend = "jax" if backend == "tensorflow" else backend
    output = run_python(
        """
        import sys
        import numpy as np
        import zoo.layers, zoo.recipes
        query = np.ones((2, 3, 4), "float32")
        value = np.ones((2, 5, 4), "float32")
        for name in zoo.layers.__all__:
            layer_class = getattr(zoo.layers, name)
            if name == "AdditiveAttention":
                layer_class(units=4)(query, value)
            elif name in ("LuongAttention", "LocalAttention"):
                layer_class()(query, value)
            elif name == "MultiHeadAttention":
                layer_class(num_heads=2, key_dim=2)(query, value)
        print("tensorflow loaded:", "tensorflow" in sys.modules)
        """,
        backend,
    )
    assert "tensorflow loaded: False" in output


def portable_model():
    query = keras.Input((4, 6), name="query")
    value = keras.Input((5, 6), name="value")
    value_mask = keras.Input((5,), dtype="bool", name="value_mask")
    outputs = [
        zoo.layers.AdditiveAttention(units=3, normalize=True)(query, value, value_mask=value_mask),
        zoo.layers.LuongAttention(score="concat", scale=True)(query, value, value_mask=value_mask),
        zoo.layers.LocalAttention(mode="local-p", window=2)(query, value, value_mask=value_mask),
        zoo.layers.MultiHeadAttention(num_heads=2, key_dim=3)(query, value, value_mask=value_mask),
    ]
    return keras.Model([query, value, value_mask], outputs)


def test_weights_saved_on_one_backend_load_on_the_next(tmp_path):
    """Saved here, loaded by the next backend in the cycle tf -> jax -> torch -> tf."""
    here = keras.backend.backend()
    there = BACKENDS[(BACKENDS.index(here) + 1) % len(BACKENDS)]
    rng = np.random.default_rng(0)
    inputs = {
        "query": rng.normal(size=(2, 4, 6)).astype("float32"),
        "value": rng.normal(size=(2, 5, 6)).astype("float32"),
        "value_mask": lengths_to_mask([5, 3], 5),
    }
    model = portable_model()
    outputs = [to_numpy(x) for x in model([inputs["query"], inputs["value"], inputs["value_mask"]])]
    model.save(tmp_path / "model.keras")
    np.savez(tmp_path / "io.npz", *outputs, **inputs)
    output = run_python(
        f"""
        import keras, numpy as np
        import zoo.layers
        data = np.load({str(tmp_path / "io.npz")!r})
        model = keras.saving.load_model({str(tmp_path / "model.keras")!r}, safe_mode=True)
        outputs = model([data["query"], data["value"], data["value_mask"]])
        for i, output in enumerate(outputs):
            np.testing.assert_allclose(
                keras.ops.convert_to_numpy(output), data[f"arr_{{i}}"], rtol=1e-5, atol=1e-5)
        print("compared", len(outputs), "outputs on", keras.backend.backend())
        """,
        there,
    )
    assert f"compared {len(outputs)} outputs on {there}" in output
