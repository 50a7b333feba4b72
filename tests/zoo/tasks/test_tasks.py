"""zoo.tasks: the Task objects, their lookup and the run-directory check."""

import json
import logging

import numpy as np
import pytest

from zoo import registry
from zoo import runs
from zoo.errors import ZooUserError
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import check_run_directory
from zoo.tasks import task_for
from zoo.tasks import write_run_manifest
from zoo.training.config import TrainingConfig

pytestmark = pytest.mark.backend_independent


def test_every_preset_has_the_task_of_its_recipe():
    for name in registry.presets():
        preset = registry.get_preset(name)
        expected = registry.task_of(preset["recipe"])
        assert task_for(preset).name == expected, name
        assert task_for(expected) is task_for(preset)


def test_a_config_or_manifest_names_its_task():
    assert task_for({"task": "captioning", "recipe": "rnnsearch"}) is CAPTIONING
    assert task_for({"task": "translation"}) is TRANSLATION
    assert task_for({}) is TRANSLATION


def test_each_task_knows_its_run_files_and_command():
    old_run = {"training": {"data": "multi30k"}}  # before "tokenizer" was written
    assert TRANSLATION.run_files(old_run) == (
        runs.CONFIG, runs.SOURCE_VOCABULARY, runs.TARGET_VOCABULARY, runs.WEIGHTS
    )
    assert CAPTIONING.run_files({}) == (runs.CONFIG, runs.TARGET_VOCABULARY, runs.WEIGHTS)
    sentencepiece = {"training": {"tokenizer": "sentencepiece"}}
    assert TRANSLATION.run_files(sentencepiece) == (
        runs.CONFIG, "source.model", "target.model", runs.WEIGHTS
    )
    shared = {"training": {"tokenizer": "sentencepiece", "shared_vocabulary": True}}
    assert TRANSLATION.vocabulary_files(shared) == {
        "source": "shared.model", "target": "shared.model"
    }
    assert TRANSLATION.run_files(shared) == (runs.CONFIG, "shared.model", runs.WEIGHTS)
    assert (TRANSLATION.command, CAPTIONING.command) == ("translate", "caption")


@pytest.mark.parametrize(
    "training, tokenizer, expected",
    [
        ({"data": "synthetic"}, None, "wordpiece"),
        ({"data": "train.en,train.de"}, None, "sentencepiece"),
        ({"data": "synthetic", "tokenizer": "sentencepiece"}, None, "sentencepiece"),
        ({"data": "multi30k", "tokenizer": "sentencepiece"}, "wordpiece", "wordpiece"),
    ],
)
def test_translation_tokenizer_defaults_to_sentencepiece_on_a_real_corpus(
    training, tokenizer, expected
):
    config = TrainingConfig(**training).overridden(tokenizer=tokenizer)
    settled = TRANSLATION.settled(config)
    assert settled.tokenizer == expected and settled.shared_vocabulary is False
    assert TRANSLATION.settled(config.overridden(shared_vocabulary=True)).shared_vocabulary


def test_captioning_refuses_sentencepiece_in_one_line():
    assert CAPTIONING.settled(TrainingConfig(data="flickr8k")).tokenizer == "wordpiece"
    with pytest.raises(ZooUserError, match="captioning run trains wordpiece.*'sentencepiece'"):
        CAPTIONING.settled(TrainingConfig(data="synthetic", tokenizer="sentencepiece"))


def test_open_passes_the_tokenizers_in_the_wrapper_order():
    def wrapper(*arguments):
        return arguments

    tokenizers = {"source": "S", "target": "T"}
    assert TRANSLATION.open("M", tokenizers, "C", wrapper=wrapper) == ("M", "S", "T", "C")
    assert CAPTIONING.open("M", tokenizers, "C", wrapper=wrapper) == ("M", "T", "C")


@pytest.mark.parametrize("task", [TRANSLATION, CAPTIONING])
def test_run_directory_check_names_the_missing_files_of_its_task(tmp_path, task):
    (tmp_path / runs.CONFIG).write_text(json.dumps({"task": task.name}))
    with pytest.raises(runs.RunDirectoryError, match="incomplete") as error:
        check_run_directory(tmp_path)
    files = task.run_files({"task": task.name})
    assert str(error.value).endswith(
        f"missing {', '.join(files[1:])} (did its training finish?)"
    )
    for name in files[1:]:
        (tmp_path / name).write_text("")
    assert check_run_directory(tmp_path) == tmp_path


def test_a_missing_run_directory_is_refused(tmp_path):
    with pytest.raises(runs.RunDirectoryError, match="does not exist"):
        check_run_directory(tmp_path / "none")


def _finished_run(folder):
    """A translation run directory with stand-in files and its manifest."""
    (folder / runs.CONFIG).write_text(json.dumps({"task": "translation", "recipe": "rnnsearch"}))
    for name in TRANSLATION.run_files({})[1:]:
        (folder / name).write_bytes(bytes(range(256)) * 8)
    write_run_manifest(folder)
    return folder


def _truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def _random_bytes_inside(path):
    # 512 of the 2048 bytes kept, then 4096 random ones: 4608 bytes.
    data = bytearray(path.read_bytes())
    data[512:] = np.random.default_rng(0).bytes(4096)
    path.write_bytes(bytes(data))


def _values_overwritten_in_place(path):
    with open(path, "r+b") as file:
        file.seek(1000)
        file.write(b"\x00" * 8)


@pytest.mark.parametrize(
    "name, damage, says",
    [
        (runs.TARGET_VOCABULARY, _truncate, "has 100 bytes, not 2048 (truncated?)"),
        (runs.WEIGHTS, _random_bytes_inside, "has 4608 bytes, not 2048 (damaged)"),
        (runs.WEIGHTS, _values_overwritten_in_place, "does not match its checksum (damaged)"),
        (runs.SOURCE_VOCABULARY, _values_overwritten_in_place, "does not match its checksum"),
    ],
)
def test_the_run_manifest_names_each_damaged_file(tmp_path, name, damage, says):
    run = _finished_run(tmp_path)
    assert check_run_directory(run) == run
    damage(run / name)
    with pytest.raises(runs.RunDirectoryError) as error:
        check_run_directory(run)
    message = str(error.value)
    assert f"{name} {says}" in message and f"restore {name}" in message
    assert "\n" not in message


def test_a_changed_config_is_caught_by_the_manifest(tmp_path):
    run = _finished_run(tmp_path)
    (run / runs.CONFIG).write_text(json.dumps({"task": "translation", "recipe": "luong"}))
    with pytest.raises(runs.RunDirectoryError, match="config.json has .* bytes, not"):
        check_run_directory(run)


def test_a_run_without_manifest_loads_with_one_warning(tmp_path, caplog):
    run = _finished_run(tmp_path)
    (run / runs.MANIFEST).unlink()
    with caplog.at_level(logging.WARNING, logger="zoo"):
        assert check_run_directory(run) == run
        assert check_run_directory(run) == run
    warnings = [r.getMessage() for r in caplog.records if runs.MANIFEST in r.getMessage()]
    assert len(warnings) == 1 and "loaded unchecked" in warnings[0]


@pytest.mark.parametrize("key, value", [("recipe", "no_such_recipe"), ("task", "dancing")])
def test_a_config_naming_an_unknown_recipe_or_task_is_one_line(tmp_path, key, value):
    run = _finished_run(tmp_path)
    config = json.loads((run / runs.CONFIG).read_text())
    config[key] = value
    (run / runs.CONFIG).write_text(json.dumps(config))
    with pytest.raises(runs.RunDirectoryError) as error:
        check_run_directory(run)
    message = str(error.value)
    assert f"{run / runs.CONFIG} names an unknown {key} {value!r}" in message
    assert ("rnnsearch" if key == "recipe" else "captioning") in message
