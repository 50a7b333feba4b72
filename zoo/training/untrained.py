"""A run directory holding a model's initial weights, for what needs a run
but not a trained model (export checks, latency benchmarks)."""

from pathlib import Path

from zoo import registry
from zoo import runs
from zoo.tasks import task_for
from zoo.tasks import write_run_manifest


def write_untrained_run(
    out,
    preset,
    target_tokenizer,
    source_tokenizer=None,
    model_overrides=None,
    training_overrides=None,
    search=None,
):
    """A complete run directory of `preset` holding the model's initial weights.

    The exported graphs and the Python API must agree on any weights, so
    export checks need no training. Untrained, a model decodes every input
    to its step limit.

    Args:
        out: the run directory to write (created; must not exist yet).
        preset: a preset name.
        target_tokenizer: the target (or caption) tokenizer (a `TextTokenizer`
            or a `SentencePieceTokenizer`).
        source_tokenizer: the source tokenizer (translation only), of the
            same kind; the very same object makes a shared vocabulary.
        model_overrides: optional dict of model config entries (e.g. tiny sizes).
        training_overrides: optional dict of `TrainingConfig` settings (e.g.
            `max_length`, which bounds the inputs the Python API reads).
        search: optional dict of search settings the run decodes with by
            default, in place of the preset's.

    Returns:
        The run directory, a `Path`.
    """
    from zoo.data import SentencePieceTokenizer

    settings = registry.get_preset(preset)
    task = task_for(settings)
    out = Path(out)
    out.mkdir(parents=True)
    model = {**settings["model"], **(model_overrides or {})}
    tokenizers = {"source": source_tokenizer, "target": target_tokenizer}
    kind = "sentencepiece" if isinstance(target_tokenizer, SentencePieceTokenizer) else "wordpiece"
    training = settings["training"].overridden(
        **(training_overrides or {}),
        tokenizer=kind,
        shared_vocabulary=source_tokenizer is target_tokenizer,
    )
    for role, name in runs.vocabulary_files(task.roles, training).items():
        tokenizers[role].save(out / name)
        model[f"{role}_vocabulary_size"] = tokenizers[role].vocabulary_size
    config = {
        "preset": preset,
        "recipe": settings["recipe"],
        "task": task.name,
        "model": model,
        "training": training.to_dict(),
        "search": registry.search_of({"search": search}) if search else settings["search"],
    }
    runs.write_json(out / runs.CONFIG, config)
    runs.save_weights(registry.build_model(config), out / runs.WEIGHTS)
    write_run_manifest(out)
    return out
