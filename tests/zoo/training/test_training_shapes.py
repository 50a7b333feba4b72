"""The batch shapes a compiled (XLA) train step sees, from `zoo.training.batch_shapes`."""

import pytest

from zoo import registry
from zoo.training import batch_shapes as training

pytestmark = pytest.mark.tensorflow_only  # tf.data


@pytest.mark.parametrize("preset", ["transformer_small", "show_attend_tell_small"])
def test_compiled_batch_shapes_counts_one_epoch(monkeypatch, preset):
    settings = registry.get_preset(preset)
    small = settings["training"].overridden(train_size=150, valid_size=10, test_size=10)
    monkeypatch.setitem(registry.PRESETS, "small_copy", {**settings, "training": small})

    shapes, batches = training.compiled_batch_shapes("small_copy")

    batch_size = small.batch_size
    if preset == "show_attend_tell_small":
        # Captions padded to the most steps: full batches and the last one.
        captions = 150 * 5
        assert batches == -(-captions // batch_size)
        assert shapes == (1 if captions % batch_size == 0 else 2)
    else:
        # Length buckets 8 tokens wide, padded to their boundary, and each
        # bucket's last batch filled up to its size: one shape per bucket.
        buckets = small.max_length // 8 + 2
        assert 1 <= shapes <= min(buckets, batches)
        assert batches >= -(-150 // batch_size)
