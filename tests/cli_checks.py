"""Shared helpers of the command-line tests."""

from zoo import cli


def run_cli(capsys, *argv):
    """Runs `zoo ARGV` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, *words):
    """A user mistake: exit status 2 and one line naming `words`, no traceback."""
    assert code == cli.USER_ERROR
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err}"
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0]


def train_keeping_the_model(out, preset, *options):
    """Runs `zoo train PRESET --out OUT OPTIONS` in-process; returns `out`,
    the model that training held in memory when it saved its final weights,
    and a copy of those weights taken then (to compare a reloaded run with)."""
    import pytest

    from zoo import runs

    held = {}
    save_weights = runs.save_weights

    def recording(model, path):
        if path.name == runs.WEIGHTS:
            held["model"], held["weights"] = model, [w.copy() for w in model.get_weights()]
        return save_weights(model, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "save_weights", recording)
        # The held model computes in the training's precision and a reloaded
        # run in float32, so they train in float32 even where `zoo train`
        # would pick bfloat16.
        argv = ["train", preset, "--out", str(out), "--mixed-precision", "float32", *options]
        code = cli.main(argv)
    assert code == 0
    return out, held["model"], held["weights"]


def untrained_rnnsearch_run(out, vocabulary_size, search=None, **training_overrides):
    """A complete, untrained, tiny `rnnsearch_small` run at `out`, with
    WordPiece vocabularies learned from 300 synthetic pairs (and `search`,
    the search settings it decodes with by default, if given)."""
    from zoo import data
    from zoo.data.wordpiece_tokenizer import TextTokenizer
    from zoo.training import untrained as training

    pairs = data.synthetic_splits(300, 0, 0)["train"]
    return training.write_untrained_run(
        out,
        "rnnsearch_small",
        TextTokenizer.train([t for _, t in pairs], vocabulary_size),
        TextTokenizer.train([s for s, _ in pairs], vocabulary_size),
        model_overrides={
            "embedding_dim": 6, "hidden_dim": 8, "attention_units": 5, "maxout_units": 4
        },
        training_overrides=training_overrides,
        search=search,
    )


def options_reaching_training(capsys, monkeypatch, *argv):
    """Runs `zoo ARGV` (a `train` command) with `training.train` replaced by
    a recorder; returns the settings of the `TrainingConfig` it received
    and its keyword options, in one dict."""
    from zoo.training import loop as training

    received = {}

    def record(preset, out, config, **options):
        received.update(config.to_dict(), **options)
        raise training.TrainingError("recorded")

    monkeypatch.setattr(training, "train", record)
    code, _, err = run_cli(capsys, *argv)
    assert_one_line_error(code, err, "recorded")
    return received
