"""The one compiled-search cache of the inference wrappers, and the
compilation it caches (`compile_inference`)."""

import keras

from zoo.recipes import decoding


def compiled_search(
    model, beam, length_penalty, coverage_penalty=0.0, max_length=None, stopping="early"
):
    """Greedy (`beam=1`) or beam search of `model`, compiled as one function
    of the source batch (see `compile_inference`); `stopping` is beam
    search's rule (`decoding.beam_search`)."""
    if beam > 1:

        def search(source):
            return decoding.beam_search(
                model,
                source,
                beam_width=beam,
                length_penalty=length_penalty,
                coverage_penalty=coverage_penalty,
                max_length=max_length,
                stopping=stopping,
            )

    else:

        def search(source):
            return decoding.greedy_search(model, source, max_length=max_length)

    return compile_inference(search)


def batch_search(
    model, beam, length_penalty, coverage_penalty=0.0, max_length=None, stopping="early"
):
    """The search the translators and captioners run on a batch:
    `compiled_search`, except beam search on TensorFlow and torch, which
    runs in compiled chunks of steps between which the examples that are
    done leave the batch (`decoding.ChunkedBeamSearch`, same results). Under
    `jax.jit` each smaller batch would compile again, so JAX keeps the one
    compiled loop."""
    if beam > 1 and keras.backend.backend() != "jax":
        return decoding.ChunkedBeamSearch(
            model,
            beam,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
            max_length=max_length,
            stopping=stopping,
            compile=compile_inference,
        )
    return compiled_search(model, beam, length_penalty, coverage_penalty, max_length, stopping)


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


class SearchCache:
    """Mixin of the inference wrappers: `cached_search` builds the search of
    `self.model` for a setting once and reuses it, since a compiled search
    traces (and compiles) again each time it is built.

    The wrapper's `__init__` sets `self._searches = {}`. A subclass whose
    model needs another search sets `make_search`, a function `(model,
    beam, length_penalty, coverage_penalty, max_length, stopping=...)`
    returning a function of the source batch.
    """

    make_search = staticmethod(batch_search)

    def cached_search(
        self, beam, length_penalty, coverage_penalty=0.0, max_length=None, stopping="early"
    ):
        key = (beam, length_penalty, coverage_penalty, max_length, stopping)
        if key not in self._searches:
            self._searches[key] = self.make_search(
                self.model, beam, length_penalty, coverage_penalty, max_length, stopping=stopping
            )
        return self._searches[key]
