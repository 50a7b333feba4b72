"""zoo.training.distributed: strategies, one-device equivalence, multi-worker, mixed precision."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli

import zoo.registry
from zoo import cli
from zoo.training import distributed
from zoo.training import losses
from zoo import runs
from zoo.training import loop as training

HERE = Path(__file__).parent
REPOSITORY = HERE.parents[2]


def run_script(script, *arguments, env=None, timeout=300, backend="tensorflow"):
    """Runs a helper script of this folder in a process of `backend`; its
    `RESULT {json}` line, parsed."""
    result = subprocess.run(
        [sys.executable, str(HERE / script), *arguments],
        capture_output=True, text=True, timeout=timeout, cwd=REPOSITORY,
        env=dict(env or os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_cli_choices_are_the_modules():
    assert cli.train.STRATEGIES == distributed.STRATEGIES
    assert cli.train.PRECISIONS == distributed.PRECISIONS


def test_token_crossentropy_is_the_token_mean_on_one_device():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype("float32")
    targets = np.array([[4, 5, 0, 0, 0], [1, 2, 3, 4, 5], [6, 0, 0, 0, 0]])
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    expected = float(keras_loss(targets, logits))
    assert float(losses.TokenCrossentropy()(targets, logits)) == pytest.approx(expected, rel=1e-6)


def test_token_crossentropy_is_float32_on_half_precision_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 9)).astype("float16")
    targets = np.array([[1, 2, 0, 0], [3, 4, 5, 6]])
    loss = losses.TokenCrossentropy()(targets, keras.ops.convert_to_tensor(logits))
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    expected = losses.TokenCrossentropy()(targets, logits.astype("float32"))
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)


@pytest.mark.tensorflow_only
def test_mirrored_fit_and_custom_loop_match_one_device():
    # Replicas hold 4 and 28 target tokens a batch, and every step clips:
    # Keras' own per-replica mean, or clipping before the all-reduce, would
    # be off by about 1e-2 (see zoo.training.distributed).
    results = run_script("distributed_equivalence.py")
    assert results.pop("replicas") == 2
    # The custom loop (multi-worker's) with a replica's share empty in the
    # compiled step: it trains, and as one device does. (Its logged loss
    # differs: each replica averages its own shares, as `fit` does too.)
    empty_share = results.pop("empty_share")
    assert np.isfinite(empty_share["loss"]).all()
    assert empty_share["weight_difference"] < 1e-5
    assert set(results) == {"whole_epochs/fit", "whole_epochs/loop", "steps_per_epoch/loop"}
    for name, result in results.items():
        assert result["moved"] > 1e-2, name
        assert result["weight_difference"] < 1e-5, name
        assert result["iterations"] == result["one_device_iterations"], name
        assert result["events_match"], name
        assert result["history"].keys() == result["one_device_history"].keys(), name
        for key, values in result["history"].items():
            np.testing.assert_allclose(values, result["one_device_history"][key], rtol=1e-5)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def weights_by_name(path):
    import h5py

    with h5py.File(path, "r") as weights:
        found = {}
        weights.visititems(
            lambda name, item: found.__setitem__(name, np.asarray(item))
            if isinstance(item, h5py.Dataset) else None
        )
    return found


def one_device_batches(run):
    """The target rows of each global batch a one-device run of `run`'s
    settings trains on, epoch after epoch (the pipeline shuffles with the
    run's seed, so these are the batches it trained on)."""
    from zoo.tasks import task_for
    from zoo.training.config import of_run

    config = runs.read_json(run / runs.CONFIG)
    training_settings = of_run(config)
    task = task_for(config)
    task_data = task.prepare_data(training_settings, task.load_splits(training_settings), run)
    return [
        targets.numpy().tolist()
        for _, targets in task_data.train_data(range(training_settings.epochs))
    ]


@pytest.mark.tensorflow_only
def test_multi_worker_trains_together_and_only_the_chief_writes(tmp_path, monkeypatch):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    out = tmp_path / "run"
    workers = []
    for index in range(2):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        workers.append(subprocess.Popen(
            [sys.executable, str(HERE / "distributed_worker.py"), str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPOSITORY,
            env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3",
                     TF_CONFIG=config),
        ))
    results = []
    try:
        for worker in workers:
            stdout, stderr = worker.communicate(timeout=420)  # a hang fails, not blocks
            lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
            assert worker.returncode == 0 and lines, stderr[-3000:]
            results.append(json.loads(lines[-1][len("RESULT "):]))
    finally:
        for worker in workers:
            worker.kill()
    chief, other = results
    assert chief["weights"] == other["weights"]
    # Equal weights alone would also come from two workers that each
    # trained alone on all the data. Each worker trained on its half of
    # every global batch, and together they end where one device does.
    assert len(chief["batches"]) == len(other["batches"]) > 2
    for mine, theirs in zip(chief["batches"], other["batches"]):
        assert abs(len(mine) - len(theirs)) <= 1 and mine != theirs, (mine, theirs)
    monkeypatch.setitem(zoo.registry.PRESETS["rnnsearch_small"]["model"], "dropout", 0.0)
    one_device = training.train(
        "rnnsearch_small", tmp_path / "one-device", train_size=64, valid_size=16, epochs=2,
        batch_size=16, verbose=0, evaluate_test=False,
    )
    global_batches = one_device_batches(one_device)
    assert [mine + theirs for mine, theirs in zip(chief["batches"], other["batches"])] == global_batches
    two_workers, alone = weights_by_name(out / runs.WEIGHTS), weights_by_name(one_device / runs.WEIGHTS)
    assert two_workers.keys() == alone.keys()
    # Not bit for bit: the all-reduce sums the gradients in another order,
    # and Adam's division by sqrt(v) magnifies that over the 8 steps.
    for name, value in two_workers.items():
        np.testing.assert_allclose(value, alone[name], rtol=1e-4, atol=1e-5, err_msg=name)
    assert Path(chief["run"]) == out
    assert not Path(other["run"]).exists(), "the non-chief's directory was not deleted"
    for name in (runs.CONFIG, runs.WEIGHTS, runs.METRICS, "checkpoints/epoch-02.weights.h5"):
        assert (out / name).is_file(), name
    losses = [float(line.split(",")[1]) for line in (out / runs.HISTORY).read_text().splitlines()[1:]]
    assert len(losses) == 2 and losses[1] < losses[0]
    metrics = runs.read_json(out / runs.METRICS)
    assert (metrics["strategy"], metrics["replicas"]) == ("multi-worker", 2)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_mixed_precision_trains_with_a_finite_falling_loss(tmp_path, precision):
    # float16 runs under Keras' LossScaleOptimizer (dynamic loss scaling).
    out = training.train(
        "rnnsearch_small", tmp_path / "run", train_size=48, valid_size=16, epochs=2,
        batch_size=16, verbose=0, evaluate_test=False, mixed_precision=precision,
    )
    losses = [float(line.split(",")[1]) for line in (out / runs.HISTORY).read_text().splitlines()[1:]]
    assert len(losses) == 2 and np.isfinite(losses).all(), losses
    assert losses[-1] < losses[0], losses
    metrics = runs.read_json(out / runs.METRICS)
    assert metrics["precision"] == runs.read_json(out / runs.CONFIG)["precision"] == f"mixed_{precision}"
    assert (metrics["strategy"], metrics["replicas"]) == ("one-device", 1)
    assert keras.config.dtype_policy().name == "float32", "the global policy was not restored"


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="data-parallel is JAX's strategy")
def test_jax_data_parallel_trains_as_one_device():
    environment = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    result = run_script("data_parallel_worker.py", env=environment, backend="jax")
    assert result["devices"] == result["replicas"] == 2
    assert result["moved"] > 1e-2
    assert result["difference"] < 1e-5
    np.testing.assert_allclose(result["losses"], result["one_device_losses"], rtol=1e-5)


def test_float16_compiles_with_loss_scaling():
    from zoo.recipes.rnnsearch import RNNSearch

    with distributed.precision_policy("float16"):
        model = RNNSearch(10, 10, embedding_dim=4, hidden_dim=4, attention_units=4, maxout_units=2)
        model.compile(optimizer="adam", loss=losses.TokenCrossentropy())
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.dtype_policy.name == "mixed_float16"
    assert keras.config.dtype_policy().name == "float32"


def test_other_backends_strategy_is_one_line(capsys):
    name = "data-parallel" if keras.backend.backend() == "tensorflow" else "mirrored"
    code, _, err = run_cli(capsys, "train", "rnnsearch_small", "--strategy", name)
    assert_one_line_error(code, err, name, "KERAS_BACKEND")


@pytest.mark.tensorflow_only
def test_multi_worker_without_tf_config_is_one_line(capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    code, _, err = run_cli(capsys, "train", "rnnsearch_small", "--strategy", "multi-worker")
    assert_one_line_error(code, err, "TF_CONFIG")


WORKERS = {"worker": ["localhost:12345", "localhost:12346"]}


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "tf_config, words",
    [
        ([], ['must be a JSON object with "cluster" and "task"', "list"]),
        ({"cluster": WORKERS}, ['no "task"']),
        ({"cluster": WORKERS, "task": {"type": "worker", "index": 2}}, ["task index 2", "0 to 1"]),
        ({"cluster": "localhost:12345", "task": {"type": "worker", "index": 0}}, ['"cluster"']),
        ({"cluster": WORKERS, "task": {"type": "ps", "index": 0}}, ["task type 'ps'", "'worker'"]),
        ({"cluster": {**WORKERS, "ps": ["h:1"]}, "task": {"type": "worker", "index": 0}},
         ["task type 'ps'", "chief and worker"]),
    ],
)
def test_a_bad_tf_config_is_one_line_before_training(capsys, monkeypatch, tmp_path, tf_config, words):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    code, _, err = run_cli(
        capsys, "train", "rnnsearch_small", "--strategy", "multi-worker", "--out", str(tmp_path / "r"),
        "--train-size", "32", "--valid-size", "8", "--test-size", "0", "--epochs", "1",
    )
    assert_one_line_error(code, err, "TF_CONFIG", *words)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("option", ["--strategy", "--mixed-precision"])
def test_unknown_names_are_usage_errors(capsys, option):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "rnnsearch_small", option, "quantum"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'quantum'" in capsys.readouterr().err


def test_unknown_names_in_the_python_api():
    with pytest.raises(distributed.DistributionError, match="quantum"):
        distributed.make_strategy("quantum")
    with pytest.raises(distributed.DistributionError, match="float8"):
        distributed.check_precision("float8")
