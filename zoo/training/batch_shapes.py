"""How many batch shapes a train step compiled per shape sees in an epoch
of a preset's data (`zoo bench train` weighs XLA's compilations with it)."""

import collections
import functools
import tempfile
from pathlib import Path

from zoo import registry
from zoo.tasks import task_for


def compiled_batch_shapes(preset):
    """How a train step compiled per batch shape sees `preset`'s training
    data on TensorFlow (batches padded to fixed shapes, see `train`).

    Returns:
        `(shapes, batches)`: the number of distinct batch shapes in one
        epoch, and the number of batches in it.
    """
    settings = registry.get_preset(preset)
    # Presets that share their training settings share the answer: `zoo bench
    # train` asks for every preset, and each answer builds the data anew.
    return _compiled_batch_shapes(task_for(settings), settings["training"])


@functools.lru_cache(maxsize=None)
def _compiled_batch_shapes(task, training):
    import tensorflow as tf

    training = task.settled(training)
    splits = task.load_splits(training)
    with tempfile.TemporaryDirectory() as folder:
        epoch = task.prepare_data(training, splits, Path(folder), fixed_shapes=True).train_data(None)
        shapes = collections.Counter(
            tuple(tuple(tensor.shape) for tensor in tf.nest.flatten(batch)) for batch in epoch
        )
    return len(shapes), sum(shapes.values())
