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


def lengths_to_mask(lengths, max_length):
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]


def random_inputs(batch=3, query_length=4, value_length=6, query_depth=5, value_depth=7, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, query_length, query_depth)).astype("float32")
    value = rng.normal(size=(batch, value_length, value_depth)).astype("float32")
    return query, value
