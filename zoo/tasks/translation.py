"""Translation: text in, text out, scored with BLEU, and its attention
scored by the alignment error rate against gold word alignments."""

import functools
import logging
from pathlib import Path

from zoo.errors import ZooUserError
from zoo.training.config import of_run

from zoo.tasks.base import Task
from zoo.tasks.base import Splits
from zoo.tasks.base import TaskData
from zoo.tasks.base import hold_out_validation
from zoo.tasks.base import run_tokenizers

logger = logging.getLogger(__name__)


class TranslationTask(Task):
    name = "translation"
    command = "translate"
    roles = ("source", "target")
    tokenizers = ("wordpiece", "sentencepiece")
    synthetic_data = "corpus"

    def synthetic_splits(self, training):
        """The embedded corpus's pairs."""
        from zoo import data

        sizes = (training.train_size, training.valid_size, training.test_size)
        return data.synthetic_splits(*sizes, seed=training.seed)

    def synthetic_test_alignments(self, training):
        """The synthetic test split as `(pairs, golds)`: its (source,
        target) pairs and their gold `GoldAlignment`s."""
        from zoo import data
        from zoo.evaluation import alignment

        sizes = (training.train_size, training.valid_size, training.test_size)
        test = data.synthetic_splits(*sizes, seed=training.seed, with_alignments=True)
        pairs = [(source, target) for source, target, _ in test["test"]]
        return pairs, [alignment.parse_gold(line) for _, _, line in test["test"]]

    def test_alignments(self, config, data_spec=None, gold_path=None):
        """The test pairs `zoo evaluate` scores and their gold alignments:
        `(pairs, golds)`, `golds` a list of `GoldAlignment` or None.

        The gold is `gold_path` (Pharaoh format, one line per test pair of
        `data_spec`, or of the synthetic test set), else, for the synthetic
        test set, the corpus's own; a real corpus without `gold_path` has
        none. A gold file that cannot be read or does not match the test set
        line for line is a `ZooUserError`.
        """
        from zoo.evaluation import alignment

        if data_spec or gold_path:
            pairs = self.test_examples(config, data_spec)
        if gold_path is None:
            if data_spec:
                return pairs, None
            return self.synthetic_test_alignments(of_run(config))
        path = Path(gold_path)
        if not path.is_file():
            raise ZooUserError(f"--gold-alignments {gold_path!r} does not exist or is not a file")
        try:
            with open(path, encoding="utf-8") as lines:
                golds = alignment.read_gold(lines, name=f"--gold-alignments {gold_path!r}")
        except UnicodeDecodeError as error:
            raise ZooUserError(f"--gold-alignments {gold_path!r} is not UTF-8: {error}") from None
        except ValueError as error:
            raise ZooUserError(str(error)) from None
        if len(golds) != len(pairs):
            raise ZooUserError(
                f"--gold-alignments {gold_path!r} has {len(golds)} lines for "
                f"{len(pairs)} test pairs: it needs one line per pair, in order"
            )
        return pairs, golds

    def load_splits(self, training):
        """The base's splits, with the corpus's count of lines read and of
        blank ones, which the reader skips before the validation hold-out
        (`prepare_data` reports them)."""
        if training.is_synthetic:
            return super().load_splits(training)
        from zoo import data

        corpus = data.read_corpus(training.data)
        return Splits(
            *hold_out_validation(corpus.pairs, training),
            pairs_read=len(corpus) + corpus.skipped_empty,
            blank_lines=corpus.skipped_empty,
        )

    def read_examples(self, data_spec):
        """The (source, target) pairs of a corpus spec (`zoo.data.read_corpus`)."""
        from zoo import data

        return data.read_corpus(data_spec).pairs

    def default_tokenizer(self, training):
        """SentencePiece, which keeps case, for a real corpus; WordPiece for
        the embedded synthetic corpus, which is lowercase."""
        return "wordpiece" if training.is_synthetic else "sentencepiece"

    def wrapper(self):
        from zoo.inference.translator import Translator

        return Translator

    def prepare_data(self, training, splits, out, drop_remainder=False, fixed_shapes=False):
        from zoo import data

        train_pairs, valid_pairs, test_pairs = splits
        tokenizers = run_tokenizers(
            self,
            out,
            training,
            {"source": [s for s, _ in train_pairs], "target": [t for _, t in train_pairs]},
        )
        source_tokenizer, target_tokenizer = tokenizers["source"], tokenizers["target"]

        def encode(pairs, max_length_ratio=None):
            # Once per split: a training asks for its batches several times (to
            # count them, for each `fit`, to count the tokens).
            return data.encode_pairs(
                pairs,
                source_tokenizer,
                target_tokenizer,
                max_source_length=training.max_length,
                max_target_length=training.max_length,
                max_length_ratio=max_length_ratio,
            )

        def dataset(encoded, shuffle, epochs=None):
            return data.make_translation_dataset(
                encoded,
                source_tokenizer,
                target_tokenizer,
                batch_size=training.batch_size,
                shuffle=shuffle,
                seed=training.seed,
                epochs=epochs,
                drop_remainder=drop_remainder,
                pad_to_bucket_boundary=fixed_shapes,
                batch_tokens=training.batch_tokens,
            )

        translators = {}

        def translator(model, config):
            # One per model: each compiles its search once, and validation
            # decodes with it after every epoch.
            if id(model) not in translators:
                translators[id(model)] = self.wrapper()(
                    model, source_tokenizer, target_tokenizer, config
                )
            return translators[id(model)]

        def evaluate(model, config):
            decoder = translator(model, config)
            return self.test_metrics(decoder, decoder.evaluate(test_pairs), test_pairs)

        def validate(model, config):
            return translator(model, config).evaluate(valid_pairs)["bleu"].score

        # Uneven pairs are left out of training only: the validation loss
        # and BLEU are measured on the held-out pairs as they are.
        train = encode(train_pairs, training.max_length_ratio or None)
        filtered = filter_report(splits, train_pairs, train)
        return TaskData(
            functools.partial(dataset, train, True),
            dataset(encode(valid_pairs), shuffle=False) if valid_pairs else None,
            {
                "source_vocabulary_size": source_tokenizer.vocabulary_size,
                "target_vocabulary_size": target_tokenizer.vocabulary_size,
            },
            {
                "train_pairs": len(train_pairs),
                "valid_pairs": len(valid_pairs),
                "test_pairs": len(test_pairs),
                **filtered,
            },
            evaluate if test_pairs else None,
            validate if valid_pairs else None,
        )


    def test_metrics(self, translator, result, test_pairs):
        """The `test_*` entries of a run's metrics.json: the BLEU scores of
        `result`, what `translator.evaluate(test_pairs)` returned, and on the
        synthetic corpus the attention's alignment scores and the in-order
        BLEU."""
        metrics = {
            f"test_{name}{part}": getattr(result[name], field)
            for name in ("bleu", "bleu_lowercased")
            for part, field in (("", "score"), ("_signature", "signature"))
        }
        training = of_run(translator.config)
        if training.data == "synthetic":
            _, golds = self.synthetic_test_alignments(training)
            scores = translator.alignment_scores(test_pairs, golds)
            metrics.update(alignment_metrics(scores, prefix="test_"))
            metrics.update(in_order_bleu(result["hypotheses"], test_pairs, golds))
        return metrics


TRANSLATION = TranslationTask()


def filter_report(splits, train_pairs, encoded):
    """The metrics.json entries of what the training data's filtering left
    out (`zoo.data.filtering.filter_metrics`), logged as one line: a warning
    when pairs were left out, which the user may not expect."""
    from zoo.data import filtering

    metrics = filtering.filter_metrics(
        len(train_pairs),
        encoded.left_out,
        pairs_read=getattr(splits, "pairs_read", None),
        blank_lines=getattr(splits, "blank_lines", 0),
    )
    left_out = sum(metrics[f"pairs_left_out_{reason}"] for reason in filtering.REASONS)
    logger.log(logging.WARNING if left_out else logging.INFO, filtering.describe(metrics))
    return metrics


def in_order_bleu(hypotheses, pairs, golds):
    """BLEU on the test pairs whose gold alignment needs no reordering, and
    their count: where a monotonic attention can follow the source, so its
    BLEU there against the whole set's tells the loss to reordering apart."""
    from zoo.evaluation import bleu

    kept = [i for i, gold in enumerate(golds) if gold.in_order]
    if not kept:
        return {}
    return {
        "test_bleu_in_order": bleu.corpus_bleu(
            [hypotheses[i] for i in kept], [pairs[i][1] for i in kept]
        ).score,
        "test_pairs_in_order": len(kept),
    }


def alignment_metrics(scores, prefix=""):
    """The metrics.json entries of an `AlignmentScores`, in percent like
    BLEU; none when the model linked nothing (it has no attention)."""
    if scores is None or scores.links == 0:
        return {}
    return {
        f"{prefix}aer": 100 * scores.aer,
        f"{prefix}alignment_precision": 100 * scores.precision,
        f"{prefix}alignment_recall": 100 * scores.recall,
    }
