"""`zoo bench export --run DIR`: the serving paths of a trained translation
run side by side on a test set.

    zoo bench export --run DIR [--data SOURCE,REFERENCE] [--limit N] [--beam K]
                     [--length-penalty A] [--out result.json]

The sides: the Keras Python API (`zoo.load(DIR).translate`), the
SavedModel's `translate` signature, the ONNX folder's runner in float32, and
the same with `--quantize int8`; for a Transformer run with a SentencePiece
vocabulary, where ctranslate2 is installed, also the CTranslate2 folder's
runner in float32 and int8 (at CTranslate2's default threads). The run is
exported to a temporary folder for each, with the same search (greedy, or
beam K with the length penalty; CTranslate2's length penalty divides by
length ** A, not GNMT's ((5 + length) / 6) ** A, see docs/serving.md).

Each side runs in a child process of its own, so that its peak resident
memory (`ru_maxrss`) is that of a process serving it and nothing else: the
ONNX sides import numpy and onnxruntime only. A child decodes the test
sources at batch 1 (the first `BATCH_1_SENTENCES`, one request each) and at
batch 32 (all of them, requests of 32), each once untimed first, so that
tracing and session start-up are left out, then `TIMED_PASSES` times; it
reports the median sentences per second of each (and every pass's) and
the batch-32 translations, which the parent scores with sacreBLEU (cased,
and lowercased beside it). The size on disk is the
export folder's (for Keras, the run's weights and vocabularies).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is also the child process's script (run by path, not as a
# module), so it imports nothing of the package at the top: an ONNX side's
# child loads only the runner of the export folder, numpy and onnxruntime.
SIDES = ("Keras", "SavedModel", "ONNX float32", "ONNX int8")
CTRANSLATE2_SIDES = ("CTranslate2 float32", "CTranslate2 int8")
BATCH_SIZES = (1, 32)
# Batch 1 runs one request a sentence: the first this many sentences.
BATCH_1_SENTENCES = 100
# Timed passes over the sentences at each batch size; the median is
# reported. The sides run one after the other, so one pass would leave each
# to whatever else the machine did meanwhile.
TIMED_PASSES = 3


def bench_trained_serving(run_dir, data=None, limit=None, beam=1, length_penalty=0.6, log=print):
    """Times and scores the four serving sides of a translation run.

    Args:
        run_dir: a translation run directory written by `zoo train`.
        data: the test set, 'SOURCE,REFERENCE' files (or TSV) as `zoo
            evaluate --data` reads them; default: the run's synthetic one.
        limit: optional int, the first N pairs only.
        beam, length_penalty: the search of every side (1: greedy).
        log: a function of one progress line.

    Returns:
        The JSON-ready results: the run, data, machine and versions, and
        one entry per side (sentences/s per batch size, peak RSS, size on
        disk, BLEU), with `summary` ratios against Keras.
    """
    from zoo import runs
    from zoo.bench import report
    from zoo.errors import ZooUserError
    from zoo.evaluation import bleu
    from zoo.export import onnx_export
    from zoo.export import saved_model
    from zoo.tasks import TRANSLATION
    from zoo.tasks import check_run_directory
    from zoo.tasks import task_for

    config = runs.read_json(check_run_directory(run_dir) / runs.CONFIG)
    if task_for(config) is not TRANSLATION:
        raise ZooUserError(f"{run_dir!r} is not a translation run: --run needs one")
    pairs = TRANSLATION.test_examples(config, data)[:limit]
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    search = {"beam": beam, "length_penalty": length_penalty}
    measured = []
    with tempfile.TemporaryDirectory(prefix="zoo-bench-serving-") as folder:
        folder = Path(folder)
        (folder / "sources.json").write_text(json.dumps(sources))
        exports = {
            "Keras": Path(run_dir),
            "SavedModel": folder / "saved_model",
            "ONNX float32": folder / "onnx",
            "ONNX int8": folder / "onnx_int8",
        }
        log("zoo bench export --run: exporting")
        saved_model.export_saved_model(run_dir, exports["SavedModel"], **search)
        onnx_export.export_onnx(run_dir, exports["ONNX float32"], **search)
        onnx_export.export_onnx(run_dir, exports["ONNX int8"], quantize="int8", **search)
        sides = SIDES + (CTRANSLATE2_SIDES if _ctranslate2_serves(config) else ())
        if _ctranslate2_serves(config):
            from zoo.export import ctranslate2_export

            for side, quantize in zip(CTRANSLATE2_SIDES, (None, "int8")):
                exports[side] = folder / side.replace(" ", "_")
                ctranslate2_export.export_ctranslate2(
                    run_dir, exports[side], quantize=quantize, **search
                )
        keras_translations = None
        for side in sides:
            log(f"zoo bench export --run: {side} on {len(sources)} sentences")
            child = _serve_in_child(side, exports[side], folder, search)
            keras_translations = keras_translations or child["translations"]
            result = {
                "side": side,
                "sentences_per_second": child["sentences_per_second"],
                "sentences_per_second_passes": child["sentences_per_second_passes"],
                "peak_rss_mib": child["peak_rss_mib"],
                "size_mib": _size_mib(exports[side], side),
                "same_translations_as_keras": child["translations"] == keras_translations,
            }
            for name, lowercase in (("bleu", False), ("bleu_lowercased", True)):
                score = bleu.corpus_bleu(child["translations"], references, lowercase=lowercase)
                result[name] = score.score
                result[name + "_signature"] = score.signature
            measured.append(result)
    keras = measured[0]
    return {
        "command": None,
        "versions": report.versions(),
        "machine": report.machine(),
        "run": str(run_dir),
        "preset": config.get("preset"),
        "data": data or "the run's synthetic test set",
        "sentences": len(pairs),
        "batch_1_sentences": min(BATCH_1_SENTENCES, len(pairs)),
        "search": search,
        "sides": measured,
        "summary": {
            f"{entry['side']} / Keras, batch {batch}": entry["sentences_per_second"][str(batch)]
            / keras["sentences_per_second"][str(batch)]
            for entry in measured[1:]
            for batch in BATCH_SIZES
        },
    }


def _ctranslate2_serves(config):
    """Whether the run exports to CTranslate2 here: a Transformer with a
    SentencePiece vocabulary, and ctranslate2 installed."""
    import importlib.util

    from zoo.errors import ZooUserError
    from zoo.export import ctranslate2_export

    if importlib.util.find_spec("ctranslate2") is None:
        return False
    try:
        ctranslate2_export.check_exportable(config)
    except ZooUserError:
        return False
    return True


def _serve_in_child(side, path, folder, search):
    """Runs `serve_side` in a child process; returns its report."""
    out = folder / "side.json"
    command = [sys.executable, __file__, side, str(path)]
    command += [str(folder / "sources.json"), str(out), json.dumps(search)]
    subprocess.run(command, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return json.loads(out.read_text())


def _size_mib(path, side):
    """MiB on disk of an export folder (for Keras: the run's weights and
    vocabularies, what `zoo.load` reads)."""
    path = Path(path)
    if side == "Keras":
        from zoo import runs

        names = [runs.WEIGHTS, runs.CONFIG] + [
            p.name for p in path.iterdir() if p.suffix in (".vocab", ".model")
        ]
        files = [path / name for name in names if (path / name).is_file()]
    else:
        files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def _translator(side, path, search):
    """`translate(sentences) -> texts` of one side, one request a call;
    only what the side needs is imported."""
    if side.startswith(("ONNX", "CTranslate2")):
        sys.path.insert(0, str(path))
        import run  # the folder's runner, as a server that copied the folder runs it

        translator = run.load(path)
        return lambda group: [t.text for t in translator.translate(group, batch_size=len(group))]
    if side == "SavedModel":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

        signature = tf.saved_model.load(str(path)).signatures["translate"]
        return lambda group: [
            t.decode() for t in signature(text=tf.constant(group))["translation"].numpy()
        ]
    import zoo

    translator = zoo.load(path)
    return lambda group: [
        t.text for t in translator.translate(group, batch_size=len(group), **search)
    ]


def serve_side(side, path, sources_file, out_file, search):
    """The child process: times one side at each batch size, writes a JSON
    report (sentences/s, peak RSS, the batch-32 translations)."""
    sources = json.loads(Path(sources_file).read_text())
    translate = _translator(side, path, search)
    passes = {}
    translations = None
    for batch in BATCH_SIZES:
        chosen = sources[:BATCH_1_SENTENCES] if batch == 1 else sources
        groups = [chosen[k : k + batch] for k in range(0, len(chosen), batch)]
        for group in groups:  # untimed: every shape traced, sessions warm
            translate(group)
        passes[str(batch)] = []
        for _ in range(TIMED_PASSES):
            start = time.perf_counter()
            texts = [text for group in groups for text in translate(group)]
            passes[str(batch)].append(len(chosen) / (time.perf_counter() - start))
        if batch == 32:
            translations = texts
    report_ = {
        "sentences_per_second": {batch: statistics.median(rates) for batch, rates in passes.items()},
        "sentences_per_second_passes": passes,
        "peak_rss_mib": _peak_rss_mib(),
        "translations": translations,
    }
    Path(out_file).write_text(json.dumps(report_))


def _peak_rss_mib():
    """This process's peak resident memory, MiB. Linux's VmHWM belongs to the
    process image, whereas `ru_maxrss` keeps the high-water mark of the
    parent that forked it, which is larger than the child's own."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def markdown_table(results):
    """The sides as a Markdown table."""
    lines = [
        "| side | sentences/s, batch 1 | sentences/s, batch 32 | peak RSS (MiB) | size (MiB) "
        "| BLEU (cased) | BLEU (lowercased) | Keras' translations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in results["sides"]:
        rates = entry["sentences_per_second"]
        lines.append(
            f"| {entry['side']} | {rates['1']:.1f} | {rates['32']:.1f} | "
            f"{entry['peak_rss_mib']:.0f} | {entry['size_mib']:.1f} | {entry['bleu']:.2f} | "
            f"{entry['bleu_lowercased']:.2f} | "
            f"{'same' if entry['same_translations_as_keras'] else 'differ'} |"
        )
    lines.append("")
    lines += [f"{name}: {ratio:.2f}x" for name, ratio in results["summary"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    # Run by path: its own folder (zoo/bench) is no place to import from.
    sys.path.pop(0)
    serve_side(*sys.argv[1:5], json.loads(sys.argv[5]))
