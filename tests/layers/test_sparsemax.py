"""masked_sparsemax against the paper's algorithm, its Jacobian and its properties."""

import keras
import numpy as np
import pytest
from keras import ops
from layer_checks import to_numpy
from layer_checks import vector_jacobian_product
from numpy_reference import lengths_to_mask
from numpy_reference import masked_sparsemax as reference_sparsemax

from zoo.layers import masked_sparsemax

# Of the output cast back to its dtype: float16 keeps about 3 decimal
# digits, bfloat16 about 2.
TOLERANCE = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def scores_and_mask(seed=0):
    """Scores `[3, 4, 7]` spread widely enough that most rows are sparse, and
    a source mask in which the second example has nothing to attend to."""
    scores = 1.5 * np.random.default_rng(seed).normal(size=(3, 4, 7)).astype("float32")
    mask = np.broadcast_to(lengths_to_mask([7, 0, 3], 7)[:, None, :], scores.shape)
    return scores, mask


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_matches_the_papers_algorithm(dtype):
    scores, mask = scores_and_mask()
    scores = ops.cast(scores, dtype)
    weights = masked_sparsemax(scores, mask)
    assert keras.backend.standardize_dtype(weights.dtype) == dtype
    # The reference sees the same (rounded) scores.
    expected = reference_sparsemax(to_numpy(ops.cast(scores, "float32")), mask)
    weights = to_numpy(weights).astype("float32")
    np.testing.assert_allclose(weights, expected, rtol=0, atol=TOLERANCE[dtype])
    assert np.all(weights[~mask] == 0), "a masked position got weight"


def test_weights_sum_to_one_over_the_valid_positions_and_are_sparse():
    scores, mask = scores_and_mask(seed=1)
    weights = to_numpy(masked_sparsemax(scores, mask))
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights[[0, 2]].sum(-1), 1.0, rtol=1e-6)
    assert np.all(weights[1] == 0), "a fully masked row got weight"
    zeros_in_valid = (weights == 0) & mask
    assert np.any(zeros_in_valid), "no valid position got exactly zero: not sparse"
    support = (weights > 0).sum(-1)
    assert np.any(support[[0, 2]] > 1), "every row is one-hot: an argmax, not sparsemax"


def test_two_scores_give_the_papers_closed_form():
    # sparsemax([t, 0]) = [p, 1 - p], p = 0 below t = -1, (1 + t) / 2 between,
    # 1 above t = 1 (Martins and Astudillo 2016, section 2.2).
    t = np.linspace(-2.0, 2.0, 17).astype("float32")
    scores = np.stack([t, np.zeros_like(t)], axis=-1)
    weights = to_numpy(masked_sparsemax(scores))
    first = np.clip((1.0 + t) / 2.0, 0.0, 1.0)
    np.testing.assert_allclose(weights, np.stack([first, 1.0 - first], -1), atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_rows_give_zeros_not_nan_even_at_extreme_scores(dtype):
    scores = ops.cast(
        np.array(
            [[3.0, -2.0, 60000.0], [1.0, 2.0, 3.0], [-6e4, 0.0, 6e4], [-6e4, -6e4, 9.0]]
        ),
        dtype,
    )
    mask = np.array([[True, True, False], [False, False, False], [True, True, True], [True, True, False]])
    weights = to_numpy(masked_sparsemax(scores, mask)).astype("float32")
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[0], [1.0, 0.0, 0.0])
    assert np.all(weights[1] == 0)
    np.testing.assert_allclose(weights[2], [0.0, 0.0, 1.0])
    np.testing.assert_allclose(weights[3], [0.5, 0.5, 0.0])


def test_gradient_is_the_papers_jacobian():
    # J = diag(s) - s s^T / |S| with s the support indicator (section 2.3);
    # it is symmetric, so the vector-Jacobian product is J g. A masked
    # position, and every position of a fully masked row, gets zero gradient.
    scores, mask = scores_and_mask(seed=2)
    cotangent = np.random.default_rng(3).normal(size=scores.shape)
    gradient = vector_jacobian_product(lambda x: masked_sparsemax(x, mask), scores, cotangent)
    support = (reference_sparsemax(scores, mask) > 0).astype("float64")
    size = np.maximum(support.sum(-1, keepdims=True), 1.0)
    expected = support * cotangent - support * (support * cotangent).sum(-1, keepdims=True) / size
    np.testing.assert_allclose(gradient, expected, rtol=1e-5, atol=1e-6)
    assert np.all(gradient[~mask] == 0)
    assert np.any(np.abs(gradient) > 0.1)


def test_axis_normalises_along_that_axis():
    scores, mask = scores_and_mask(seed=4)
    along_last = to_numpy(masked_sparsemax(np.swapaxes(scores, 1, 2), np.swapaxes(mask, 1, 2)))
    along_middle = to_numpy(masked_sparsemax(scores, mask, axis=1))
    np.testing.assert_allclose(np.swapaxes(along_middle, 1, 2), along_last, atol=1e-7)


def compiled_for_any_shape(function):
    """`function(scores, mask)` traced once for any batch and length
    (TensorFlow), or compiled per shape (JAX)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        signature = [tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None], tf.bool)]
        return tf.function(function, input_signature=signature, jit_compile=True)
    import jax

    return jax.jit(function)


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="torch runs eagerly, nothing is traced")
def test_compiled_with_lengths_unknown_when_traced():
    compiled = compiled_for_any_shape(masked_sparsemax)
    for batch, length in ((2, 5), (3, 9)):
        scores = np.random.default_rng(length).normal(size=(batch, length)).astype("float32")
        mask = lengths_to_mask(np.arange(batch) + length - batch, length)
        np.testing.assert_allclose(
            to_numpy(compiled(scores, mask)), reference_sparsemax(scores, mask), atol=1e-6
        )


def test_an_empty_batch_gives_empty_weights():
    # A worker's share of a short last batch under multi-worker training.
    weights = masked_sparsemax(np.zeros((0, 3, 5), "float32"), np.ones((0, 1, 5), bool))
    assert tuple(weights.shape) == (0, 3, 5)
