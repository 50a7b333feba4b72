"""Training: the loop (`loop`), its checkpoints and its distribution over devices.

The names of the strategies and precisions live here, Keras-free, so that
the command line's parser offers them without loading Keras.
"""

STRATEGIES = ("auto", "one-device", "mirrored", "multi-worker", "data-parallel")
PRECISIONS = ("bfloat16", "float16")
SCHEDULES = ("cosine", "inverse_sqrt")
