"""`zoo bench train`: every recipe's step timed at the tiniest size, and the
weighing of XLA's faster steps against its compilation per batch shape."""

import math

import keras
import pytest
from bench_checks import check_every_case_is_timed

from zoo.bench import training
from zoo.bench.timing import Case
from zoo.bench.timing import Timing


# On TensorFlow the suite also compiles every preset's step with XLA and
# times a new batch shape's compilation, too slow for the suite even at this
# size: it runs in the jax and torch processes here, and `zoo bench train`
# itself on TensorFlow.
@pytest.mark.skipif(
    keras.backend.backend() == "tensorflow",
    reason="its XLA comparison compiles every preset; runs on jax and torch",
)
def test_the_train_suite_times_every_recipe(tmp_path):
    rows, _ = check_every_case_is_timed(
        "train", tmp_path, len(training.TRANSLATION_PRESETS) + 1
    )
    assert [row[1].split()[0] for row in rows] == [
        *training.TRANSLATION_PRESETS,
        training.CAPTIONING_PRESET,
    ]
    for row in rows:
        assert row[7].endswith(("target tokens/s", "images/s")), row


def _xla_case(preset, xla_seconds, plain_seconds, new_shape_xla, steps_per_shape):
    return Case(
        "train",
        f"{preset} train_on_batch: XLA vs no XLA",
        "B=64",
        "jit_compile=True (XLA) vs False (tf.function)",
        Timing([xla_seconds]),
        Timing([plain_seconds]),
        note="1 vs 2 target tokens/s",
        details={
            "preset": preset,
            "new_shape_first_step": {"xla": new_shape_xla, "no_xla": 0.2},
            "steps_per_shape": steps_per_shape,
        },
    )


@pytest.mark.parametrize(
    "steps_per_shape, xla_pays",
    [(40, False), (10_000, True)],
    ids=["few-steps-per-shape", "many-steps-per-shape"],
)
def test_xla_is_weighed_by_its_compilation_per_shape_against_its_faster_steps(
    steps_per_shape, xla_pays
):
    # 0.1 s saved per step against 14.8 s more per shape: repaid after 148 steps.
    case = _xla_case("transformer_small", 0.2, 0.3, 15.0, steps_per_shape)
    training.weigh_xla(case, log=lambda message: None)
    default = training.preset_jit_compile("transformer_small")
    assert case.details["xla_repaid_after_steps"] == pytest.approx(148)
    assert case.details["xla_faster_in_training"] is xla_pays
    assert case.details["default_jit_compile"] is default
    assert case.note.startswith("1 vs 2 target tokens/s; XLA repaid after 148 steps")
    agrees = "agrees" if default == xla_pays else "DISAGREES"
    assert case.note.endswith(f"default jit_compile={default} {agrees}")


def test_slower_xla_steps_never_repay_its_compilation():
    slower = _xla_case("rnnencdec_small", 0.3, 0.2, 9.0, 10_000)
    assert math.isinf(training.xla_repaid_after(slower))
    training.weigh_xla(slower, log=lambda message: None)
    assert slower.details["xla_repaid_after_steps"] is None
    assert slower.details["xla_faster_in_training"] is False
    assert "XLA never repaid (slower steps)" in slower.note


def test_mixed_precision_is_timed_against_float32():
    from zoo.bench.sizes import SIZES
    from zoo.bench.sizes import tokens
    from zoo.bench.sizes import translation_model
    from zoo.bench.timing import Runner

    size = SIZES["tiny"]
    runner = Runner(size, warmup=0, repeats=1, log=lambda line: None, mixed_precision="bfloat16")
    target = tokens((2, 4), size.vocabulary_size, seed=1)
    inputs = {"source": tokens((2, 3), size.vocabulary_size), "target_in": target[:, :-1]}
    training._bench_train_step(
        runner, "rnnencdec_small", lambda: translation_model("rnnencdec_small", size),
        inputs, target[:, 1:], "tiny", items=6, unit="target tokens/s",
    )
    (case,) = runner.cases
    assert case.name == "rnnencdec_small train_on_batch: mixed_bfloat16 vs float32"
    assert case.details["compute_dtypes"] == ["bfloat16", "float32"]
    assert case.ours.median > 0 and case.reference.median > 0
    assert case.note.endswith("target tokens/s")
    assert keras.config.dtype_policy().name == "float32"
