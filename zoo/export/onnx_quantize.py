"""int8 dynamic quantization of an ONNX export folder's graphs
(`zoo export --format onnx --quantize int8`).

onnxruntime's own `quantize_dynamic` does the work: the weights of the
matrix products become int8 and their activations are quantized per call,
so no calibration data is needed. This module only applies it to both
graphs of a folder, in place, through temporary files.
"""

import contextlib
import logging
from pathlib import Path

from zoo.export.onnx_runner import DECODER_STEP
from zoo.export.onnx_runner import ENCODER

# The matrix products, where the time of a decoding step goes; the other
# ops stay float32.
QUANTIZED_OPS = ("MatMul", "Gemm")


def quantize_int8(folder):
    """Replaces the folder's encoder and decoder-step graphs by their int8
    dynamic quantization; returns the manifest's `quantization` entry.

    A graph is written under a temporary name and renamed over the float
    one only once quantized, so a failure leaves the float graphs in place.
    """
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic

    folder = Path(folder)
    for name in (ENCODER, DECODER_STEP):
        graph = folder / name
        quantized = folder / f".{name}.int8"
        with _without_pre_processing_advice():
            quantize_dynamic(
                graph,
                quantized,
                op_types_to_quantize=list(QUANTIZED_OPS),
                weight_type=QuantType.QInt8,
                # A scale per output column: a column of small weights keeps
                # its precision beside a column of large ones.
                per_channel=True,
            )
        quantized.replace(graph)
    return {"quantization": "int8-dynamic", "op_types": list(QUANTIZED_OPS), "per_channel": True}


class _PreProcessingAdvice(logging.Filter):
    def filter(self, record):
        return not record.getMessage().startswith("Please consider to run pre-processing")


@contextlib.contextmanager
def _without_pre_processing_advice():
    """Holds back the warning `quantize_dynamic` logs on the root logger for
    a graph that did not go through `quant_pre_process`.

    The pre-processing (shape inference and onnxruntime's graph
    optimizations) did not make the int8 Transformer step faster (measured in
    docs/performance.md), and its symbolic shape inference fails on these
    graphs, so the advice is noise on `zoo export`'s console.
    """
    advice = _PreProcessingAdvice()
    logging.getLogger().addFilter(advice)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(advice)
