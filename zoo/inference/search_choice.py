"""Which search decodes a batch, compiled: `choose_search` picks greedy
search, beam search as one compiled loop, or beam search in compiled chunks
(`zoo.recipes.decoding`) for a `SearchSettings`, and keeps it in the
caller's cache; `compile_inference` is the compilation."""

import keras

from zoo.recipes import decoding


def choose_search(model, settings, cache=None, one_loop=False):
    """The search of `model` for `settings` (a `SearchSettings`), a function
    of the source batch returning a `DecodeResult`.

    - `beam == 1`: `decoding.greedy_search`, compiled (`compile_inference`).
    - Beam search on TensorFlow and torch: `decoding.ChunkedBeamSearch`,
      compiled chunks of steps between which the examples that are done
      leave the batch (same results as one loop). Under `jax.jit` each
      smaller batch would compile again, so JAX, and a caller that needs
      one graph (`one_loop`: the SavedModel export), get
      `decoding.beam_search` compiled as one loop.

    A compiled search traces (and compiles) again each time it is built, so
    a caller that searches more than once passes a `cache` dict of its own,
    which keeps each search under its `settings.search_key` and hands it
    back.
    """
    key = settings.search_key
    if cache is not None and key in cache:
        return cache[key]
    if settings.beam == 1:
        search = compile_inference(
            lambda source: decoding.greedy_search(model, source, max_length=settings.max_length)
        )
    elif one_loop or keras.backend.backend() == "jax":
        arguments = settings.beam_search_arguments()
        search = compile_inference(lambda source: decoding.beam_search(model, source, **arguments))
    else:
        search = decoding.ChunkedBeamSearch(
            model, **settings.beam_search_arguments(), compile=compile_inference
        )
    if cache is None:
        return search
    cache[key] = search
    return cache[key]  # as kept: a cache may wrap what it keeps (`zoo bench decode --run`)


def compile_inference(function):
    """`function` compiled to one graph where the backend can (TF, JAX).

    Decoding is a `while_loop` of small steps: run eagerly, each step pays
    Python and dispatch overhead; compiled, the loop runs in the runtime.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, reduce_retracing=True)
    if backend == "jax":
        import jax

        return jax.jit(function)
    return function
