"""Whether a train step compiles (XLA on TensorFlow, `jax.jit` on JAX): the
recipe's own default on this backend, or the run's `jit_compile` setting."""

import keras

from zoo import registry


def default_jit_compile(recipe=None):
    """The `jit_compile` under which `recipe` trains fastest on this backend.

    JAX: True. Without `jax.jit` every train step re-traces the recurrent
    scan, which makes even a small fit many times slower. TensorFlow: the
    recipe class's `xla_on_tensorflow`, measured per recipe with `zoo bench
    train` and in real training (see each class). Torch: False
    (torch.compile costs more than it saves here).

    Args:
        recipe: optional recipe class or instance; None: a recurrent recipe.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return bool(getattr(recipe, "xla_on_tensorflow", False))
    return backend == "jax"


def train_step_jit_compile(recipe, training):
    """Whether the train step of recipe `recipe` (its registry name) compiles
    under `training` (a `TrainingConfig`): its `jit_compile`, else the
    recipe's default on this backend. A compiled step gets batches of a
    few fixed shapes (`pads_to_fixed_shapes`)."""
    if training.jit_compile is not None:
        return training.jit_compile
    return default_jit_compile(registry.recipe_class(recipe))


def pads_to_fixed_shapes(jit):
    """Whether a train step compiled so (`jit`) gets its batches in a few
    fixed shapes (padded to their length bucket's boundary, each bucket's
    last batch filled up to its size): on TensorFlow and JAX, whose XLA
    compiles the step once per shape, a compilation that takes seconds."""
    return bool(jit) and keras.backend.backend() in ("tensorflow", "jax")
