"""keras-attention-zoo: attention layers, the papers' models, and the tools around them.

`zoo.layers` and `zoo.recipes` are backend-agnostic (keras only); the rest of
`zoo` (data pipelines, distribution, export) may use TensorFlow and says so.
"""

__version__ = "0.1.0"
