"""Keras' own MultiHeadAttention tests, run on our MultiHeadAttention.

`keras/src/layers/attention/multi_head_attention_test.py` ships in the Keras
wheel. Its test case is subclassed here, and while each test runs, the
`layers` its module reads is Keras' namespace with our class in place of
Keras' one, so every layer it builds (and subclasses, as keras-hub's
`CachedMultiHeadAttention` does) is ours. Every test of Keras 3.15's file
passes on the three backends; the two flash-attention tests skip themselves
on TensorFlow, as they do for Keras' layer.
"""

import types
from unittest import mock

from keras.src import layers as keras_layers
from keras.src.layers.attention import multi_head_attention_test as keras_suite

from zoo.layers import MultiHeadAttention

LAYERS_WITH_OURS = types.SimpleNamespace(
    **{name: getattr(keras_layers, name) for name in dir(keras_layers)}
)
LAYERS_WITH_OURS.MultiHeadAttention = MultiHeadAttention


class TestKerasSuiteOnOurMultiHeadAttention(keras_suite.MultiHeadAttentionTest):
    def setUp(self):
        super().setUp()
        patch = mock.patch.object(keras_suite, "layers", LAYERS_WITH_OURS)
        patch.start()
        self.addCleanup(patch.stop)

    def test_the_suite_builds_our_layer(self):
        layer = keras_suite.layers.MultiHeadAttention(num_heads=2, key_dim=2)
        self.assertIs(type(layer), MultiHeadAttention)
        self.assertTrue(hasattr(layer, "project_key_value"))
