"""`TrainingConfig`: every setting of a training, typed and checked in one place.

A preset holds one (`zoo.registry`), `zoo train` makes a flag of each field
that has a help text (`zoo.cli.train`), `zoo.training.loop.train` takes one,
and a run's config.json stores it (`to_dict`; `from_dict` reads it back,
from runs written before a field existed too). Adding a setting is one
`setting(...)` line below.

Keras-free, so that the command line builds its flags without loading Keras.
"""

import argparse
import dataclasses
import math
from typing import Optional

from zoo.errors import ZooUserError
from zoo.runs import TOKENIZERS
from zoo.training import SCHEDULES

# len(zoo.recipes.contract.SPECIAL_TOKENS), which loads Keras: a test holds
# the two equal.
RESERVED_TOKENS = 4
# What early stopping can watch: Keras' validation loss, or the validation
# BLEU of `zoo.training.validation.ValidationBleu`.
EARLY_STOPPING_METRICS = ("val_loss", "val_bleu")


class TrainingError(ZooUserError):
    """A training request that can't be carried out (bad setting, run exists)."""


def setting(
    default,
    help=None,
    least=None,
    above=None,
    below=None,
    choices=None,
    metavar=None,
    parse=None,
    why="",
):
    """A `TrainingConfig` field: its default and what checks and parses it.

    Args:
        default: the value a config gets that does not set it, also for a
            run written before the field existed.
        help: the `zoo train` flag's help; None: no flag (set by the code).
        least: a number field's smallest value.
        above: a number field's lower bound, excluded (`learning_rate` > 0).
        below: a number field's upper bound, excluded (`label_smoothing` < 1).
        choices: a str field's allowed values.
        metavar: the flag's value name.
        parse: the flag's argparse type, where the field's own is not it
            (`jit_compile`'s "on"/"off").
        why: said after a bound the value breaks.
    """
    metadata = {
        "help": help,
        "least": least,
        "above": above,
        "below": below,
        "choices": choices,
        "metavar": metavar,
        "parse": parse,
        "why": why,
    }
    return dataclasses.field(default=default, metadata=metadata)


def _on_off(text):
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """How a preset's model is trained: data, vocabulary, batches, optimizer,
    schedule, validation, averaging and seed.

    Frozen: `overridden(**values)` (or `dataclasses.replace`) gives a
    changed copy, checked again. A bad value raises a `TrainingError` whose
    one line names the setting and the fix.
    """

    data: str = setting(
        "synthetic",
        "training data: 'synthetic' (default for the small presets); for translation "
        "'SOURCE,TARGET' aligned text files (.gz allowed; globs of shards, quoted, as "
        "'train.*.en.gz,train.*.de.gz') or a TSV file, read as a stream; for captioning "
        "'CAPTIONS,IMAGE_DIR[,SPLIT]' (Flickr token file or COCO .json)",
    )
    train_size: Optional[int] = setting(
        None, "use at most N training pairs (images for captioning)", least=1, metavar="N"
    )
    valid_size: int = setting(
        500,
        "validate on N pairs (images): the synthetic data's validation split, or the held-out "
        "end of a corpus (at most a tenth of it)",
        least=1,
        metavar="N",
    )
    test_size: int = setting(
        0,
        "synthetic data: score the trained model on N test pairs (images); 0: none",
        least=0,
        metavar="N",
    )
    # Captioning: the side images are resized to (the model's own).
    image_size: Optional[int] = setting(None, least=1)
    tokenizer: Optional[str] = setting(
        None,
        "subword vocabularies: 'sentencepiece' (keeps case; default for a real corpus) or "
        "'wordpiece' (lowercase; default for the synthetic data and for captioning)",
        choices=TOKENIZERS,
    )
    shared_vocabulary: bool = setting(
        False, "translation: one vocabulary learned from both languages (default: one each)"
    )
    vocabulary_size: int = setting(
        1000,
        "the most subwords each vocabulary (or the shared one) may have, the "
        f"{RESERVED_TOKENS} reserved tokens included; a small corpus gives fewer",
        least=RESERVED_TOKENS + 1,
        metavar="N",
        why=f" (more than the {RESERVED_TOKENS} reserved tokens)",
    )
    max_length: int = setting(
        80, "leave out training pairs with a side longer than N tokens", least=1, metavar="N"
    )
    max_length_ratio: Optional[float] = setting(
        9.0,
        "translation: leave out training pairs whose longer side has more than R times the "
        "tokens of the shorter, likely misaligned (Moses' and OpenNMT's cleaning use 9); 0: "
        "keep every pair",
        least=0,
        metavar="R",
    )
    # Bounds what a corpus of any size costs before training: SentencePiece's
    # memory and time grow with the text it learns from, and the epoch's size
    # is counted on the sample (docs/performance.md, "A corpus of any size").
    vocabulary_sample: int = setting(
        100_000,
        "learn the vocabularies from at most N training pairs (captions), a sample drawn "
        "with the run's seed; a smaller corpus is used whole",
        least=1,
        metavar="N",
    )
    # OpenNMT-py and eole shuffle a corpus in buckets of 262,144 examples
    # (`bucket_size`): a window large enough to mix a corpus of several
    # sources, small enough to hold on any machine.
    shuffle_buffer: int = setting(
        262_144,
        "translation: shuffle the training pairs in windows of N pairs, a stream's only "
        "memory that grows with N; a corpus no larger is shuffled whole",
        least=1,
        metavar="N",
    )
    batch_tokens: Optional[int] = setting(
        None,
        "translation: batches of at most N padded tokens (of the longer side) instead of "
        "--batch-size pairs, as fairseq's --max-tokens: more pairs in a batch of short "
        "sentences (default: off)",
        least=1,
        metavar="N",
    )
    batch_size: int = setting(64, "pairs (images) a batch; the global batch", least=1, metavar="N")
    epochs: int = setting(10, "passes over the training data", least=1, metavar="N")
    learning_rate: float = setting(
        1e-3,
        "the peak of the learning-rate schedule, reached after the warm-up",
        above=0,
        metavar="LR",
    )
    clipnorm: Optional[float] = setting(
        1.0, "rescale each gradient whose norm is above C to C", above=0, metavar="C"
    )
    label_smoothing: float = setting(
        0.0, "label smoothing (0 <= E < 1; the *_multi30k presets use 0.1)", least=0,
        below=1, metavar="E",
    )
    schedule: str = setting(
        "cosine",
        "learning-rate schedule: 'cosine' (decay to a tenth) or 'inverse_sqrt' (the "
        "Transformer's; needs --warmup-steps >= 1)",
        choices=SCHEDULES,
    )
    warmup_steps: int = setting(
        0, "linear learning-rate warm-up, in updates", least=0, metavar="N"
    )
    # A continued run's (`zoo train --continue`) schedule keeps the length
    # of its first `epochs`; None: `epochs`.
    schedule_epochs: Optional[int] = setting(None, least=1)
    validation_bleu: bool = setting(
        False,
        "decode the validation split greedily after each epoch and log its BLEU as val_bleu "
        "(on for the real-corpus translation presets); picks best.weights.h5",
    )
    validate_every_steps: Optional[int] = setting(
        None,
        "also validate every N batches inside each epoch (the loss, and the BLEU with "
        "--validation-bleu), logged to validation.csv; the best checkpoint and early "
        "stopping still watch the validation at each epoch's end (default: only there)",
        least=1,
        metavar="N",
    )
    average_last: int = setting(
        0,
        "after the last epoch, make the run's weights the mean of its last N epoch "
        "checkpoints, as `zoo average --last N` does (0: none)",
        least=0,
        metavar="N",
    )
    gradient_accumulation_steps: int = setting(
        1,
        "update the weights once every N batches, with the mean of their gradients, as one "
        "batch N times as large would (1: every batch); the schedule counts updates",
        least=1,
        metavar="N",
    )
    early_stopping_patience: int = setting(
        0,
        "stop training once --early-stopping-metric has not improved for N epochs; the run "
        "then finishes as after its last epoch (0: train all --epochs)",
        least=0,
        metavar="N",
    )
    early_stopping_metric: str = setting(
        "val_loss",
        "what --early-stopping-patience watches: 'val_loss' or 'val_bleu' (needs "
        "--validation-bleu on)",
        choices=EARLY_STOPPING_METRICS,
    )
    jit_compile: Optional[bool] = setting(
        None,
        "compile the train step with XLA (jax.jit on jax) or not (default: the recipe's "
        "choice for this backend, see `zoo bench train`)",
        choices=("on", "off"),
        parse=_on_off,
    )
    seed: int = setting(
        0,
        "the run's seed: the synthetic data, the initial weights, the dropout masks, the "
        "batch order and hard attention's samples (the same seed trains alike)",
        least=0,
        metavar="N",
    )

    def __post_init__(self):
        for field in dataclasses.fields(self):
            _check_field(field, getattr(self, field.name))
        if self.schedule == "inverse_sqrt" and self.warmup_steps < 1:
            raise TrainingError(
                "the inverse_sqrt schedule needs warmup_steps >= 1 (its peak, --warmup-steps); "
                f"received {self.warmup_steps!r}"
            )
        if self.early_stopping_metric == "val_bleu" and not self.validation_bleu:
            raise TrainingError(
                "early_stopping_metric val_bleu needs the validation BLEU; pass "
                "--validation-bleu, or --early-stopping-metric val_loss"
            )
        if self.max_length_ratio and self.max_length_ratio < 1:
            raise TrainingError(
                f"max_length_ratio {self.max_length_ratio!r} would leave out every pair (a "
                "longer side has at least the shorter's tokens); choose 0 (off) or R >= 1"
            )
        if self.batch_tokens is not None and self.batch_tokens < self.max_length:
            raise TrainingError(
                f"batch_tokens {self.batch_tokens} cannot hold a pair of max_length "
                f"{self.max_length} tokens; choose --batch-tokens at least --max-length"
            )
        # Checked before training, not after hours of it.
        if self.average_last > self.epochs:
            raise TrainingError(
                f"average_last {self.average_last} is more than the run's {self.epochs} "
                "epochs; choose --average-last at most --epochs"
            )

    def overridden(self, **values):
        """A copy with the settings of `values` that are not None.

        A preset's `average_last` shrinks to fewer `epochs` asked for
        without an `average_last` of their own.
        """
        values = {key: value for key, value in values.items() if value is not None}
        names = field_names(type(self))
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TrainingError(
                f"unknown training setting {unknown[0]!r}; the settings are {', '.join(names)}"
            )
        if "epochs" in values and "average_last" not in values:
            values["average_last"] = min(self.average_last, values["epochs"])
        changed = dataclasses.replace(self, **values)
        if "test_size" in values and not changed.is_synthetic:
            raise TrainingError(
                "--test-size applies to the synthetic data only: a corpus is scored on "
                "its test set with `zoo evaluate DIR --data TEST`"
            )
        return changed

    @property
    def is_synthetic(self):
        return self.data == "synthetic"

    @property
    def schedule_length(self):
        """The epochs the learning-rate schedule spans."""
        return self.schedule_epochs or self.epochs

    def to_dict(self):
        """The settings as config.json stores them."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, settings, strict=True):
        """A `TrainingConfig` of a dict of settings: a preset's, or a run's
        config.json "training" (fields it lacks take their defaults).

        Args:
            settings: a mapping of field names to values.
            strict: refuse keys that are not fields (a preset's typo);
                False drops them (a run written by another version).
        """
        names = field_names(cls)
        unknown = sorted(set(settings) - set(names))
        if unknown and strict:
            raise TrainingError(
                f"unknown training setting {unknown[0]!r}; the settings are {', '.join(names)}"
            )
        return cls(**{key: value for key, value in settings.items() if key in names})


def field_names(config_class=None):
    """The settings of `config_class` (default: `TrainingConfig`)."""
    return tuple(field.name for field in dataclasses.fields(config_class or TrainingConfig))


def flag_fields():
    """The `TrainingConfig` fields `zoo train` has a flag for: those with a help text."""
    return tuple(f for f in dataclasses.fields(TrainingConfig) if f.metadata.get("help"))


def is_bool(field):
    return _field_type(field)[0] is bool


def flag_parser(field):
    """The argparse type of `field`'s flag: the text parsed to the field's
    type and checked as the config checks it, else argparse's one-line
    error in `zoo.arguments`' words ("expected a positive integer, got '0'")."""
    parse = field.metadata["parse"] or _field_type(field)[0]

    def parsed(text):
        try:
            value = parse(text)
            _check_field(field, value)
        except (ValueError, TrainingError):
            raise argparse.ArgumentTypeError(
                f"expected {_expected(field)}, got {text!r}"
            ) from None
        return value

    parsed.__name__ = field.name
    return parsed


def _expected(field):
    """What a flag of `field` takes, in words."""
    kind = _field_type(field)[0]
    meta = field.metadata
    if meta["choices"]:
        return f"one of {', '.join(meta['choices'])}"
    if kind is int:
        bound = {1: "a positive integer", 0: "an integer >= 0"}
        return bound.get(meta["least"]) or f"an integer >= {meta['least']}{meta['why']}"
    if meta["below"] is not None:
        return f"a number in [{meta['least']}, {meta['below']})"
    if meta["above"] is not None:
        return f"a finite number > {meta['above']}"
    if meta["least"] is not None:
        return f"a finite number >= {meta['least']}"
    return f"a {kind.__name__}"


def trained_max_length(config):
    """The `max_length` a run's sentences (or captions) were cut to in
    training; None for a model without a run's config, which then reads
    inputs whole."""
    return of_run(config).max_length if config and config.get("training") else None


def of_run(config):
    """The `TrainingConfig` of a run's config.json (or an ONNX manifest's
    config); keys of another version are dropped."""
    return TrainingConfig.from_dict(config.get("training", {}), strict=False)


def _check_field(field, value):
    """A TrainingError naming `field` unless `value` is of its type and range."""
    kind, optional = _field_type(field)
    if value is None:
        if optional:
            return
        raise TrainingError(f"{field.name} must be set; received None")
    meta = field.metadata
    choices = meta["choices"] if kind is str else None
    if choices and value not in choices:
        raise TrainingError(f"unknown {field.name} {value!r}; choose one of {', '.join(choices)}")
    if kind is bool:
        ok, expected = isinstance(value, bool), "true or false"
    elif kind is str:
        ok, expected = isinstance(value, str), "a string"
    else:
        number = isinstance(value, int if kind is int else (int, float))
        ok = number and not isinstance(value, bool) and math.isfinite(value)
        expected = "an int" if kind is int else "a finite number"
        least, above, below = meta["least"], meta["above"], meta["below"]
        if below is not None:
            ok, expected = ok and least <= value < below, f"in [{least}, {below})"
        elif above is not None:
            ok, expected = ok and value > above, f"{expected} > {above}"
        elif least is not None:
            ok, expected = ok and value >= least, f"{expected} >= {least}"
    if not ok:
        raise TrainingError(f"{field.name} must be {expected}{meta['why']}; received {value!r}")


def _field_type(field):
    """(int, float, bool or str; whether None is allowed) of a field's annotation."""
    args = getattr(field.type, "__args__", None)
    if args:
        return next(a for a in args if a is not type(None)), True
    return field.type, False
