"""Training a preset into a run directory (TensorFlow data pipeline, any backend)."""

import shutil
import time
from pathlib import Path

import keras
import numpy as np

from zoo import data
from zoo import distributed
from zoo import registry
from zoo import runs
from zoo.errors import ZooUserError
from zoo.recipes.seq2seq import default_jit_compile


class TrainingError(ZooUserError):
    """A training request that can't be carried out (bad option, run exists)."""


def load_pairs(training):
    """(train, valid, test) pairs for a preset's training settings.

    `training["data"]` is "synthetic" (the embedded corpus) or a corpus spec
    for `zoo.data.read_corpus`; from a real corpus the last `valid_size`
    pairs are held out for validation and there is no test split (evaluate
    with `zoo evaluate DIR --data TEST`).
    """
    if training["data"] == "synthetic":
        splits = data.synthetic_splits(
            training["train_size"],
            training["valid_size"],
            training["test_size"],
            seed=training.get("seed", 0),
        )
        return splits["train"], splits["valid"], splits["test"]
    return _hold_out_validation(data.read_corpus(training["data"]).pairs, training)


def load_caption_splits(training):
    """(train, valid, test) lists for a captioning preset's training settings.

    Synthetic data gives `zoo.data.captions.CaptionExample`s (images in
    memory, with their objects' boxes); a real corpus spec
    (`zoo.data.read_captions`) gives `CaptionImage`s (image files), split as
    in `load_pairs`. `train_size` counts images.
    """
    if training["data"] == "synthetic":
        splits = data.synthetic_caption_splits(
            training["train_size"],
            training["valid_size"],
            training["test_size"],
            seed=training.get("seed", 0),
            image_size=training["image_size"],
        )
        return splits["train"], splits["valid"], splits["test"]
    return _hold_out_validation(data.read_captions(training["data"]).images, training)


def _hold_out_validation(examples, training):
    """A real corpus: the last `valid_size` examples (at most a tenth) for
    validation, at most `train_size` before them for training, no test."""
    valid_size = min(training.get("valid_size", 500), len(examples) // 10)
    if training.get("train_size"):
        examples = examples[: training["train_size"] + valid_size]
    return examples[: len(examples) - valid_size], examples[len(examples) - valid_size :], []


def learning_rate_schedule(training, batches_per_epoch):
    """Cosine decay from the preset's rate to a tenth of it over the run.

    A constant 1e-2 learns the synthetic corpus fast but then wanders:
    rnnsearch_small's validation loss rose from 0.054 after epoch 3 to 0.172
    after epoch 5, and its test BLEU fell from 88 (3 epochs) to 76 (5).
    """
    return keras.optimizers.schedules.CosineDecay(
        training["learning_rate"],
        decay_steps=max(1, training["epochs"] * batches_per_epoch),
        alpha=0.1,
    )


def _prepare_run_directory(out, overwrite):
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise TrainingError(
                f"run directory {str(out)!r} already exists and is not empty; "
                "choose another --out or pass --overwrite"
            )
        shutil.rmtree(out)
    (out / runs.CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    return out


class _EpochCheckpoint(keras.callbacks.Callback):
    """Saves the weights after every epoch, atomically."""

    def __init__(self, folder):
        super().__init__()
        self.folder = Path(folder)

    def on_epoch_end(self, epoch, logs=None):
        runs.save_weights(self.model, self.folder / f"epoch-{epoch + 1:02d}.weights.h5")


def _count_target_tokens(dataset):
    return int(sum(np.count_nonzero(targets) for _, targets in dataset.as_numpy_iterator()))


class _TaskData:
    """What training needs from a task (translation or captioning)."""

    def __init__(self, train_data, valid_data, vocabularies, examples, evaluate):
        self.train_data = train_data  # tf.data, ({inputs}, target_out) batches
        self.valid_data = valid_data
        self.vocabularies = vocabularies  # model config entries
        self.examples = examples  # {"train_pairs": N} or {"train_images": N, ...}
        self.evaluate = evaluate  # (model, config) -> metrics dict, or None


def _translation_data(training, splits, out):
    train_pairs, valid_pairs, test_pairs = splits
    source_tokenizer = data.TextTokenizer.train(
        [s for s, _ in train_pairs], training["vocabulary_size"]
    )
    target_tokenizer = data.TextTokenizer.train(
        [t for _, t in train_pairs], training["vocabulary_size"]
    )
    source_tokenizer.save(out / runs.SOURCE_VOCABULARY)
    target_tokenizer.save(out / runs.TARGET_VOCABULARY)

    def dataset(pairs, shuffle):
        return data.make_translation_dataset(
            pairs,
            source_tokenizer,
            target_tokenizer,
            batch_size=training["batch_size"],
            shuffle=shuffle,
            seed=training.get("seed", 0),
            max_source_length=training["max_length"],
            max_target_length=training["max_length"],
        )

    def evaluate(model, config):
        from zoo.translator import Translator

        translator = Translator(model, source_tokenizer, target_tokenizer, config)
        result = translator.evaluate(test_pairs)
        return {
            "test_bleu": result["bleu"].score,
            "test_bleu_signature": result["bleu"].signature,
        }

    return _TaskData(
        dataset(train_pairs, shuffle=True),
        dataset(valid_pairs, shuffle=False) if valid_pairs else None,
        {
            "source_vocabulary_size": source_tokenizer.vocabulary_size,
            "target_vocabulary_size": target_tokenizer.vocabulary_size,
        },
        {"train_pairs": len(train_pairs)},
        evaluate if test_pairs else None,
    )


def _captioning_data(training, splits, out):
    from zoo import captioner

    train_images, valid_images, test_images = splits
    images, captions = captioner.caption_pairs(train_images)
    tokenizer = data.TextTokenizer.train(captions, training["vocabulary_size"])
    tokenizer.save(out / runs.TARGET_VOCABULARY)

    def dataset(examples, shuffle):
        images, captions = captioner.caption_pairs(examples)
        return data.make_caption_dataset(
            images,
            captions,
            tokenizer,
            image_size=training["image_size"],
            batch_size=training["batch_size"],
            shuffle=shuffle,
            seed=training.get("seed", 0),
            max_caption_length=training["max_length"],
        )

    def evaluate(model, config):
        result = captioner.Captioner(model, tokenizer, config).evaluate(test_images)
        metrics = {f"test_{name}": value for name, value in result["scores"].items()}
        if result["localisation"] is not None:
            metrics.update(
                {f"test_attention_{k}": v for k, v in result["localisation"].items()}
            )
        return metrics

    return _TaskData(
        dataset(train_images, shuffle=True),
        dataset(valid_images, shuffle=False) if valid_images else None,
        {"target_vocabulary_size": tokenizer.vocabulary_size},
        {"train_images": len(train_images), "train_pairs": len(captions)},
        evaluate if test_images else None,
    )


def train(
    preset,
    out,
    data_spec=None,
    epochs=None,
    batch_size=None,
    train_size=None,
    overwrite=False,
    verbose="auto",
    evaluate_test=True,
    strategy=None,
    mixed_precision=None,
):
    """Trains preset `preset` and writes its run directory `out`.

    Args:
        preset: a preset name (`zoo.presets()`).
        out: the run directory to write.
        data_spec: None for the preset's data, "synthetic", or a corpus spec
            (translation: `"train.en.gz,train.de.gz"` or a TSV file;
            captioning: `"captions.txt,images/[,split.txt]"` or
            `"captions.json,images/"`).
        epochs, batch_size, train_size: override the preset's settings
            (`train_size` counts sentence pairs, or images for captioning).
        overwrite: replace an existing run directory.
        verbose: Keras `fit` verbosity ("auto": a progress bar).
        evaluate_test: when the data has a test split, decode it greedily
            and record its scores in metrics.json.
        strategy: None or a name of `zoo.distributed.STRATEGIES` ("auto",
            "one-device", "mirrored", "multi-worker", "data-parallel"), or
            a strategy object; `batch_size` is the global batch, split
            across the replicas. Under "multi-worker" only the chief writes
            `out`.
        mixed_precision: None (float32), "bfloat16" or "float16".

    Returns:
        The run directory, a `Path`.
    """
    strategy = distributed.make_strategy(strategy)
    distributed.check_precision(mixed_precision)
    settings = registry.get_preset(preset)
    training = dict(settings["training"])
    for key, value in (
        ("data", data_spec),
        ("epochs", epochs),
        ("batch_size", batch_size),
        ("train_size", train_size),
    ):
        if value is not None:
            training[key] = value
    task = registry.task_of(settings["recipe"])
    if task == "captioning":
        splits = load_caption_splits(training)
        prepare_data = _captioning_data
    else:
        splits = load_pairs(training)
        prepare_data = _translation_data
    out = _prepare_run_directory(distributed.worker_run_directory(out, strategy), overwrite)
    task_data = prepare_data(training, splits, out)
    train_data = task_data.train_data

    model_config = {**settings["model"], **task_data.vocabularies}
    config = {
        "preset": preset,
        "recipe": settings["recipe"],
        "task": task,
        "model": model_config,
        "training": training,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        **distributed.describe(strategy, mixed_precision),
    }
    runs.write_json(out / runs.CONFIG, config)
    with distributed.precision_policy(mixed_precision), distributed.strategy_scope(strategy):
        model = registry.recipe_class(settings["recipe"])(**model_config)
        model.compile(
            optimizer=keras.optimizers.Adam(
                learning_rate_schedule(training, int(train_data.cardinality())),
                clipnorm=training.get("clipnorm"),
            ),
            loss=distributed.TokenCrossentropy(),
            jit_compile=(
                default_jit_compile()
                if training.get("jit_compile") is None
                else training["jit_compile"]
            ),
        )
    started = time.monotonic()
    history = distributed.fit(
        model,
        train_data,
        strategy=strategy,
        validation_data=task_data.valid_data,
        epochs=training["epochs"],
        verbose=verbose,
        callbacks=[
            _EpochCheckpoint(out / runs.CHECKPOINTS),
            keras.callbacks.CSVLogger(str(out / runs.HISTORY)),
        ],
    )
    seconds = time.monotonic() - started
    runs.save_weights(model, out / runs.WEIGHTS)

    metrics = {
        "train_seconds": round(seconds, 1),
        "target_tokens_per_second": round(
            training["epochs"] * _count_target_tokens(train_data) / seconds, 1
        ),
        **task_data.examples,
        **distributed.describe(strategy, mixed_precision),
        **{key: float(values[-1]) for key, values in history.history.items()},
    }
    if task == "captioning":
        metrics["images_per_second"] = round(
            training["epochs"] * task_data.examples["train_pairs"] / seconds, 1
        )
    if evaluate_test and task_data.evaluate is not None:
        metrics.update(task_data.evaluate(model, config))
    runs.write_json(out / runs.METRICS, metrics)
    return out
