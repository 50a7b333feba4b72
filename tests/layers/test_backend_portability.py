"""Our layers on every backend: no TensorFlow needed, weights portable."""

import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
from layer_checks import run_docstring_examples
from layer_checks import to_numpy
from numpy_reference import lengths_to_mask
from tiny_configs import TINY

import zoo.layers
import zoo.recipes

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


# Every recipe module, by file, and those of its packages (decoding): a new
# recipe is checked without being named here, and the known ones must all be
# found (an empty or moved package fails).
RECIPE_MODULES = sorted(
    info.name.removeprefix("zoo.recipes.")
    for info in pkgutil.walk_packages(zoo.recipes.__path__, prefix="zoo.recipes.")
)
KNOWN_RECIPE_MODULES = {
    "contract", "decoding", "decoding.beam", "decoding.chunked_beam", "decoding.decode_result",
    "decoding.greedy", "decoding.penalties", "gnmt", "luong", "rnnencdec", "rnnsearch",
    "seq2seq", "show_attend_tell", "transformer",
}
TESTS_DIRECTORY = str(Path(__file__).resolve().parents[1])

# Imports every recipe module, calls every public name of zoo.layers and
# (with BUILD_MODELS) builds one tiny model of every recipe, then reports
# which tensorflow modules got loaded. With BLOCK, `import tensorflow` fails
# as if it were not installed, so a recipe or layer that imports it fails
# where it does.
NO_TENSORFLOW_PROGRAM = """
import sys
if BLOCK:
    sys.modules["tensorflow"] = None  # `import tensorflow` raises ImportError
import importlib
import json
import numpy as np
import keras
import zoo.layers
import zoo.registry
sys.path.insert(0, TESTS_DIRECTORY)
from tiny_configs import TINY

for module in RECIPE_MODULES:
    importlib.import_module("zoo.recipes." + module)

rng = np.random.default_rng(0)
query = rng.normal(size=(2, 3, 4)).astype("float32")
value = rng.normal(size=(2, 5, 4)).astype("float32")
value_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
grid = rng.normal(size=(2, 2, 3, 4)).astype("float32")
L = zoo.layers
CALLS = {
    "AdditiveAttention": lambda: [
        L.AdditiveAttention(units=4, normalize=normalize)(query, value, value_mask=value_mask)
        for normalize in (False, True)
    ],
    "LuongAttention": lambda: [
        L.LuongAttention(score=score, scale=True)(query, value, value_mask=value_mask)
        for score in ("dot", "general", "concat")
    ],
    "LocalAttention": lambda: [
        L.LocalAttention(mode=mode, window=1)(query, value, value_mask=value_mask)
        for mode in ("local-m", "local-p")
    ],
    "BahdanauMonotonicAttention": lambda: [
        L.BahdanauMonotonicAttention(units=4, normalize=True, mode=mode)(
            query, value, value_mask=value_mask
        )
        for mode in ("parallel", "hard")
    ],
    "LuongMonotonicAttention": lambda: L.LuongMonotonicAttention(score="general")(
        query, value, value_mask=value_mask
    ),
    "MultiHeadAttention": lambda: L.MultiHeadAttention(num_heads=2, key_dim=2)(
        query, value, value_mask=value_mask
    ),
    "SpatialSoftAttention": lambda: L.SpatialSoftAttention(units=4)(query, grid),
    "doubly_stochastic_penalty": lambda: L.doubly_stochastic_penalty(
        L.SpatialSoftAttention(units=4)(query, grid, return_attention_scores=True)[1]
    ),
    "masked_softmax": lambda: L.masked_softmax(query, query > 0),
    "masked_sparsemax": lambda: L.masked_sparsemax(query, query > 0),
    "BaseAttention": lambda: None,  # abstract; every subclass above is called
    "AttentionDecoder": lambda: None,  # abstract; every decoder is called
    "BahdanauDecoder": lambda: L.BahdanauDecoder(
        keras.layers.GRUCell(4), L.SpatialSoftAttention(units=4)
    )(query, grid, return_attention=True),
    "GNMTDecoder": lambda: L.GNMTDecoder(
        [keras.layers.LSTMCell(4) for _ in range(3)], L.AdditiveAttention(units=4, normalize=True)
    )(query, value, memory_mask=value_mask),
    "LuongDecoder": lambda: L.LuongDecoder(
        [keras.layers.LSTMCell(4), keras.layers.LSTMCell(4)], L.LocalAttention(mode="local-m", window=1)
    )(query, value, memory_mask=value_mask),
}
unchecked = sorted(set(L.__all__) - set(CALLS))
assert not unchecked, f"add a call of {unchecked} to this check"
called = []
for name in L.__all__:
    keras.tree.map_structure(keras.ops.convert_to_numpy, CALLS[name]())
    called.append(name)

first_preset = {}
for preset in sorted(zoo.registry.PRESETS):
    first_preset.setdefault(zoo.registry.get_preset(preset)["recipe"], preset)
source = np.array([[5, 6, 7, 4], [9, 4, 0, 0]], "int32")
images = rng.random((2, 16, 16, 3)).astype("float32")
target_in = np.array([[2, 5, 6], [2, 8, 0]], "int32")
built = []
for recipe, preset in sorted(first_preset.items() if BUILD_MODELS else []):
    captioning = zoo.registry.task_of(recipe) == "captioning"
    vocabularies = {"target_vocabulary_size": 13}
    if not captioning:
        vocabularies["source_vocabulary_size"] = 13
    model = zoo.registry.build(preset, **vocabularies, **TINY[recipe], dropout=0.0)
    if CALL_MODELS:
        inputs = {"image": images} if captioning else {"source": source}
        keras.ops.convert_to_numpy(model({**inputs, "target_in": target_in}))
        from zoo.recipes.decoding import greedy_search
        greedy_search(model, images if captioning else source, max_length=2)
    built.append(recipe)

loaded = sorted(
    name for name, module in sys.modules.items()
    if module is not None and name.split(".")[0] == "tensorflow"
)
print(json.dumps({
    "backend": keras.backend.backend(),
    "recipe_modules": sorted(m for m in sys.modules if m.startswith("zoo.recipes.")),
    "called": called,
    "recipes_built": built,
    "tensorflow_modules": loaded[:5],
}))
"""


@pytest.mark.parametrize("tensorflow", ["blocked", "installed"])
def test_layers_and_recipes_run_without_tensorflow(tensorflow):
    """"blocked": everything runs with `import tensorflow` failing.
    "installed": importing the layers and recipes and calling the layers
    loads no TensorFlow. (Building a recipe model does, when TensorFlow is
    installed: Keras' own serialization_lib asks `tf.available`, e.g. in
    `Bidirectional.__init__`; so the models are built only when blocked.)
    """
    # The jax and torch processes check their own backend in a child
    # process; the tensorflow one would only repeat the jax check.
    backend = keras.backend.backend()
    if backend == "tensorflow":
        pytest.skip("TensorFlow is the backend here; the jax and torch runs check theirs")
    assert KNOWN_RECIPE_MODULES <= set(RECIPE_MODULES), RECIPE_MODULES
    settings = {
        "BLOCK": tensorflow == "blocked",
        "BUILD_MODELS": tensorflow == "blocked",
        "RECIPE_MODULES": RECIPE_MODULES,
        "TESTS_DIRECTORY": TESTS_DIRECTORY,
        # A forward pass and a greedy decode of each tiny model: a few
        # seconds on eager torch, a minute and a half of jax compilation
        # (test_recipes runs them there), so torch only.
        "CALL_MODELS": tensorflow == "blocked" and backend == "torch",
    }
    prelude = "".join(f"{name} = {value!r}\n" for name, value in settings.items())
    output = run_python(prelude + NO_TENSORFLOW_PROGRAM, backend)
    report = json.loads(output.strip().splitlines()[-1])
    assert report["backend"] == backend
    assert report["recipe_modules"] == [f"zoo.recipes.{m}" for m in RECIPE_MODULES]
    assert set(report["called"]) == set(zoo.layers.__all__)
    assert "SpatialSoftAttention" in report["called"]
    assert set(report["recipes_built"]) == (set(TINY) if tensorflow == "blocked" else set())
    assert report["tensorflow_modules"] == [], f"TensorFlow got loaded: {report}"


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


def docstring_translator():
    """The Functional translator of BahdanauDecoder's docstring, trained with
    `fit` as a user who copies it would; and its input."""
    namespace = run_docstring_examples(zoo.layers.bahdanau_decoder)
    model, x = namespace["model"], namespace["x"]
    assert any(isinstance(layer, zoo.layers.BahdanauDecoder) for layer in model.layers)
    return model, [x, x]


def test_weights_saved_on_one_backend_load_on_the_next(tmp_path):
    """Saved here, loaded in safe mode by a fresh process of the next backend
    in the cycle tf -> jax -> torch -> tf: a model of every attention layer,
    and the docstring's translator, a user's script."""
    here = keras.backend.backend()
    there = BACKENDS[(BACKENDS.index(here) + 1) % len(BACKENDS)]
    rng = np.random.default_rng(0)
    inputs = {
        "query": rng.normal(size=(2, 4, 6)).astype("float32"),
        "value": rng.normal(size=(2, 5, 6)).astype("float32"),
        "value_mask": lengths_to_mask([5, 3], 5),
    }
    models = {
        "layers": (portable_model(), [inputs["query"], inputs["value"], inputs["value_mask"]]),
        "translator": docstring_translator(),
    }
    for name, (model, model_inputs) in models.items():
        outputs = model(model_inputs)
        outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        model.save(tmp_path / f"{name}.keras")
        arrays = {f"input_{i}": x for i, x in enumerate(model_inputs)}
        arrays.update({f"output_{i}": to_numpy(x) for i, x in enumerate(outputs)})
        np.savez(tmp_path / f"{name}.npz", **arrays)
    output = run_python(
        f"""
        import keras, numpy as np
        import zoo.layers
        for name in {list(models)!r}:
            data = np.load(f"{tmp_path}/{{name}}.npz")
            model = keras.saving.load_model(f"{tmp_path}/{{name}}.keras", safe_mode=True)
            inputs = [data[key] for key in data.files if key.startswith("input_")]
            expected = [data[key] for key in data.files if key.startswith("output_")]
            outputs = model(inputs)
            outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            assert len(outputs) == len(expected)
            for output, want in zip(outputs, expected):
                np.testing.assert_allclose(
                    keras.ops.convert_to_numpy(output), want, rtol=1e-5, atol=1e-5)
            print("compared", len(outputs), "outputs of", name, "on", keras.backend.backend())
        """,
        there,
    )
    assert f"compared 4 outputs of layers on {there}" in output
    assert f"compared 1 outputs of translator on {there}" in output
