"""Plain NumPy versions of the papers' formulas, the ground truth of the tests."""

import numpy as np


def masked_softmax(scores, mask):
    """Softmax over the last axis; masked entries and fully masked rows are 0."""
    scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exp = np.where(mask, np.exp(scores - row_max), 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def masked_sparsemax(scores, mask):
    """Martins and Astudillo 2016, algorithm 1, row by row over the last axis:
    sort z descending, k(z) = max{k : 1 + k z_(k) > sum_{j<=k} z_(j)},
    tau = (sum_{j<=k(z)} z_(j) - 1) / k(z), p = max(z - tau, 0), over the
    unmasked entries only; masked entries and fully masked rows are 0."""
    scores = np.asarray(scores, "float64")
    mask = np.broadcast_to(mask, scores.shape)
    weights = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        valid = mask[index]
        z = scores[index][valid]
        if z.size == 0:
            continue
        descending = np.sort(z)[::-1]
        cumulative = np.cumsum(descending)
        k = np.arange(1, z.size + 1)
        support_size = k[1 + k * descending > cumulative].max()
        tau = (cumulative[support_size - 1] - 1) / support_size
        weights[index][valid] = np.maximum(z - tau, 0.0)
    return weights


# The distributions of the layers' `probability_fn`, by name.
PROBABILITY_FUNCTIONS = {"softmax": masked_softmax, "sparsemax": masked_sparsemax}


def lengths_to_mask(lengths, max_length):
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]


def random_inputs(batch=3, query_length=4, value_length=6, query_depth=5, value_depth=7, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, query_length, query_depth)).astype("float32")
    value = rng.normal(size=(batch, value_length, value_depth)).astype("float32")
    return query, value
