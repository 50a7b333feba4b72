"""`zoo demo`, the main job: the fixed-vector bottleneck, and attention removing it.

Trains `rnnencdec_small` (no attention) and `rnnsearch_small` (Bahdanau
attention) on the embedded synthetic corpus, then prints their BLEU by
source-length bucket side by side, as in Figure 2 of Bahdanau et al. (2014):
the encoder-decoder's BLEU falls as sentences grow, RNNsearch's holds. It
saves the alignment heat map of a long test sentence and keeps both runs.
`zoo demo --layers` runs `zoo.cli.layer_demo` instead.
"""

import time
from pathlib import Path

from zoo import registry
from zoo import runs
from zoo.tasks import TRANSLATION
from zoo.training.config import of_run

PRESETS = ("rnnencdec_small", "rnnsearch_small")


def add_parser(commands):
    demo = commands.add_parser(
        "demo", help="the main job: RNNencdec vs RNNsearch on the synthetic corpus"
    )
    demo.add_argument("--out", default="runs/demo", help="where the demo keeps its runs")
    demo.add_argument(
        "--layers", action="store_true", help="instead: the attention layers on a toy task"
    )


def command(args):
    if args.layers:
        from zoo.cli import layer_demo

        layer_demo.run(verbose=2)
        return
    run(args.out)


def longest_test_sentence(pairs, max_words=60):
    return max((source for source, _ in pairs if len(source.split()) <= max_words), key=len)


def run(out="runs/demo", presets=PRESETS, epochs=None, train_size=None, verbose="auto"):
    """Trains and compares `presets`; returns {preset: evaluation result}."""
    import zoo
    from zoo.evaluation import bleu as evaluation
    from zoo.evaluation import plots
    from zoo.training import loop as training

    started = time.monotonic()
    out = Path(out)
    results = {}
    for preset in presets:
        print(f"\n== training {preset}: {registry.presets()[preset]}", flush=True)
        run_dir = training.train(
            preset,
            out / preset,
            epochs=epochs,
            train_size=train_size,
            overwrite=True,
            verbose=verbose,
            evaluate_test=False,
        )
        translator = zoo.load(run_dir)
        test_pairs = TRANSLATION.load_splits(of_run(translator.config))[2]
        results[preset] = translator.evaluate(test_pairs)
        # Decoded once, here, for the table; recorded as `zoo train` records it.
        metrics = runs.read_json(run_dir / runs.METRICS)
        metrics.update(TRANSLATION.test_metrics(translator, results[preset], test_pairs))
        runs.write_json(run_dir / runs.METRICS, metrics)
        print(f"{preset}: cased {results[preset]['bleu']}", flush=True)

    # The synthetic corpus is lowercase, so cased and lowercased BLEU agree.
    print(
        "\nCased sacreBLEU by source sentence length (words), greedy decoding, "
        "synthetic test set:\n"
    )
    print(evaluation.format_bleu_table({p: r["by_length"] for p, r in results.items()}))

    sentence = longest_test_sentence(test_pairs)
    translation = translator.translate([sentence])[0]
    heat_map = plots.plot_alignment(
        translation.alignment,
        translation.source_pieces,
        translation.target_pieces,
        out / f"{presets[-1]}_alignment.png",
        title=f"{presets[-1]}: alignment of a {len(sentence.split())}-word sentence",
    )
    print(f"\nsource:      {sentence}\ntranslation: {translation.text}")
    print(f"alignment heat map: {heat_map}")
    print(f"runs kept in: {', '.join(str(out / p) for p in presets)}")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    return results
