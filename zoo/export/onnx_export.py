"""Export of a trained run to ONNX: an encoder graph and a decoder-step graph.

TensorFlow only by nature: the graphs are traced with `tf.function` and
converted with tf2onnx. The folder it writes is everything
`zoo.export.onnx_runner` (or any onnxruntime client) needs:

    encoder.onnx         source (int32 [B, S]) or image (float32 [B, H, W, 3])
                         -> the decoding state, one output per state entry
    decoder_step.onnx    previous_tokens (int32 [B]), step (int32 scalar),
                         the state entries -> logits [B, V], attention
                         [B, S], and new_<name> for each entry a step changes
    run.py               runs the runner: `python run.py "a sentence"`
    onnx_runner/         the runner, `zoo.export.onnx_runner` copied whole
                         (numpy and onnxruntime only; `run.py` puts it on
                         the path)
    README.md            how to run the folder, its inputs, outputs, limits
    source.vocab         source vocabulary (translation only)
    target.vocab         target (or caption) vocabulary
                         (the run's vocabulary files as they are: .model
                         files for a SentencePiece run, one shared file
                         for a shared vocabulary)
    manifest.json        the source's name, shape and dtype, the state
                         names in order, which ones a step changes, each
                         graph's inputs and outputs, the special ids, the
                         state entry that gives the attention width, length
                         limits (the model's, and the training max_length
                         that cuts sources or captions), task, image size
                         and grid, the search settings, the request limits,
                         and the run's config

The two graphs follow the recipes' contract (docs/design.md, "The one
contract", `zoo.recipes.contract`): `encode(source) -> state` and
`decode_step(previous_tokens, state, step) -> (logits, state, attention)`,
and the manifest holds its declarations. The source is traced with the
model's `source_spec`, so the axes it leaves open (the batch, the source
length) stay dynamic in every state entry that follows them: one file
serves every batch and sentence length.

Why two graphs and not the whole decoder loop: tf2onnx does turn the
`while_loop` of `zoo.recipes.decoding.greedy_search` into an ONNX `Loop`
(and its buffer writes through the handler below), but the result does not
load: `keras.ops.argmax` on TensorFlow tests for -0.0 with `tf.bitcast`
(its flush-to-zero fix), and ONNX has no bitcast operator. A loop graph
would also fix the search (greedy or beam, the penalties, the step limit),
whereas the step graph serves greedy and beam search alike and can be
driven from any language.

Example:

>>> from zoo.export.onnx_export import export_onnx
>>> export_onnx("runs/rnnsearch_small", "exports/rnnsearch_small")  # doctest: +SKIP
"""

import contextlib
import shutil
import shlex
from pathlib import Path

import keras
import numpy as np
import onnx
import tensorflow as tf
import tf2onnx
from keras import ops
from onnx import TensorProto
from tf2onnx import utils as tf2onnx_utils
from tf2onnx.graph_builder import GraphBuilder
from tf2onnx.handler import tf_op

import zoo
from zoo import files
from zoo import runs
from zoo.errors import ZooUserError
from zoo.inference.search_settings import SearchSettings
from zoo.tasks import check_run_directory
from zoo.tasks import task_for
from zoo.export import onnx_runner
from zoo.export.onnx_recurrent import recurrent_layers_as_onnx_operators
from zoo.export.onnx_runner import DECODER_STEP
from zoo.export.onnx_runner import ENCODER
from zoo.export.onnx_runner import MANIFEST
from zoo.export.onnx_runner import MANIFEST_FORMAT
from zoo.export.onnx_runner import MANIFEST_VERSION
from zoo.export.onnx_runner import NEW_STATE_PREFIX
from zoo.export.onnx_runner import README
from zoo.export.onnx_runner import RUNNER
from zoo.export.onnx_runner import RUNNER_PACKAGE
from zoo.recipes.contract import carried_state_keys
from zoo.training.config import of_run
from zoo.training.config import trained_max_length

# tf2onnx's preferred opset (`tf2onnx.constants.PREFERRED_OPSET` of the
# pinned tf2onnx): the one its own tests cover, and one onnxruntime runs.
OPSET = 15
# Compute dtypes whose graphs convert but do not load in onnxruntime (see
# `check_exportable_policy`).
UNEXPORTABLE_COMPUTE_DTYPES = ("bfloat16",)


class OnnxExportError(ZooUserError):
    """A run that cannot be exported to ONNX, or an output folder in the way."""


def export_onnx(
    run_dir,
    out,
    overwrite=False,
    opset=OPSET,
    beam=1,
    length_penalty=0.6,
    coverage_penalty=0.0,
    stopping="early",
    limits=None,
    quantize=None,
):
    """Exports a run directory's model to an ONNX folder that runs on its own.

    The folder is written under a temporary name next to `out` and renamed
    at the end, so `out` is never half-written.

    Args:
        run_dir: a run directory written by `zoo train`.
        out: the folder to write (see the module docstring for its files).
        overwrite: replace `out` when it exists and is not empty.
        opset: the ONNX opset of the graphs.
        beam, length_penalty, coverage_penalty, stopping: the search
            settings the manifest holds: the runner's defaults.
        limits: optional dict overriding `onnx_runner.DEFAULT_LIMITS`
            (`max_batch`, `max_image_bytes`, `max_image_side`), the
            runner's request limits.
        quantize: None, or "int8" for onnxruntime's dynamic int8
            quantization of the graphs' matrix products.

    Returns:
        The `Path` of `out`.

    Raises:
        RunDirectoryError: `run_dir` is missing or incomplete.
        OnnxExportError: `out` exists and is not empty (without
            `overwrite`), a bad option, or a dtype policy that cannot be
            exported.
    """
    run_dir = check_run_directory(run_dir)
    out = Path(out)
    files.check_output_folder(out, overwrite, OnnxExportError)
    settings = SearchSettings.checked(
        OnnxExportError,
        beam=beam,
        length_penalty=length_penalty,
        coverage_penalty=coverage_penalty,
        stopping=stopping,
    )
    limits = onnx_runner.check_limits(limits, OnnxExportError)
    if quantize not in QUANTIZATIONS:
        raise OnnxExportError(
            f"quantize must be one of {', '.join(map(str, QUANTIZATIONS))}; received {quantize!r}"
        )
    config = runs.read_json(run_dir / runs.CONFIG)
    model = zoo.load(run_dir).model
    check_exportable_policy(model)
    task = task_for(config)

    with files.replacing(out, folder=True) as staging:
        graphs = convert_model(model, staging, opset=opset)
        quantization = None
        if quantize == "int8":
            from zoo.export.onnx_quantize import quantize_int8

            quantization = quantize_int8(staging)
        vocabularies = task.vocabulary_files(config)
        for name in set(vocabularies.values()):
            shutil.copyfile(run_dir / name, staging / name)
        manifest = _manifest(model, task, config, graphs, vocabularies, opset)
        manifest.update(
            search={name: getattr(settings, name) for name in MANIFEST_SEARCH_SETTINGS},
            limits=limits,
            quantization=quantization,
        )
        runs.write_json(staging / MANIFEST, manifest)
        onnx_runner.write_runner(staging)
        readme = folder_readme(manifest, example_source(config))
        (staging / README).write_text(readme, encoding="utf-8")
    return out


# `export_onnx`'s `quantize` values.
QUANTIZATIONS = (None, "int8")


# The `SearchSettings` fields the manifest holds: the runner's defaults.
MANIFEST_SEARCH_SETTINGS = ("beam", "length_penalty", "coverage_penalty", "stopping")


def example_source(config):
    """A sentence in the source language of the run of `config`, for its
    export's README: one of the embedded corpus for a synthetic-data run (a
    sentence of another language would only give unknown words); for a run
    of the user's own corpus, whose language is not recorded, a placeholder."""
    from zoo.data.synthetic import synthetic_corpus

    training = of_run(config)
    if not training.is_synthetic:
        return "a sentence in the source language"
    return synthetic_corpus(1, seed=training.seed, max_length=8)[0][0]


def folder_readme(manifest, example_source="a sentence in the source language"):
    """The README.md of an export folder: how to run it, its inputs,
    outputs and limits, from its manifest; a translator's example command
    translates `example_source`."""
    translation = manifest["task"] == onnx_runner.TRANSLATION
    source = manifest["source"]
    state = ", ".join(manifest["state"])
    carried = ", ".join(NEW_STATE_PREFIX + name for name in manifest["carried_state"])
    limits = manifest["limits"]
    search = manifest["search"]
    vocabularies = ", ".join(f"`{name}` ({role})" for role, name in manifest["vocabularies"].items())
    needs = ["numpy", "onnxruntime"]
    if any(name.endswith(".model") for name in manifest["vocabularies"].values()):
        needs.append("sentencepiece")
    if not translation:
        needs.append("pillow")
    example = shlex.quote(example_source) if translation else "photo.jpg"
    quantized = manifest.get("quantization")
    return f"""# {manifest.get('preset') or manifest['recipe']}: an ONNX export of keras-attention-zoo

{'Translation' if translation else 'Image captioning'} with onnxruntime alone: nothing of
keras-attention-zoo, Keras or TensorFlow is needed. Copy this folder anywhere and:

    pip install {' '.join(needs)}
    python run.py {example}
    python run.py --input inputs.txt --output outputs.txt --beam 5
    python run.py --help

`run.py` is also a module: `import run; run.load(".").{'translate' if translation else 'caption'}([...])`.

## Files

- `{ENCODER}`: `{source['name']}` ({source['dtype']} {source['shape']}) -> the decoding state: {state}.
- `{DECODER_STEP}`: `previous_tokens` (int32 [B]), `step` (int32 scalar) and the state ->
  `logits` (float32 [B, V]), `attention` (float32 [B, S]){', ' + carried if carried else ''}.
  Axes left open (None) are dynamic: one file serves every batch size and length.
- {vocabularies}: the tokenizer files.
- `{MANIFEST}`: everything above as data, the special ids
  (PAD {manifest['pad_id']}, BOS {manifest['bos_id']}, EOS {manifest['eos_id']}),
  the step limit, the search settings and the request limits.
- `{RUNNER}` and `{RUNNER_PACKAGE}/`: tokenization, greedy and beam search, and the command line,
  in NumPy; `run.py` runs the package beside it (keep the two together).
{f"- The graphs' matrix products are quantized ({quantized['quantization']})." + chr(10) if quantized else ''}
## Search (the defaults of `run.py`; each has a flag)

- beam: {search['beam']}
- length penalty: {search['length_penalty']}
- coverage penalty: {search['coverage_penalty']}
- stopping rule: {search['stopping']}

## Request limits

A request (one `{'translate' if translation else 'caption'}` call; `run.py` sends its inputs in
requests of at most `max_batch`) is refused, with an error that names the limit, when it has
more than `max_batch` = {limits['max_batch']} {'sentences' if translation else 'images'}{'' if translation else f", an image file of more than `max_image_bytes` = {limits['max_image_bytes']} bytes, or an image side of more than `max_image_side` = {limits['max_image_side']} pixels"}.
{'A sentence longer than ' + str(manifest['training_max_length']) + ' pieces is split at sentence ends, and a part still longer is cut (run.py says so on standard error).' if translation and manifest.get('training_max_length') else ''}
"""


def check_exportable_policy(model):
    """Refuses a model whose layers compute in a dtype onnxruntime can't load.

    `mixed_bfloat16` graphs convert, but onnxruntime rejects them on
    loading, for want of bfloat16 kernels for some of their ops (such as
    ReverseSequence, Conv, or Gemm mixing bfloat16 and float16); `float32`,
    `mixed_float16` and `float16` export and run, float16 logits rounded to
    float16. (`float64` and `bfloat16` do not build on TensorFlow's CPU
    kernels.)

    Args:
        model: a built recipe model.

    Raises:
        OnnxExportError: naming the policy and the fix.
    """
    policies = sorted(
        {
            layer.dtype_policy.name
            for layer in model._flatten_layers(include_self=True)
            if keras.backend.standardize_dtype(layer.dtype_policy.compute_dtype)
            in UNEXPORTABLE_COMPUTE_DTYPES
        }
    )
    if policies:
        raise OnnxExportError(
            f"cannot export a model with dtype policy {', '.join(policies)} to ONNX: "
            "onnxruntime does not load bfloat16 graphs; rebuild it with the float32 "
            "(or mixed_float16) policy"
        )


def convert_model(model, folder, opset=OPSET):
    """Converts `model.encode` and `model.decode_step` into two ONNX files.

    Args:
        model: a built recipe model (a `zoo.recipes.contract.SequenceGenerator`).
        folder: where to write `encoder.onnx` and `decoder_step.onnx`.
        opset: the ONNX opset.

    Returns:
        A dict describing the graphs for the manifest: `source` (the
        model's `source_spec`), `state` (entry names, in the order of the
        decoder's inputs), `carried_state` (the entries a step changes,
        output as `new_<name>`), and `graphs`: the file, inputs and outputs
        of each graph.
    """
    folder = Path(folder)
    source = model.source_spec
    source_spec = tf.TensorSpec(source.shape, source.dtype, name=source.name)

    def encode(source):
        return dict(model.encode(source, training=False))

    state = _convert(encode, [source_spec], folder / ENCODER, opset)
    names = list(state)
    carried = carried_state_keys(model, state)
    # The traced state's shapes: None wherever an entry follows an open axis
    # of the source.
    state_specs = [
        tf.TensorSpec(_open_step_axis(model, name, state[name].shape), state[name].dtype, name=name)
        for name in names
    ]
    token_spec = tf.TensorSpec([None], tf.int32, name="previous_tokens")
    step_spec = tf.TensorSpec([], tf.int32, name="step")

    def decode_step(previous_tokens, step, *entries):
        logits, state, attention = model.decode_step(
            previous_tokens, dict(zip(names, entries)), step
        )
        outputs = {"logits": logits, "attention": attention}
        outputs.update({NEW_STATE_PREFIX + name: state[name] for name in carried})
        return outputs

    _convert(decode_step, [token_spec, step_spec] + state_specs, folder / DECODER_STEP, opset)
    return {
        "source": {"name": source.name, "shape": list(source.shape), "dtype": source.dtype},
        "state": names,
        "carried_state": carried,
        "graphs": {
            "encoder": {"file": ENCODER, "inputs": [source.name], "outputs": names},
            "decoder_step": {
                "file": DECODER_STEP,
                "inputs": ["previous_tokens", "step"] + names,
                "outputs": ["logits", "attention"] + [NEW_STATE_PREFIX + n for n in carried],
            },
        },
    }


def _open_step_axis(model, name, shape):
    """A state entry's shape, with the slot axis of a declared step cache
    left open: the searches cut the caches to their step limit
    (`zoo.recipes.contract.fit_step_caches`)."""
    shape = list(shape)
    axis = model.step_cache_axes.get(name)
    if axis is not None:
        shape[axis] = None
    return shape


def _convert(function, signature, path, opset):
    """Traces `function` over `signature` into the ONNX file `path`.

    Returns:
        The traced outputs (symbolic tensors, with the shapes TensorFlow
        inferred), in the structure `function` returns.
    """
    with _fusable_layer_norms(), recurrent_layers_as_onnx_operators() as handlers:
        traced = tf.function(function, input_signature=signature)
        outputs = traced.get_concrete_function().structured_outputs
        # The trace above is cached: tf2onnx converts that same graph.
        graph, _ = tf2onnx.convert.from_function(
            traced,
            input_signature=signature,
            opset=opset,
            custom_op_handlers=handlers,
        )
    if opset < 18:  # from opset 18 on, ReduceMean takes its axes as an input
        _global_pools_as_reduce_means(graph)
    onnx.save(graph, path)
    return outputs


def _global_pools_as_reduce_means(model):
    """Rewrites the ONNX `model`'s GlobalAveragePool nodes, in place, as the
    ReduceMean they stand for (over axes 2 and up, dimensions kept).

    tf2onnx's optimizer turns a mean over the last axis of a rank-3 tensor
    (a layer norm over `[batch, length, depth]`) into GlobalAveragePool, the
    same function, which onnxruntime's LayerNormFusion does not match.
    """
    ranks = {
        value.name: len(value.type.tensor_type.shape.dim)
        for value in onnx.shape_inference.infer_shapes(model).graph.value_info
        if value.type.tensor_type.HasField("shape")
    }
    for node in model.graph.node:
        if node.op_type == "GlobalAveragePool" and node.input[0] in ranks:
            node.op_type = "ReduceMean"
            node.attribute.extend(
                [
                    onnx.helper.make_attribute("axes", list(range(2, ranks[node.input[0]]))),
                    onnx.helper.make_attribute("keepdims", 1),
                ]
            )


@contextlib.contextmanager
def _fusable_layer_norms():
    """While tracing for ONNX, `keras.layers.LayerNormalization` over the last
    axis computes `(x - mean) / sqrt(var + eps) * gamma + beta`, written as
    onnxruntime's LayerNormFusion expects it.

    Keras writes the same function as `x * inv + (beta - mean * inv)` with
    `inv = rsqrt(var + eps) * gamma` (`keras.ops.layer_normalization`),
    which tf2onnx converts to a dozen nodes that onnxruntime runs one by one.
    A decoding step is hundreds of small nodes, so their count is much of its
    time; fused, each layer norm is one kernel (docs/performance.md, "Serving
    latency"). Other layer norms (other axes, RMS scaling, no centre or
    scale) keep Keras' form.
    """
    keras_call = keras.layers.LayerNormalization.call

    def call(layer, inputs):
        last_axis = layer.axis in (-1, [-1], len(inputs.shape) - 1, [len(inputs.shape) - 1])
        if not (last_axis and layer.center and layer.scale) or layer.rms_scaling:
            return keras_call(layer, inputs)
        x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, "float32"))
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.power(centered, 2.0), axis=-1, keepdims=True)
        normalized = centered / ops.sqrt(variance + layer.epsilon)
        outputs = normalized * ops.cast(layer.gamma, x.dtype) + ops.cast(layer.beta, x.dtype)
        return ops.cast(outputs, layer.compute_dtype)

    keras.layers.LayerNormalization.call = call
    try:
        yield
    finally:
        keras.layers.LayerNormalization.call = keras_call


def _manifest(model, task, config, graphs, vocabularies, opset):
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "opset": opset,
        "task": task.name,
        "preset": config.get("preset"),
        "recipe": config["recipe"],
        "vocabularies": vocabularies,
        "pad_id": model.pad_id,
        "bos_id": model.bos_id,
        "eos_id": model.eos_id,
        "attention_state_key": model.attention_state_key,
        "step_cache_axes": dict(model.step_cache_axes),
        "max_target_length": model.max_target_length,
        "max_source_length": getattr(model, "max_source_length", None),
        # Sources are cut to it (translation), or captions to it (captioning),
        # as the Python API does.
        "training_max_length": trained_max_length(config),
        "image_size": model.image_size,
        "grid_shape": None if model.grid_shape is None else list(model.grid_shape),
        "config": config,
        **graphs,
    }


# tf2onnx has no handler for XlaDynamicUpdateSlice, the op behind
# `keras.ops.slice_update` on TensorFlow (the Transformer's key/value cache
# write, the search buffers' step writes). It is ScatterND with one index
# per element of the update: the start, clamped as XLA clamps it so that the
# update fits, plus each element's position in the update.
@tf_op("XlaDynamicUpdateSlice")
class _DynamicUpdateSlice:
    @classmethod
    def version_13(cls, ctx, node, **kwargs):
        operand, update, start = node.input
        rank = ctx.get_rank(operand)
        tf2onnx_utils.make_sure(rank is not None, "XlaDynamicUpdateSlice needs a known rank")

        def const(value):
            name = tf2onnx_utils.make_name("dynamic_update_slice")
            return ctx.make_const(name, np.array(value, np.int64)).output[0]

        def op(op_type, *inputs, **attr):
            return ctx.make_node(op_type, list(inputs), attr=attr).output[0]

        operand_shape = op("Shape", operand)
        update_shape = op("Shape", update)
        start = op("Cast", start, to=TensorProto.INT64)
        room = op("Sub", operand_shape, update_shape)
        start = op("Max", op("Min", start, room), const([0] * rank))
        builder = GraphBuilder(ctx)
        coordinates = []
        for axis in range(rank):
            begin = op("Gather", start, const(axis))
            end = op("Add", begin, op("Gather", update_shape, const(axis)))
            positions = op("Range", begin, end, const(1))
            shape = [1] * rank
            shape[axis] = -1
            positions = op("Expand", op("Reshape", positions, const(shape)), update_shape)
            coordinates.append(builder.make_unsqueeze({"data": positions, "axes": [-1]}))
        indices = op("Concat", *coordinates, axis=-1)
        shapes, dtypes = node.output_shapes, node.output_dtypes
        ctx.remove_node(node.name)
        ctx.make_node(
            "ScatterND",
            [operand, indices, update],
            outputs=node.output,
            name=node.name,
            shapes=shapes,
            dtypes=dtypes,
        )
