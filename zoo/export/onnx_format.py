"""The layout of an ONNX export folder, shared by its writer and its reader.

`zoo.export.onnx_export` writes the folder (TensorFlow and tf2onnx) and
`zoo.export.onnx_runner` reads it (onnxruntime); this module imports nothing, so
that serving an export needs neither TensorFlow's converter nor the writer.
See `zoo.export.onnx_export` for what each file holds.
"""

ENCODER = "encoder.onnx"
DECODER_STEP = "decoder_step.onnx"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "keras-attention-zoo-onnx"
# 2: the source's spec and the attention's state entry, the contract's
# declarations that the runner reads.
MANIFEST_VERSION = 2
# The prefix of the decoder-step outputs that carry a changed state entry:
# an ONNX graph cannot have an input and an output of the same name.
NEW_STATE_PREFIX = "new_"
