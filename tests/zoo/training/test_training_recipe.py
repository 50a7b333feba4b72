"""What the real-corpus presets train with: label smoothing, learning-rate
warm-up and decay, validation BLEU each epoch, the best checkpoint,
TensorBoard logs, checkpoint averaging, and the automatic precision.

The training side of zoo/ runs on TensorFlow's data pipeline, so these run
in the tensorflow process, except the loss, which trains on every backend."""

import math

import keras
import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import options_reaching_training
from cli_checks import run_cli
from tiny_configs import TINY

import zoo
from zoo import registry
from zoo import runs
from zoo.registry import build_model
from zoo.training import averaging
from zoo.training import distributed
from zoo.training import losses
from zoo.training import loop as training
from zoo.training.config import TrainingConfig
from zoo.training.schedules import learning_rate_schedule
from zoo.training import validation


def softmax_cross_entropy(logits, targets, smoothing, pad_id=0):
    """NumPy: the mean over non-pad tokens of -sum_k q_k log p_k, where
    q = (1 - e) one_hot + e / V."""
    logits = logits.astype(np.float64)
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    vocabulary = logits.shape[-1]
    q = (1 - smoothing) * np.eye(vocabulary)[targets] + smoothing / vocabulary
    per_token = -(q * log_p).sum(-1)
    is_token = targets != pad_id
    return per_token[is_token].sum() / is_token.sum()


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_is_the_smoothed_cross_entropy_over_the_tokens(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype("float32") * 3
    targets = np.array([[4, 5, 0, 0, 0], [1, 2, 3, 4, 5], [6, 0, 0, 0, 0]])
    loss = losses.TokenCrossentropy(label_smoothing=smoothing)(targets, logits)
    expected = softmax_cross_entropy(logits, targets, smoothing)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    config = losses.TokenCrossentropy(label_smoothing=smoothing).get_config()
    assert losses.TokenCrossentropy.from_config(config).label_smoothing == smoothing


@pytest.mark.tensorflow_only
def test_label_smoothing_out_of_range_names_the_value():
    with pytest.raises(ValueError, match="label_smoothing=1.0"):
        losses.TokenCrossentropy(label_smoothing=1.0)


def schedule_values(schedule, steps):
    return np.array([float(keras.ops.convert_to_numpy(schedule(step))) for step in steps])


@pytest.mark.tensorflow_only
def test_inverse_sqrt_schedule_peaks_at_the_rate_after_the_warm_up_and_round_trips():
    settings = TrainingConfig(learning_rate=1e-3, epochs=2, schedule="inverse_sqrt", warmup_steps=4)
    schedule = learning_rate_schedule(settings, batches_per_epoch=10)
    steps = np.arange(20)
    n = steps + 1.0  # the first update's step is 1
    expected = 1e-3 * math.sqrt(4) * np.minimum(n**-0.5, n * 4**-1.5)
    np.testing.assert_allclose(schedule_values(schedule, steps), expected, rtol=1e-6)
    assert schedule_values(schedule, [3])[0] == pytest.approx(1e-3)  # the 4th update: the peak
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    np.testing.assert_allclose(schedule_values(restored, steps), expected, rtol=1e-6)


@pytest.mark.tensorflow_only
def test_cosine_schedule_warms_up_linearly_then_decays_to_a_tenth():
    settings = TrainingConfig(learning_rate=2e-3, epochs=2, schedule="cosine", warmup_steps=5)
    schedule = learning_rate_schedule(settings, batches_per_epoch=10)
    steps = np.arange(25)
    decay = np.clip(steps - 5, 0, 15) / 15
    expected = np.where(
        steps < 5, 2e-3 * steps / 5, 2e-3 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * decay)))
    )
    np.testing.assert_allclose(schedule_values(schedule, steps), expected, rtol=1e-5, atol=1e-9)


@pytest.mark.tensorflow_only
def test_a_continued_cosine_schedule_goes_on_at_its_floor_instead_of_restarting():
    # `zoo train --continue` from 2 to 4 epochs keeps the first 2 epochs' schedule.
    first = TrainingConfig(learning_rate=2e-3, epochs=2, schedule="cosine")
    continued = first.overridden(epochs=4, schedule_epochs=2)
    first_values = schedule_values(learning_rate_schedule(first, 10), range(40))
    continued_values = schedule_values(learning_rate_schedule(continued, 10), range(40))
    np.testing.assert_array_equal(continued_values, first_values)
    np.testing.assert_allclose(continued_values[20:], 2e-3 / 10, rtol=1e-6)


@pytest.mark.tensorflow_only
def test_no_warm_up_keeps_the_cosine_decay_the_small_presets_trained_with():
    settings = registry.get_preset("rnnsearch_small")["training"]
    schedule = learning_rate_schedule(settings, batches_per_epoch=10)
    assert keras.optimizers.schedules.serialize(schedule)["config"] == {
        "initial_learning_rate": 1e-2, "decay_steps": 50, "alpha": 0.1, "name": "CosineDecay",
        "warmup_target": None, "warmup_steps": 0,
    }


@pytest.mark.tensorflow_only
def test_presets_train_with_what_their_corpus_needs():
    small = registry.get_preset("rnnsearch_small")["training"]
    assert (small.label_smoothing, small.warmup_steps, small.validation_bleu) == (0, 0, False)
    transformer = registry.get_preset("transformer_multi30k")["training"]
    assert transformer.label_smoothing == 0.1 and transformer.validation_bleu
    assert (transformer.schedule, transformer.warmup_steps) == ("cosine", 1000)
    assert (transformer.epochs, transformer.average_last) == (120, 10)
    # One joint vocabulary, embedded and projected by one matrix.
    assert (transformer.shared_vocabulary, transformer.vocabulary_size) == (True, 8000)
    assert registry.get_preset("transformer_multi30k")["model"]["share_all_embeddings"]
    rnnsearch = registry.get_preset("rnnsearch_multi30k")["training"]
    assert (rnnsearch.schedule, rnnsearch.epochs) == ("cosine", 20)


AMX_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n"
EPYC_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\nbugs\t\t: amx_bf16\n"


@pytest.mark.tensorflow_only
def test_automatic_precision_is_bfloat16_only_with_amx_bf16():
    assert distributed.automatic_precision(AMX_CPUINFO) == "bfloat16"
    # avx512_bf16 converts but has no matrix units; a flag outside "flags" doesn't count.
    assert distributed.automatic_precision(EPYC_CPUINFO) is None
    assert distributed.automatic_precision("") is None


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--label-smoothing", "1", ["--label-smoothing", "[0, 1)", "'1'"]),
        ("--warmup-steps", "-3", ["--warmup-steps", "'-3'"]),
        ("--schedule", "linear", ["--schedule", "'linear'"]),
        ("--seed", "-1", ["--seed", "'-1'"]),
        ("--learning-rate", "0", ["--learning-rate", "> 0", "'0'"]),
        ("--learning-rate", "inf", ["--learning-rate", "finite", "'inf'"]),
        ("--vocabulary-size", "0", ["--vocabulary-size", "'0'"]),
        # Checked by the flag too, as `TrainingConfig` checks it.
        ("--vocabulary-size", "4", ["an integer >= 5 (more than the 4 reserved tokens)", "'4'"]),
        ("--epochs", "two", ["--epochs", "positive integer", "'two'"]),
    ],
)
def test_bad_training_options_are_one_line_usage_errors(capsys, option, value, words):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(capsys, "train", "rnnsearch_small", option, value)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert all(word in error for word in words), error


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "options, words",
    [
        # Each flag passes its own parsing; together they are refused.
        (["--schedule", "inverse_sqrt"], ["inverse_sqrt", "warmup_steps"]),
        (["--epochs", "2", "--average-last", "3"], ["average_last 3", "2 epochs"]),
    ],
)
def test_settings_training_cannot_use_are_refused_before_training(tmp_path, capsys, options, words):
    code, _, err = run_cli(capsys, "train", "rnnsearch_small", *options, "--out", str(tmp_path / "r"))
    assert_one_line_error(code, err, *words)
    assert not (tmp_path / "r").exists()


@pytest.mark.tensorflow_only
def test_best_checkpoint_keeps_the_best_epoch_and_a_resumed_run_remembers_it(tmp_path):
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    best = validation.BestCheckpoint(tmp_path, "val_bleu")
    best.set_model(model)
    for epoch, bleu in enumerate([1.0, 3.0, 2.0]):
        model.set_weights([np.full((1, 1), bleu)])
        best.on_epoch_end(epoch, {"val_bleu": bleu})
    assert runs.read_json(tmp_path / runs.BEST_MANIFEST) == {
        "monitor": "val_bleu", "value": 3.0, "epochs_done": 2,
    }
    model.load_weights(tmp_path / runs.BEST_WEIGHTS)
    assert model.get_weights()[0][0, 0] == 3.0
    assert validation.BestCheckpoint(tmp_path, "val_bleu", epochs_done=3).best == 3.0
    # Resumed from before the best epoch: it is trained again, so not known yet.
    assert validation.BestCheckpoint(tmp_path, "val_bleu", epochs_done=1).best is None
    assert validation.BestCheckpoint(tmp_path, "val_loss", epochs_done=3).best is None


TINY_RUN = {
    "recipe": "rnnsearch",
    "description": "a tiny RNNsearch on a few synthetic pairs",
    "model": {**TINY["rnnsearch"], "dropout": 0.0},
    "training": {
        **registry.SMALL_TRAINING.to_dict(),
        "train_size": 64, "valid_size": 8, "test_size": 8, "vocabulary_size": 120,
        "batch_size": 16, "epochs": 2,
        "validation_bleu": True, "label_smoothing": 0.1,
        "schedule": "inverse_sqrt", "warmup_steps": 12, "average_last": 2,
    },
}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry.PRESETS, "tiny_run", TINY_RUN)
        out = training.train(
            "tiny_run", tmp_path_factory.mktemp("train") / "run", verbose=0, evaluate_test=False
        )
    return out


def scalars(folder):
    """{tag: [values]} of the TensorBoard event files in `folder`."""
    import tensorflow as tf

    found = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append(float(tf.make_ndarray(value.tensor)))
    return found


@pytest.mark.tensorflow_only
def test_training_logs_validation_bleu_keeps_the_best_and_writes_tensorboard(tiny_run):
    rows = (tiny_run / runs.HISTORY).read_text().splitlines()
    header = rows[0].split(",")
    assert {"loss", "val_loss", "val_bleu"} <= set(header) and len(rows) == 3
    bleus = [float(row.split(",")[header.index("val_bleu")]) for row in rows[1:]]
    assert all(0 <= bleu <= 100 for bleu in bleus)
    best = runs.read_json(tiny_run / runs.BEST_MANIFEST)
    assert best["monitor"] == "val_bleu" and best["value"] == max(bleus)
    assert best["epochs_done"] == 1 + bleus.index(max(bleus))
    assert (tiny_run / runs.BEST_WEIGHTS).is_file() and (tiny_run / runs.WEIGHTS).is_file()

    train = scalars(tiny_run / runs.TENSORBOARD / "train")
    valid = scalars(tiny_run / runs.TENSORBOARD / "validation")
    losses = [float(row.split(",")[header.index("loss")]) for row in rows[1:]]
    np.testing.assert_allclose(train["epoch_loss"], losses, rtol=1e-6)
    np.testing.assert_allclose(valid["epoch_bleu"], bleus, rtol=1e-6)
    assert len(valid["epoch_loss"]) == 2
    # The rate the optimizer holds after each epoch: the schedule at its step.
    n = 1.0 + np.array([
        runs.read_json(tiny_run / runs.CHECKPOINTS / f"epoch-0{epoch}.json")["optimizer_steps"]
        for epoch in (1, 2)
    ])
    assert n[0] <= 12 < n[1], "the epochs straddle the warm-up's end"
    expected = 1e-2 * math.sqrt(12) * np.minimum(n**-0.5, n * 12**-1.5)
    np.testing.assert_allclose(train["epoch_learning_rate"], expected, rtol=1e-5)


@pytest.mark.tensorflow_only
def test_average_of_the_last_checkpoints_is_their_mean_and_the_run_uses_it(tiny_run, capsys):
    config = runs.read_json(tiny_run / runs.CONFIG)

    def weights_of(path):
        model = build_model(config)
        model.load_weights(path)
        return model.get_weights()

    checkpoint_weights = [
        weights_of(tiny_run / runs.CHECKPOINTS / f"{name}.weights.h5")
        for name in ("epoch-01", "epoch-02")
    ]
    assert not np.array_equal(checkpoint_weights[0][0], checkpoint_weights[1][0])

    def assert_the_run_uses_their_mean():
        averaged = zoo.load(tiny_run).model.get_weights()
        for (first, second), actual in zip(zip(*checkpoint_weights), averaged, strict=True):
            expected = ((first.astype(np.float64) + second) / 2).astype(first.dtype)
            np.testing.assert_array_equal(actual, expected)

    # `average_last: 2` averaged the run's two epochs when training ended,
    # and kept the weights it ended with.
    assert_the_run_uses_their_mean()
    assert runs.read_json(tiny_run / runs.METRICS)["averaged_checkpoints"] == ["epoch-01", "epoch-02"]
    assert runs.read_json(tiny_run / averaging.AVERAGE_MANIFEST)["checkpoints"] == [
        "epoch-01", "epoch-02",
    ]
    trained = (tiny_run / averaging.UNAVERAGED_WEIGHTS).read_bytes()
    for ended, last_epoch in zip(
        weights_of(tiny_run / averaging.UNAVERAGED_WEIGHTS), checkpoint_weights[1], strict=True
    ):
        np.testing.assert_array_equal(ended, last_epoch)

    # `zoo average` again: the last one alone; the weights training ended
    # with are kept, not replaced by the earlier average.
    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "1")
    assert code == 0, err
    assert (tiny_run / averaging.UNAVERAGED_WEIGHTS).read_bytes() == trained
    np.testing.assert_array_equal(zoo.load(tiny_run).model.get_weights()[0], checkpoint_weights[1][0])

    # A failure while writing the average leaves the run's weights as they were.
    before = (tiny_run / runs.WEIGHTS).read_bytes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "save_weights", lambda model, path: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            averaging.average_run(tiny_run, 2)
    assert (tiny_run / runs.WEIGHTS).read_bytes() == before

    code, out, err = run_cli(capsys, "average", str(tiny_run), "--last", "2")
    assert code == 0, err
    assert "epoch-01, epoch-02" in out
    assert_the_run_uses_their_mean()

    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "3")
    assert_one_line_error(code, err, "2 intact epoch checkpoint", "--last 3")
    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "2", "--out", "x.h5")
    assert_one_line_error(code, err, ".weights.h5", "x.h5")
    # A file where --out's folder should be (as root, chmod would not stop a write).
    out = tiny_run / runs.CONFIG / "a.weights.h5"
    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "2", "--out", str(out))
    assert_one_line_error(code, err, "cannot write --out", str(out))


@pytest.mark.tensorflow_only
def test_averaging_more_checkpoints_than_epochs_is_refused_before_training(tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--epochs", "2", "--average-last", "3",
        "--out", str(tmp_path / "r"),
    )
    assert_one_line_error(code, err, "average_last 3", "2 epochs", "--average-last")
    assert not (tmp_path / "r").exists()


def settings_train_checks(monkeypatch, tmp_path, preset, **options):
    """The training settings `train(preset, **options)` checks before it
    trains (the training itself is stopped there)."""
    settings = {}
    settle_config = training.settle_config

    def stop_before_training(*arguments):
        settings.update(settle_config(*arguments).to_dict())
        raise InterruptedError

    monkeypatch.setattr(training, "settle_config", stop_before_training)
    with pytest.raises(InterruptedError):
        training.train(preset, tmp_path / "r", **options)
    return settings


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("epochs, average_last, expected", [(2, None, 2), (30, None, 10), (2, 1, 1)])
def test_a_presets_average_shrinks_to_a_shorter_run(monkeypatch, tmp_path, epochs, average_last, expected):
    settings = settings_train_checks(
        monkeypatch, tmp_path, "transformer_multi30k", epochs=epochs, average_last=average_last
    )
    assert settings["average_last"] == expected


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("seed, expected", [(None, 0), (7, 7)])
def test_the_seed_reaches_the_runs_settings(monkeypatch, tmp_path, seed, expected):
    settings = settings_train_checks(monkeypatch, tmp_path, "rnnsearch_small", seed=seed)
    assert settings.get("seed", 0) == expected


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_a_bad_seed_is_refused_before_training(tmp_path, seed):
    with pytest.raises(training.TrainingError, match="seed must be an int >= 0"):
        training.train("rnnsearch_small", tmp_path / "r", seed=seed)
    assert not (tmp_path / "r").exists()


@pytest.mark.tensorflow_only
def test_the_learning_rate_override_reaches_the_runs_settings(monkeypatch, tmp_path):
    preset_rate = registry.get_preset("transformer_multi30k")["training"].learning_rate
    settings = settings_train_checks(monkeypatch, tmp_path, "transformer_multi30k", learning_rate=5e-4)
    assert preset_rate != 5e-4 and settings["learning_rate"] == 5e-4


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("rate", [0, -1e-3, float("nan"), float("inf"), True, "1e-3"])
def test_a_bad_learning_rate_is_refused_before_training(tmp_path, rate):
    with pytest.raises(training.TrainingError, match="learning_rate must be a finite number > 0"):
        training.train("rnnsearch_small", tmp_path / "r", learning_rate=rate)
    assert not (tmp_path / "r").exists()


@pytest.mark.tensorflow_only
def test_the_vocabulary_size_override_reaches_the_runs_settings(monkeypatch, tmp_path):
    preset_size = registry.get_preset("transformer_multi30k")["training"].vocabulary_size
    settings = settings_train_checks(
        monkeypatch, tmp_path, "transformer_multi30k", vocabulary_size=6000
    )
    assert preset_size != 6000 and settings["vocabulary_size"] == 6000


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("size", [4, 0, 100.0, True])
def test_a_bad_vocabulary_size_is_refused_before_training(tmp_path, size):
    expected = r"vocabulary_size must be an int >= 5 \(more than the 4 reserved tokens\)"
    with pytest.raises(training.TrainingError, match=expected):
        training.train("rnnsearch_small", tmp_path / "r", vocabulary_size=size)
    assert not (tmp_path / "r").exists()


@pytest.mark.tensorflow_only
def test_shared_embeddings_without_a_shared_vocabulary_are_refused_before_training(
    monkeypatch, tmp_path
):
    settings = registry.get_preset("transformer_multi30k")
    settings["model"]["share_all_embeddings"] = True
    monkeypatch.setitem(registry.PRESETS, "tied_copy", settings)
    with pytest.raises(training.TrainingError, match="needs a shared vocabulary"):
        training.train("tied_copy", tmp_path / "r", shared_vocabulary=False)
    assert not (tmp_path / "r").exists()


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "flags, expected",
    [
        (
            [],
            # The preset's.
            dict(label_smoothing=0.0, learning_rate=1e-2, schedule="cosine", warmup_steps=0,
                 validation_bleu=False, average_last=0, mixed_precision="auto", seed=0,
                 vocabulary_size=1000),
        ),
        (["--mixed-precision", "float32"], dict(mixed_precision=None)),
        (["--mixed-precision", "bfloat16"], dict(mixed_precision="bfloat16")),
        (
            ["--label-smoothing", "0.2", "--schedule", "inverse_sqrt", "--warmup-steps", "40",
             "--no-validation-bleu", "--mixed-precision", "auto"],
            dict(label_smoothing=0.2, schedule="inverse_sqrt", warmup_steps=40,
                 validation_bleu=False, mixed_precision="auto"),
        ),
        (["--validation-bleu"], dict(validation_bleu=True)),
        (["--average-last", "5"], dict(average_last=5)),
        (["--seed", "3"], dict(seed=3)),
        (["--learning-rate", "5e-4"], dict(learning_rate=5e-4)),
        (["--vocabulary-size", "8000"], dict(vocabulary_size=8000)),
    ],
)
def test_training_flags_reach_training(capsys, monkeypatch, flags, expected):
    received = options_reaching_training(capsys, monkeypatch, "train", "rnnsearch_small", *flags)
    assert {key: received[key] for key in expected} == expected
