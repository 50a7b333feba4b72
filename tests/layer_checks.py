"""The checks that every attention layer passes, the same way.

`check_layer` is the one helper each layer's test file calls (in the manner of
keras-hub's `run_layer_test`): a new layer is held to the whole contract by a
single line.
"""

import doctest

import keras
import numpy as np
from keras import ops

# Tolerances of a mixed-precision output against the float32 output of the
# same weights: float16 keeps about 3 decimal digits, bfloat16 about 2.
MIXED_PRECISION_TOLERANCE = {"mixed_float16": 2e-2, "mixed_bfloat16": 1e-1}


def to_numpy(x):
    return ops.convert_to_numpy(x)


def _functional_model(layer, query, value, call_kwargs):
    query_input = keras.Input(query.shape[1:], name="query")
    value_input = keras.Input(value.shape[1:], name="value")
    output = layer(query_input, value_input, **call_kwargs)
    return keras.Model([query_input, value_input], output)


def check_config_round_trip(make_layer, query, value, call_kwargs):
    layer = make_layer()
    layer(query, value, **call_kwargs)
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def check_symbolic_call(make_layer, query, value, call_kwargs):
    model = _functional_model(make_layer(), query, value, call_kwargs)
    eager = model([query, value])
    assert tuple(model.output.shape)[1:] == tuple(eager.shape)[1:]
    assert model.output.shape[0] is None


def check_save_and_reload(make_layer, query, value, call_kwargs, tmp_path):
    model = _functional_model(make_layer(), query, value, call_kwargs)
    expected = to_numpy(model([query, value]))
    path = str(tmp_path / "layer.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(
        to_numpy(reloaded([query, value])), expected, rtol=0, atol=1e-6
    )


def check_every_weight_trains(make_layer, query, value, call_kwargs):
    """One `fit` step with plain SGD changes every trainable weight.

    With SGD a weight moves by `-learning_rate * gradient`, so a weight that
    does not move got a zero gradient (or none at all).
    """
    layer = make_layer()
    model = _functional_model(layer, query, value, call_kwargs)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="mse")
    target = np.random.default_rng(0).normal(size=model.output.shape[1:])
    target = np.broadcast_to(target, (query.shape[0],) + target.shape)
    assert layer.trainable_weights, "the layer has no trainable weights"
    before = [to_numpy(w).copy() for w in layer.trainable_weights]
    model.fit([query, value], target, batch_size=query.shape[0], epochs=1, verbose=0)
    for weight, old in zip(layer.trainable_weights, before):
        assert not np.array_equal(to_numpy(weight), old), (
            f"weight {weight.path} got no gradient in one fit step"
        )


def check_mixed_precision(make_layer, query, value, call_kwargs):
    reference = make_layer()
    expected = to_numpy(reference(query, value, **call_kwargs))
    for policy, tolerance in MIXED_PRECISION_TOLERANCE.items():
        layer = make_layer(dtype=policy)
        layer(query, value, **call_kwargs)
        layer.set_weights(reference.get_weights())
        output = layer(query, value, **call_kwargs)
        assert keras.backend.standardize_dtype(output.dtype) == layer.compute_dtype
        output = to_numpy(output).astype("float32")
        assert np.all(np.isfinite(output)), policy
        np.testing.assert_allclose(output, expected, atol=tolerance, err_msg=policy)


def check_layer(make_layer, query, value, tmp_path, call_kwargs=None):
    """Runs every common check on a layer.

    Args:
        make_layer: callable taking optional layer keyword arguments (e.g.
            `dtype=`) and returning a new, unbuilt layer. Two layers it makes
            must have weights of the same shapes.
        query: numpy array, `[batch, Tq, dq]`.
        value: numpy array, `[batch, Tv, dv]`.
        tmp_path: a folder for the saved model (pytest's `tmp_path`).
        call_kwargs: optional dict of non-tensor call arguments.
    """
    call_kwargs = call_kwargs or {}
    check_config_round_trip(make_layer, query, value, call_kwargs)
    check_symbolic_call(make_layer, query, value, call_kwargs)
    check_save_and_reload(make_layer, query, value, call_kwargs, tmp_path)
    check_every_weight_trains(make_layer, query, value, call_kwargs)
    check_mixed_precision(make_layer, query, value, call_kwargs)


def gradient_magnitudes(model, x, y, loss_fn):
    """{weight path: max |d loss / d weight|} for every trainable weight, the
    loss being `loss_fn` plus the losses the model adds in its training call.

    A backend-specific gradient (tests may import the backends; the library
    may not): unlike "did one SGD step move the weight", it also sees a
    gradient that is real but too small to move a float32 weight.
    """
    backend = keras.backend.backend()
    weights = model.trainable_variables

    def total(output, added_losses):
        # With the losses the call adds (`add_loss`), as `fit` minimises them.
        return loss_fn(y, output) + sum(ops.cast(loss, "float32") for loss in added_losses)

    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = total(model(x, training=True), model.losses)
        gradients = tape.gradient(loss, weights)
    elif backend == "torch":
        model.zero_grad()
        loss = total(model(x, training=True), model.losses)
        loss.backward()
        gradients = [w.value.grad for w in weights]
    else:
        import jax

        non_trainable = [w.value for w in model.non_trainable_variables]

        def loss_of(trainable):
            output, _, losses = model.stateless_call(
                trainable, non_trainable, x, training=True, return_losses=True
            )
            return total(output, losses)

        gradients = jax.grad(loss_of)([w.value for w in weights])
    return {
        w.path: 0.0 if g is None else float(np.max(np.abs(to_numpy(g))))
        for w, g in zip(weights, gradients)
    }


def vector_jacobian_product(function, x, cotangent):
    """`cotangent^T d function(x) / dx`, by the backend's own autodiff.

    Backend-specific like `gradient_magnitudes`: the gradient of
    `sum(cotangent * function(x))` with respect to the float32 tensor `x`.
    """
    backend = keras.backend.backend()
    cotangent = np.asarray(cotangent, "float32")
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x, "float32")
        with tf.GradientTape() as tape:
            tape.watch(x)
            total = tf.reduce_sum(function(x) * cotangent)
        gradient = tape.gradient(total, x)
    elif backend == "torch":
        import torch

        x = ops.convert_to_tensor(x, "float32").detach().requires_grad_(True)
        torch.sum(function(x) * ops.convert_to_tensor(cotangent)).backward()
        gradient = x.grad
    else:
        import jax

        gradient = jax.grad(lambda x: (function(x) * cotangent).sum())(
            jax.numpy.asarray(x, "float32")
        )
    return to_numpy(gradient)


def run_docstring_examples(module):
    """Runs the docstring examples of `module` (a module or a class) with
    `np`, `keras` and every public `zoo.layers` name in scope, as a user who
    copies them would; returns the names they defined."""
    import zoo.layers

    namespace = {"np": np, "keras": keras}
    namespace.update({name: getattr(zoo.layers, name) for name in zoo.layers.__all__})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(module, globs=namespace):
        runner.run(test, clear_globs=False)
        namespace.update(test.globs)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, result
    return namespace
