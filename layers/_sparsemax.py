"""Sparsemax with a mask: the sparse alternative to the attention softmax."""

import keras
import numpy as np
from keras import ops

# The lowest finite float32: where it replaces a masked score, the row max
# ignores that position, and a fully masked row stays finite.
_FLOAT32_LOWEST = float(np.finfo("float32").min)


def masked_sparsemax(scores, mask=None, axis=-1):
    """Sparsemax over `axis`, in which a masked position gets exactly zero.

    Sparsemax (Martins and Astudillo, 2016) is the Euclidean projection of
    the scores `z` onto the probability simplex: `max(z_i - tau(z), 0)`,
    with the threshold `tau` chosen so that the weights sum to one. Unlike
    softmax it gives exactly zero to every score more than `tau` below the
    others, so an attention row can be sparse. It is invariant to adding a
    constant to every score of a row, as softmax is.

    A row whose positions are all masked gets all-zero weights, never NaN or
    Inf, in every float dtype. The computation is in float32 and the result
    is cast back to the scores' dtype, so that float16 and bfloat16 keep
    their precision. Its gradient is the paper's Jacobian
    `diag(s) - s s^T / |S|` (s the indicator of the support S), which the
    backend's autodiff gives through the sort.

    `keras.ops.sparsemax` is not used: up to Keras 3.15.1 its threshold sums
    the cumulative sums over the support instead of taking the last one, so
    its weights do not sum to one when more than one score is in the support
    (keras-team/keras#23425, fixed by keras-team/keras#23469).

    Args:
        scores: float tensor of scores.
        mask: optional boolean tensor broadcastable to `scores`; `True` marks
            a position that may be attended to.
        axis: the axis to normalise over.

    Returns:
        A tensor of `scores`' shape and dtype.

    Example:

    >>> weights = masked_sparsemax(np.array([[2.0, 1.5, 0.1, 3.0]]),
    ...                            mask=np.array([[True, True, True, False]]))
    >>> keras.ops.convert_to_numpy(weights).round(2).tolist()
    [[0.75, 0.25, 0.0, 0.0]]

    References:
        - [Martins and Astudillo, 2016](https://arxiv.org/abs/1602.02068),
          algorithm 1 and equation 12.
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    z = ops.cast(scores, "float32")
    if mask is not None:
        mask = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(z))
        z = ops.where(mask, z, _FLOAT32_LOWEST)
    z = ops.moveaxis(z, axis, -1)
    descending = -ops.sort(-z, axis=-1)
    # tau >= max(z) - 1, so a score at or below max(z) - 2 gets zero and
    # leaves tau unchanged: clipping there changes no weight, keeps the
    # cumulative sums finite for masked (lowest-valued) scores, and, being
    # strictly below tau, puts no clipped score on the kink of max(z - tau, 0)
    # (whose gradient autodiff would split). The max is a constant for the
    # gradient because sparsemax is shift-invariant; it is read from the
    # sorted scores, as keras' `max` refuses an empty batch on tensorflow
    # and torch.
    top = ops.stop_gradient(descending[..., :1])
    z = ops.maximum(z - top, -2.0)
    descending = ops.maximum(descending - top, -2.0)
    # 1, 2, ..., n along the last axis, for a length known only at run time.
    rank = ops.cumsum(ops.ones_like(descending), axis=-1)
    in_support = 1.0 + rank * descending > ops.cumsum(descending, axis=-1)
    support_size = ops.sum(ops.cast(in_support, "float32"), axis=-1, keepdims=True)
    support_sum = ops.sum(ops.where(in_support, descending, 0.0), axis=-1, keepdims=True)
    tau = (support_sum - 1.0) / support_size
    weights = ops.moveaxis(ops.maximum(z - tau, 0.0), -1, axis)
    if mask is not None:
        # A fully masked row has every score at the same value and gets a
        # uniform row; the mask makes that row zero.
        weights = weights * ops.cast(mask, "float32")
    return ops.cast(weights, dtype)
