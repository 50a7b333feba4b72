"""Captioning end to end: `zoo train/caption/evaluate` on a tiny run, reload,
and the one-line errors of bad paths and unreadable images."""

import json

import numpy as np
import pytest

from cli_checks import assert_one_line_error
from cli_checks import run_cli
from cli_checks import train_keeping_the_model

import zoo
from zoo import cli
from zoo.inference.captioner import Captioner
from zoo.data import captions

pytestmark = pytest.mark.tensorflow_only  # tf.data training; the recipe itself is swept on every backend


def write_png(path, image):
    import tensorflow as tf

    path.write_bytes(tf.io.encode_png(image).numpy())
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run, and the model and weights that training held at its end."""
    out = tmp_path_factory.mktemp("runs") / "captions"
    options = (
        "--train-size", "48", "--valid-size", "8", "--test-size", "16", "--epochs", "1",
        "--batch-size", "32",
    )
    return train_keeping_the_model(out, "show_attend_tell_small", *options)


@pytest.fixture(scope="module")
def caption_run(trained):
    return trained[0]


@pytest.fixture(scope="module")
def scene():
    return captions.synthetic_captions(2, seed=7)


def test_train_writes_a_captioning_run_directory(caption_run):
    for name in ("config.json", "target.vocab", "model.weights.h5", "metrics.json",
                 "checkpoints/epoch-01.weights.h5"):
        assert (caption_run / name).is_file(), name
    assert not (caption_run / "source.vocab").exists()
    config = json.loads((caption_run / "config.json").read_text())
    assert config["task"] == "captioning"
    metrics = json.loads((caption_run / "metrics.json").read_text())
    assert (metrics["train_images"], metrics["valid_images"], metrics["test_images"]) == (48, 8, 16)
    for key in ("test_bleu1", "test_bleu4", "test_cider_d", "test_attention_peak_in_box",
                "images_per_second"):
        assert key in metrics, key


def test_caption_an_image_file_and_plot_its_attention(capsys, caption_run, scene, tmp_path):
    image = write_png(tmp_path / "scene.png", scene[0].image)
    plot = tmp_path / "attention.png"
    code, out, _ = run_cli(
        capsys, "caption", str(caption_run), str(image), "--beam", "2", "--plot", str(plot)
    )
    assert code == 0
    assert len(out.strip().splitlines()) == 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_prints_caption_metrics_and_localisation(capsys, caption_run):
    code, out, _ = run_cli(capsys, "evaluate", str(caption_run), "--limit", "16")
    assert code == 0
    for name in ("bleu1", "bleu4", "cider_d", "peak_in_box", "mean_mass_in_box"):
        assert name in out, name


def test_gold_alignments_for_a_captioning_run_is_one_line(capsys, caption_run, tmp_path):
    gold = tmp_path / "gold.txt"
    gold.write_text("0-0\n")
    code, _, err = run_cli(capsys, "evaluate", str(caption_run), "--gold-alignments", str(gold))
    assert_one_line_error(code, err, "--gold-alignments", "translation")


def test_reloaded_run_captions_like_the_trained_model(trained, scene):
    out, model, weights = trained
    reloaded = zoo.load(out)
    for saved, loaded in zip(weights, reloaded.model.get_weights(), strict=True):
        np.testing.assert_array_equal(loaded, saved)
    in_memory = Captioner(model, reloaded.tokenizer, reloaded.config)
    images = np.stack([example.image for example in scene])
    expected = in_memory.caption(images)
    got = reloaded.caption(images)
    assert [c.text for c in got] == [c.text for c in expected]
    for a, b in zip(expected, got):
        assert a.attention.shape == (len(a.words),) + tuple(model.grid_shape)
        np.testing.assert_allclose(b.attention, a.attention, atol=1e-6)
        np.testing.assert_allclose(b.score, a.score, rtol=1e-6)


def test_wrong_image_shape_is_a_clear_error(caption_run):
    captioner = zoo.load(caption_run)
    with pytest.raises(ValueError, match=r"\[N, 64, 64, 3\]"):
        captioner.caption(np.zeros((1, 32, 32, 3), "uint8"))


def test_missing_image_is_one_line(capsys, caption_run, tmp_path):
    code, _, err = run_cli(capsys, "caption", str(caption_run), str(tmp_path / "none.png"))
    assert_one_line_error(code, err, "none.png")


def test_unreadable_image_is_one_line(capsys, caption_run, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_text("not an image")
    code, _, err = run_cli(capsys, "caption", str(caption_run), str(broken))
    assert_one_line_error(code, err, "broken.png")


def test_translate_with_a_captioning_run_is_one_line(capsys, caption_run):
    code, _, err = run_cli(capsys, "translate", str(caption_run), "a sentence")
    assert_one_line_error(code, err, "zoo caption")


def test_missing_caption_corpus_is_one_line(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "train", "show_attend_tell_small", "--data",
        f"{tmp_path / 'captions.json'},{tmp_path}", "--out", str(tmp_path / "run"),
    )
    assert_one_line_error(code, err, "captions.json")
    assert not (tmp_path / "run").exists(), "a failed start left a run directory"
