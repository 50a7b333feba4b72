"""Backend-agnostic attention layers for Keras 3.

Each layer uses only `keras` (and numpy), so it runs on the tensorflow, jax
and torch backends, and importing this package loads none of them itself.
"""

from zoo.layers._sparsemax import masked_sparsemax
from zoo.layers.additive_attention import AdditiveAttention
from zoo.layers.attention_decoder import AttentionDecoder
from zoo.layers.bahdanau_decoder import BahdanauDecoder
from zoo.layers.bahdanau_monotonic_attention import BahdanauMonotonicAttention
from zoo.layers.base_attention import BaseAttention
from zoo.layers.base_attention import masked_softmax
from zoo.layers.gnmt_decoder import GNMTDecoder
from zoo.layers.local_attention import LocalAttention
from zoo.layers.luong_attention import LuongAttention
from zoo.layers.luong_decoder import LuongDecoder
from zoo.layers.luong_monotonic_attention import LuongMonotonicAttention
from zoo.layers.multi_head_attention import MultiHeadAttention
from zoo.layers.spatial_soft_attention import SpatialSoftAttention
from zoo.layers.spatial_soft_attention import doubly_stochastic_penalty

__all__ = [
    "AdditiveAttention",
    "AttentionDecoder",
    "BahdanauDecoder",
    "BahdanauMonotonicAttention",
    "BaseAttention",
    "GNMTDecoder",
    "LocalAttention",
    "LuongAttention",
    "LuongDecoder",
    "LuongMonotonicAttention",
    "MultiHeadAttention",
    "SpatialSoftAttention",
    "doubly_stochastic_penalty",
    "masked_softmax",
    "masked_sparsemax",
]
