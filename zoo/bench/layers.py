"""The `layers` suite: our layers against Keras' (or alone), forward and
forward+backward."""

from zoo.bench.sizes import random_tensor
from zoo.bench.timing import compiled_with


def gradient_function(forward, variables):
    """`inputs -> gradients of sum(forward(*inputs))` w.r.t. `variables` and
    the inputs, compiled like the forward pass.

    Keras has no backend-neutral gradient, so this switches on the backend:
    a tape on TensorFlow, `jax.grad` over a stateless scope on JAX, autograd
    on torch.
    """
    import keras
    from keras import ops

    from zoo.inference.search_choice import compile_inference

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def gradients(*inputs):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                loss = ops.sum(forward(*inputs))
            return tape.gradient(loss, list(variables) + list(inputs))

    elif backend == "jax":
        import jax

        def loss(values, *inputs):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return ops.sum(forward(*inputs))

        values = [variable.value for variable in variables]

        def gradients(*inputs):
            return jax.grad(loss, argnums=tuple(range(1 + len(inputs))))(values, *inputs)

    else:
        import torch

        def gradients(*inputs):
            inputs = [x.detach().requires_grad_(True) for x in inputs]
            loss = ops.sum(forward(*inputs))
            return torch.autograd.grad(loss, [v.value for v in variables] + inputs)

    return compile_inference(gradients)


def _comparisons(size, depth):
    """(name, ours, reference or None, call options) of one layer shape."""
    import keras

    from zoo import layers

    heads = size.num_heads
    head_depth = depth // heads
    return [
        (
            "MultiHeadAttention vs keras.layers.MultiHeadAttention",
            layers.MultiHeadAttention(heads, head_depth),
            keras.layers.MultiHeadAttention(heads, head_depth),
            {},
        ),
        (
            "MultiHeadAttention vs keras.layers.MultiHeadAttention, causal",
            layers.MultiHeadAttention(heads, head_depth),
            keras.layers.MultiHeadAttention(heads, head_depth),
            {"use_causal_mask": True},
        ),
        (
            "LuongAttention(dot) vs keras.layers.Attention",
            layers.LuongAttention("dot"),
            keras.layers.Attention(),
            {},
        ),
        (
            f"LocalAttention(local-p, general, D={size.local_window}) "
            "vs LuongAttention(general)",
            layers.LocalAttention("local-p", size.local_window, "general"),
            layers.LuongAttention("general"),
            {},
        ),
        (
            f"AdditiveAttention(units={size.additive_units})",
            layers.AdditiveAttention(size.additive_units),
            None,
            {},
        ),
    ]


def _self_attention(layer, **options):
    """The layer's forward function of one input `x`, attending over itself."""
    import keras

    if isinstance(layer, keras.layers.Attention):
        return lambda x: layer([x, x])
    return lambda x: layer(x, x, **options)


def bench_layers(runner):
    """Our layers against Keras' (or alone), forward and forward+backward."""
    from zoo.inference.search_choice import compile_inference

    for batch, length, depth in runner.size.layer_shapes:
        x = random_tensor((batch, length, depth))
        for name, ours, reference, options in _comparisons(runner.size, depth):
            # (the layer that owns the weights, its forward function of x)
            sides = [
                (layer, _self_attention(layer, **options))
                for layer in (ours, reference)
                if layer is not None
            ]
            for _, forward in sides:
                forward(x)  # builds the weights outside any compiled function
            forwards = [compile_inference(forward) for _, forward in sides]
            backwards = [
                gradient_function(forward, layer.trainable_variables) for layer, forward in sides
            ]
            for direction, functions in (("forward", forwards), ("forward+backward", backwards)):
                runner.pair(
                    "layers",
                    f"{name}, {direction}",
                    f"B={batch} T={length} d={depth}",
                    compiled_with(),
                    *[lambda f=f: f(x) for f in functions],
                )
