"""`TrainingConfig`: one typed place for every training setting, from which
`zoo train` makes its flags and config.json its "training"."""

import dataclasses
import json

import pytest

from cli_checks import run_cli
from tiny_configs import TINY

import zoo
from zoo import registry
from zoo import runs
from zoo.cli import train as train_command
from zoo.training import config
from zoo.training import loop as training
from zoo.training.config import TrainingConfig
from zoo.training.config import TrainingError
from zoo.training.config import setting


@dataclasses.dataclass(frozen=True)
class WithMadeUpSetting(TrainingConfig):
    """What adding a setting is: one `setting(...)` line."""

    made_up_setting: int = setting(3, "a setting the test makes up", least=1, metavar="N")


TINY_PRESET = {
    "recipe": "rnnsearch",
    "description": "a tiny RNNsearch on a few synthetic pairs",
    "model": {**TINY["rnnsearch"], "dropout": 0.0},
    "training": WithMadeUpSetting(
        **{
            **registry.SMALL_TRAINING.to_dict(),
            "train_size": 48, "valid_size": 8, "test_size": 0, "vocabulary_size": 60,
            "batch_size": 16, "epochs": 1,
        }
    ),
}


@pytest.fixture(scope="module")
def made_up_run(tmp_path_factory):
    """`zoo train --made-up-setting 7` of a tiny preset, with the setting
    added to `TrainingConfig` alone; returns the run and the value the
    training's optimizer step saw."""
    seen = []
    schedule = training.learning_rate_schedule

    def recording(settings, batches_per_epoch):
        seen.append(settings.made_up_setting)
        return schedule(settings, batches_per_epoch)

    out = tmp_path_factory.mktemp("made_up") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "TrainingConfig", WithMadeUpSetting)
        patch.setitem(registry.PRESETS, "tiny_made_up", TINY_PRESET)
        patch.setattr(training, "learning_rate_schedule", recording)
        help_text = train_command_help()
        code = zoo.cli.main(
            ["train", "tiny_made_up", "--made-up-setting", "7", "--out", str(out),
             "--mixed-precision", "float32"]
        )
    assert code == 0
    return out, seen, help_text


def train_command_help():
    import argparse

    parser = argparse.ArgumentParser()
    train_command.add_training_flags(parser)
    return parser.format_help()


@pytest.mark.tensorflow_only
def test_a_made_up_setting_is_a_flag_in_config_json_and_in_the_run(made_up_run):
    out, seen, help_text = made_up_run
    assert "--made-up-setting N" in help_text and "a setting the test makes up" in help_text
    assert json.loads((out / runs.CONFIG).read_text())["training"]["made_up_setting"] == 7
    assert seen == [7], "the training's steps did not get the setting"


@pytest.mark.tensorflow_only
def test_a_run_written_before_todays_settings_still_loads(made_up_run, tmp_path):
    out, _, _ = made_up_run
    old = tmp_path / "old"
    old.mkdir()
    for path in out.iterdir():
        if path.is_file() and path.name != runs.MANIFEST:
            (old / path.name).write_bytes(path.read_bytes())
    run_config = runs.read_json(old / runs.CONFIG)
    # As runs of weeks ago wrote it: fewer settings, and one since removed.
    run_config["training"] = {
        "data": "synthetic", "train_size": 48, "valid_size": 8, "test_size": 0,
        "vocabulary_size": 60, "batch_size": 16, "epochs": 1, "learning_rate": 1e-2,
        "max_length": 80, "tokenizer": "wordpiece", "optimizer": "adam",
    }
    runs.write_json(old / runs.CONFIG, run_config)
    translator = zoo.load(old)
    assert translator.max_source_length == 80
    assert translator.translate(["the dog sees a cat ."])[0].text is not None
    restored = config.of_run(run_config)
    assert (restored.average_last, restored.seed, restored.schedule) == (0, 0, "cosine")


def test_every_preset_holds_a_training_config():
    for name in registry.presets():
        assert isinstance(registry.get_preset(name)["training"], TrainingConfig), name


def test_a_config_round_trips_through_its_dict():
    transformer = registry.get_preset("transformer_multi30k")["training"]
    assert TrainingConfig.from_dict(json.loads(json.dumps(transformer.to_dict()))) == transformer


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"epochs": 0}, "epochs must be an int >= 1; received 0"),
        ({"epochs": 2.0}, "epochs must be an int >= 1"),
        ({"learning_rate": 0.0}, "learning_rate must be a finite number > 0"),
        ({"learning_rate": float("nan")}, "learning_rate must be a finite number > 0"),
        ({"label_smoothing": 1.0}, "label_smoothing must be in [0, 1)"),
        ({"schedule": "linear"}, "unknown schedule 'linear'; choose one of cosine, inverse_sqrt"),
        ({"tokenizer": "bpe"}, "unknown tokenizer 'bpe'"),
        ({"validation_bleu": 1}, "validation_bleu must be true or false"),
        ({"vocabulary_size": 4}, "vocabulary_size must be an int >= 5 (more than the 4 reserved"),
        ({"schedule": "inverse_sqrt"}, "inverse_sqrt schedule needs warmup_steps >= 1"),
        ({"average_last": 11}, "average_last 11 is more than the run's 10 epochs"),
        ({"batch_size": None}, "batch_size must be set"),
        (
            {"gradient_accumulation_steps": 0},
            "gradient_accumulation_steps must be an int >= 1; received 0",
        ),
        ({"early_stopping_patience": -1}, "early_stopping_patience must be an int >= 0"),
        ({"early_stopping_metric": "bleu"}, "unknown early_stopping_metric 'bleu'; choose one"),
        (
            {"early_stopping_patience": 2, "early_stopping_metric": "val_bleu"},
            "early_stopping_metric val_bleu needs the validation BLEU; pass --validation-bleu",
        ),
        ({"max_length_ratio": -1}, "max_length_ratio must be a finite number >= 0"),
        ({"max_length_ratio": 0.5}, "would leave out every pair"),
        ({"vocabulary_sample": 0}, "vocabulary_sample must be an int >= 1; received 0"),
        ({"shuffle_buffer": 0}, "shuffle_buffer must be an int >= 1; received 0"),
        ({"batch_tokens": 0}, "batch_tokens must be an int >= 1; received 0"),
        ({"batch_tokens": 40}, "batch_tokens 40 cannot hold a pair of max_length 80 tokens"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(settings, words):
    with pytest.raises(TrainingError) as error:
        TrainingConfig(**settings)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_an_unknown_setting_is_refused_but_dropped_from_a_runs_config():
    with pytest.raises(TrainingError, match="unknown training setting 'epoch'; the settings are"):
        TrainingConfig().overridden(epoch=3)
    with pytest.raises(TrainingError, match="unknown training setting 'epoch'"):
        TrainingConfig.from_dict({"epoch": 3})
    assert config.of_run({"training": {"epoch": 3, "epochs": 4}}).epochs == 4


def test_overriding_keeps_unset_values_and_shrinks_the_presets_average():
    transformer = registry.get_preset("transformer_multi30k")["training"]
    assert transformer.overridden(seed=None) == transformer
    assert transformer.overridden(epochs=4).average_last == 4
    assert transformer.overridden(epochs=4, average_last=2).average_last == 2
    with pytest.raises(TrainingError, match="--test-size applies to the synthetic data only"):
        transformer.overridden(test_size=100)


def test_the_reserved_token_count_is_the_contracts():
    from zoo.recipes.contract import SPECIAL_TOKENS

    assert config.RESERVED_TOKENS == len(SPECIAL_TOKENS)


def test_every_flagged_setting_is_a_zoo_train_flag_with_its_check(capsys):
    help_text = train_command_help()
    for field in config.flag_fields():
        assert "--" + field.name.replace("_", "-") in help_text, field.name
    with pytest.raises(SystemExit):
        run_cli(capsys, "train", "rnnsearch_small", "--clipnorm", "0")
    assert "--clipnorm: expected a finite number > 0, got '0'" in capsys.readouterr().err
