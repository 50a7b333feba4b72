"""Export of a trained Transformer run to CTranslate2.

The weights are written through CTranslate2's own specification API
(`ctranslate2.specs.TransformerSpec`) and its converter, which validates the
specification, quantizes it and saves it. The folder it writes runs with
`ctranslate2` and `sentencepiece` alone:

    model.bin, config.json,   the CTranslate2 model (`ctranslate2.Translator`
    shared_vocabulary.json    reads the folder) and its vocabularies, the
                              run's SentencePiece pieces in id order
                              (`source_vocabulary.json` and
                              `target_vocabulary.json` when they differ)
    *.model                   the run's SentencePiece model(s), as they are
    manifest.json             what it is, from which run, the search defaults
                              (beam, length penalty), the step limit, the
                              source cut
    run.py, ct2_runner/       the runner: `python run.py "a sentence"`
                              (`zoo.export.ctranslate2_runner`, copied whole)
    README.md                 how to run it

Only the Transformer maps onto CTranslate2's layers, and only a SentencePiece
run tokenizes without TensorFlow there; any other run is refused with a
one-line error that names `--format onnx`, which exports every recipe.

Example:

>>> from zoo.export.ctranslate2_export import export_ctranslate2
>>> export_ctranslate2("runs/transformer_multi30k", "exports/ct2",
...                    quantize="int8")  # doctest: +SKIP
"""

import shlex
import shutil
from pathlib import Path

import ctranslate2
import numpy as np
from ctranslate2.specs import TransformerSpec

import zoo
from zoo import files
from zoo import runs
from zoo.errors import ZooUserError
from zoo.export import ctranslate2_runner as runner
from zoo.export.onnx_export import example_source
from zoo.inference.search_settings import SearchSettings
from zoo.recipes.contract import BOS_TOKEN
from zoo.recipes.contract import EOS_TOKEN
from zoo.recipes.contract import UNK_TOKEN
from zoo.recipes.transformer import sinusoidal_positions
from zoo.tasks import check_run_directory
from zoo.training.config import of_run
from zoo.training.config import trained_max_length

# `export_ctranslate2`'s `quantize` values: CTranslate2's weight types.
QUANTIZATIONS = (None, "int8", "int16", "float16", "bfloat16")


class Ctranslate2ExportError(ZooUserError):
    """A run that cannot be exported to CTranslate2, or an output folder in the way."""


def export_ctranslate2(run_dir, out, overwrite=False, beam=1, length_penalty=0.6, quantize=None):
    """Exports a Transformer run to a CTranslate2 folder that runs on its own.

    The folder is written under a temporary name next to `out` and renamed
    at the end, so `out` is never half-written.

    Args:
        run_dir: a run directory of the Transformer recipe, with a
            SentencePiece vocabulary, written by `zoo train`.
        out: the folder to write (see the module docstring for its files).
        overwrite: replace `out` when it exists and is not empty.
        beam, length_penalty: the runner's search defaults. CTranslate2
            divides a hypothesis' log-probability by `length ** length_penalty`,
            not by GNMT's `((5 + length) / 6) ** length_penalty` as this
            package does, so beam results can differ for a penalty above 0.
        quantize: None (float32), or the weight type "int8", "int16",
            "float16" or "bfloat16".

    Returns:
        The `Path` of `out`.

    Raises:
        RunDirectoryError: `run_dir` is missing or incomplete.
        Ctranslate2ExportError: a run CTranslate2 cannot hold, `out` in the
            way (exists and is not empty, without `overwrite`), or a bad
            option.
    """
    run_dir = check_run_directory(run_dir)
    out = Path(out)
    config = runs.read_json(run_dir / runs.CONFIG)
    check_exportable(config)
    settings = SearchSettings.checked(
        Ctranslate2ExportError, beam=beam, length_penalty=length_penalty
    )
    if quantize not in QUANTIZATIONS:
        raise Ctranslate2ExportError(
            f"quantize must be one of {', '.join(map(str, QUANTIZATIONS))}; received {quantize!r}"
        )
    files.check_output_folder(out, overwrite, Ctranslate2ExportError)
    translator = zoo.load(run_dir)
    vocabularies = runs.vocabulary_files(("source", "target"), of_run(config))
    with files.replacing(out, folder=True) as staging:
        spec = transformer_spec(
            translator.model,
            source_tokens=tokens_of(translator.source_tokenizer),
            target_tokens=tokens_of(translator.target_tokenizer),
        )
        _SpecConverter(spec).convert(str(staging), quantization=quantize, force=True)
        for name in set(vocabularies.values()):
            shutil.copyfile(run_dir / name, staging / name)
        manifest = _manifest(translator.model, config, vocabularies, settings, quantize)
        manifest.update(run=_run_of(run_dir))
        runs.write_json(staging / runner.MANIFEST, manifest)
        runner.write_runner(staging)
        readme = folder_readme(manifest, example_source(config))
        (staging / runner.README).write_text(readme, encoding="utf-8")
    return out


def check_exportable(config):
    """Refuses, in one line, a run CTranslate2 cannot hold: a recipe other
    than the Transformer, or a WordPiece vocabulary (the runner tokenizes
    with `sentencepiece` alone)."""
    if config["recipe"] != "transformer":
        raise Ctranslate2ExportError(
            f"CTranslate2 holds only Transformer runs, and this is a {config['recipe']} run; "
            "export it with --format onnx"
        )
    if of_run(config).tokenizer != "sentencepiece":
        raise Ctranslate2ExportError(
            "the CTranslate2 export needs a SentencePiece run (`zoo train --tokenizer "
            "sentencepiece`), and this run has WordPiece vocabularies; export it with --format onnx"
        )


class _SpecConverter(ctranslate2.converters.Converter):
    """CTranslate2's converter (validation, quantization, saving) over a
    specification already filled in."""

    def __init__(self, spec):
        self._spec = spec

    def _load(self):
        return self._spec


def tokens_of(tokenizer):
    """A tokenizer's pieces in id order: the vocabulary CTranslate2 maps ids by."""
    return [tokenizer.id_to_token(i) for i in range(tokenizer.vocabulary_size)]


def transformer_spec(model, source_tokens, target_tokens):
    """The `ctranslate2.specs.TransformerSpec` of a built `Transformer`
    recipe model, with its weights and vocabularies.

    Args:
        model: a `zoo.recipes.transformer.Transformer`.
        source_tokens, target_tokens: the pieces of each vocabulary, in id
            order (the contract's special tokens first).
    """
    spec = TransformerSpec.from_config(
        (model.num_encoder_layers, model.num_decoder_layers),
        model.num_heads,
        pre_norm=model.norm_first,
    )
    _set_embeddings(spec, model)
    for layer_spec, block in zip(spec.encoder.layer, model.encoder_blocks):
        _set_self_attention(
            layer_spec.self_attention, block.self_attention, block.attention_residual
        )
        _set_feed_forward(layer_spec.ffn, block.feed_forward, block.feed_forward_residual)
    for layer_spec, block in zip(spec.decoder.layer, model.decoder_blocks):
        _set_self_attention(
            layer_spec.self_attention, block.self_attention, block.self_attention_residual
        )
        _set_cross_attention(
            layer_spec.attention, block.cross_attention, block.cross_attention_residual
        )
        _set_feed_forward(layer_spec.ffn, block.feed_forward, block.feed_forward_residual)
    if model.norm_first:
        _set_layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        _set_layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    if model.share_target_embeddings:
        spec.decoder.projection.weight = spec.decoder.embeddings.weight
    else:
        _set_linear(spec.decoder.projection, model.output_projection)
    spec.register_source_vocabulary(source_tokens)
    spec.register_target_vocabulary(target_tokens)
    _set_config(spec.config, model)
    return spec


def _set_embeddings(spec, model):
    """The token embeddings, scaled by sqrt(d_model) as `Transformer._embed`
    scales them, and the recipe's positional table."""
    positions = sinusoidal_positions(
        max(model.max_source_length, model.max_target_length), model.d_model
    )
    # CTranslate2's own table is [sin, cos] concatenated and starts at
    # position 1; the recipe's interleaves them from position 0.
    spec.encoder.position_encodings.encodings = positions
    spec.decoder.position_encodings.encodings = positions
    spec.encoder.scale_embeddings = True
    spec.decoder.scale_embeddings = True
    spec.encoder.embeddings[0].weight = _numpy(model.source_embedding.embeddings)
    spec.decoder.embeddings.weight = _numpy(model.target_embedding.embeddings)


def _set_config(config, model):
    """The special tokens of the contract, no token added to the source
    (the Python API adds none), and the recipe's layer norm epsilon."""
    config.unk_token = UNK_TOKEN
    config.bos_token = BOS_TOKEN
    config.eos_token = EOS_TOKEN
    config.decoder_start_token = BOS_TOKEN
    config.add_source_bos = False
    config.add_source_eos = False
    config.layer_norm_epsilon = model.decoder_blocks[0].feed_forward_residual.norm.epsilon


def _numpy(variable):
    return variable.numpy().astype("float32")


def _projection_matrix(layer, inputs_first):
    """The `[out, in]` matrix of a multi-head projection (`EinsumDense`),
    whose kernel is `[in, heads, key_dim]` for queries, keys and values, or
    `[heads, key_dim, out]` for the output; the heads keep their order, as
    CTranslate2 splits them."""
    kernel = _numpy(layer.kernel)
    if inputs_first:
        return kernel.reshape(kernel.shape[0], -1).T
    return kernel.reshape(-1, kernel.shape[-1]).T


def _set_self_attention(spec, attention, residual):
    queries, keys, values = (
        _projection_matrix(dense, inputs_first=True)
        for dense in (attention._query_dense, attention._key_dense, attention._value_dense)
    )
    spec.linear[0].weight = _concatenate(queries, keys, values)
    spec.linear[1].weight = _projection_matrix(attention._output_dense, inputs_first=False)
    _set_layer_norm(spec.layer_norm, residual.norm)


def _set_cross_attention(spec, attention, residual):
    spec.linear[0].weight = _projection_matrix(attention._query_dense, inputs_first=True)
    keys, values = (
        _projection_matrix(dense, inputs_first=True)
        for dense in (attention._key_dense, attention._value_dense)
    )
    spec.linear[1].weight = _concatenate(keys, values)
    spec.linear[2].weight = _projection_matrix(attention._output_dense, inputs_first=False)
    _set_layer_norm(spec.layer_norm, residual.norm)


def _concatenate(*matrices):
    """Matrices `[out_i, in]` stacked into one `[sum of out_i, in]`: CTranslate2
    fuses the projections that read the same input."""
    return np.concatenate(matrices, axis=0)


def _set_feed_forward(spec, feed_forward, residual):
    _set_linear(spec.linear_0, feed_forward.inner)
    _set_linear(spec.linear_1, feed_forward.outer)
    _set_layer_norm(spec.layer_norm, residual.norm)


def _set_linear(spec, dense):
    """A Keras `Dense` (kernel `[in, out]`) as CTranslate2's `[out, in]` linear."""
    spec.weight = _numpy(dense.kernel).T
    if dense.use_bias:
        spec.bias = _numpy(dense.bias)


def _set_layer_norm(spec, norm):
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _manifest(model, config, vocabularies, settings, quantize):
    return {
        "format": runner.MANIFEST_FORMAT,
        "version": runner.MANIFEST_VERSION,
        "task": "translation",
        "preset": config.get("preset"),
        "recipe": config["recipe"],
        "ctranslate2_version": ctranslate2.__version__,
        "quantization": quantize or "float32",
        "vocabularies": vocabularies,
        "max_target_length": model.max_target_length,
        # Sources are cut to it, as the Python API cuts them.
        "training_max_length": trained_max_length(config),
        "search": {"beam": settings.beam, "length_penalty": settings.length_penalty},
        "config": config,
    }


def _run_of(run_dir):
    """What the manifest records of the run exported: its folder and its
    weights file's size and SHA-256."""
    return {
        "directory": str(run_dir.resolve()),
        "weights": files.fingerprint(run_dir / runs.WEIGHTS),
    }


def folder_readme(manifest, example_source="a sentence in the source language"):
    """The README.md of an export folder: how to run it, from its manifest;
    the example command translates `example_source`."""
    search = manifest["search"]
    roles = {}
    for role, name in manifest["vocabularies"].items():
        roles.setdefault(name, []).append(role)
    vocabularies = ", ".join(f"`{name}` ({' and '.join(r)})" for name, r in roles.items())
    limit = manifest["training_max_length"]
    cut = (
        f"A sentence longer than {limit} pieces is cut (`zoo translate` splits it at "
        "sentence ends first).\n"
        if limit
        else ""
    )
    name = manifest.get("preset") or manifest["recipe"]
    return f"""# {name}: a CTranslate2 export of keras-attention-zoo

Translation with CTranslate2 alone: nothing of keras-attention-zoo, Keras or TensorFlow is
needed. Copy this folder anywhere and:

    pip install ctranslate2 sentencepiece
    python run.py {shlex.quote(example_source)}
    python run.py --input inputs.txt --beam 5 > outputs.txt
    python run.py --help

`run.py` is also a module: `import run; run.load(".").translate([...])`. The model is an ordinary
CTranslate2 model: `ctranslate2.Translator(".")` reads it, over the pieces of the SentencePiece
model, with no token added to the source (the decoder starts from `[BOS]`).

## Files

- `model.bin`, `config.json`, `*_vocabulary.json`: the CTranslate2 model, weights in
  {manifest['quantization']}.
- {vocabularies}: the SentencePiece model(s) of the run.
- `{runner.MANIFEST}`: what this is, from which run, the search defaults and the limits.
- `{runner.RUNNER}` and `{runner.RUNNER_PACKAGE}/`: tokenization, batching and the command line;
  `run.py` runs the package beside it (keep the two together).

## Search (the defaults of `run.py`; each has a flag)

- beam: {search['beam']}
- length penalty: {search['length_penalty']}

The length penalty is CTranslate2's: a hypothesis' log-probability is divided by
`length ** alpha`, whereas keras-attention-zoo divides it by GNMT's `((5 + length) / 6) ** alpha`.
Beam search can therefore pick other translations than `zoo translate` for alpha > 0; with
alpha 0, and with greedy search (beam 1), they are the same.

{cut}An empty sentence gives an empty translation.
"""
