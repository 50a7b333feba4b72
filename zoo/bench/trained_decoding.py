"""`zoo bench decode --run DIR`: greedy and beam search of a trained run on a
test set, timed end to end, with their BLEU.

    zoo bench decode --run DIR [--data SOURCE,REFERENCE] [--limit N] [--beam K]
                     [--length-penalty A] [--out result.json]

Three settings, each `Translator.evaluate` over the whole test set (the
BLEU is the one it reports): greedy search, beam K with the exact stopping
bound, beam K with early stopping (`zoo.recipes.decoding.beam_search`).
Each reports its wall time, sentences per second, the decoding steps its
batches ran (and the steps their limits allowed) and its BLEU; the summary
gives each beam's time over greedy's and the BLEU of early minus exact.

Before a setting is timed, the whole test set is decoded once untimed, so
that compiling (once per shape under `jax.jit`, a few traces under
`tf.function`, as the batches and the chunked beam search's caches change
shape) is left out of the time.
"""

import time

from zoo.bench import report

BATCH_SIZE = 64


def settings(beam):
    """(name, beam width, stopping rule) of the timed settings."""
    return [
        ("greedy", 1, "early"),
        (f"beam {beam} exact", beam, "exact"),
        (f"beam {beam} early", beam, "early"),
    ]


def bench_trained_run(run_dir, data=None, limit=None, beam=5, length_penalty=0.6, log=print):
    """Times greedy, beam `beam` exact and beam `beam` early on a test set.

    Args:
        run_dir: a translation run directory written by `zoo train`.
        data: the test set, 'SOURCE,REFERENCE' files (or TSV) as `zoo
            evaluate --data` reads them; default: the run's synthetic test set.
        limit: optional int, the first N pairs only.
        beam: int >= 2, the beam width of both beam settings.
        length_penalty: float >= 0, the GNMT alpha of both beam settings.
        log: a function of one progress line.

    Returns:
        The JSON-ready results: the run, the data, the machine and versions,
        one entry per setting in `settings` and the `summary` ratios.
    """
    import keras

    import zoo
    from zoo.tasks import TRANSLATION
    from zoo.tasks import task_for

    run = zoo.load(run_dir)
    if task_for(run.config) is not TRANSLATION:
        from zoo.errors import ZooUserError

        raise ZooUserError(f"{run_dir!r} is not a translation run: --run needs one")
    pairs = TRANSLATION.test_examples(run.config, data)[:limit]
    steps = _count_steps(run)
    measured = []
    for name, width, stopping in settings(beam):
        log(f"zoo bench decode --run: {name} on {len(pairs)} sentences")
        options = {"beam": width, "length_penalty": length_penalty, "stopping": stopping}
        run.evaluate(pairs, batch_size=BATCH_SIZE, **options)  # compiles, untimed
        steps.clear()
        start = time.perf_counter()
        result = run.evaluate(pairs, batch_size=BATCH_SIZE, **options)
        seconds = time.perf_counter() - start
        measured.append(
            {
                "setting": name,
                "beam": width,
                "stopping": stopping if width > 1 else None,
                "seconds": seconds,
                "sentences_per_second": len(pairs) / seconds,
                "batches": len(steps),
                "steps": int(sum(ran for ran, _ in steps)),
                "step_limits": int(sum(allowed for _, allowed in steps)),
                "bleu": result["bleu"].score,
                "bleu_signature": result["bleu"].signature,
            }
        )
    greedy, exact, early = measured
    return {
        "command": None,
        "backend": keras.backend.backend(),
        "versions": report.versions(),
        "machine": report.machine(),
        "run": str(run_dir),
        "preset": run.config.get("preset"),
        "data": data or "the run's synthetic test set",
        "sentences": len(pairs),
        "batch_size": BATCH_SIZE,
        "length_penalty": length_penalty,
        "settings": measured,
        "summary": {
            "exact_over_greedy_seconds": exact["seconds"] / greedy["seconds"],
            "early_over_greedy_seconds": early["seconds"] / greedy["seconds"],
            "early_over_exact_steps": early["steps"] / max(exact["steps"], 1),
            "bleu_early_minus_exact": early["bleu"] - exact["bleu"],
        },
    }


def _count_steps(translator):
    """Makes `translator`'s searches record (steps run, step limit) of each
    batch they decode; returns the list they append to."""
    steps = []

    def recording(search):
        def run(source):
            result = search(source)
            steps.append((int(result.num_steps), int(result.tokens.shape[1])))
            return result

        return run

    class RecordingSearches(dict):
        """`zoo.inference.search_choice.choose_search`'s cache, each search
        kept in it recording."""

        def __setitem__(self, key, search):
            super().__setitem__(key, recording(search))

    translator._searches = RecordingSearches()
    return steps


def markdown_table(results):
    """The settings as a Markdown table."""
    lines = [
        "| setting | seconds | sentences/s | steps run (of limits) | BLEU |",
        "|---|---|---|---|---|",
    ]
    for entry in results["settings"]:
        lines.append(
            f"| {entry['setting']} | {entry['seconds']:.2f} | "
            f"{entry['sentences_per_second']:.1f} | {entry['steps']} ({entry['step_limits']}) | "
            f"{entry['bleu']:.2f} |"
        )
    summary = results["summary"]
    lines.append("")
    lines.append(
        f"beam exact / greedy: {summary['exact_over_greedy_seconds']:.2f}x; "
        f"beam early / greedy: {summary['early_over_greedy_seconds']:.2f}x; "
        f"BLEU early - exact: {summary['bleu_early_minus_exact']:+.2f}"
    )
    return "\n".join(lines)
