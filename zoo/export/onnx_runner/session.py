"""The export's two graphs in onnxruntime sessions, as the recipes' contract
over NumPy arrays (`OnnxModel`)."""

from pathlib import Path

import numpy as np

from .layout import ExportFolderError
from .layout import read_manifest


def default_session_options(intra_op_threads=0):
    """onnxruntime's defaults, but intra-op threads that sleep when idle.

    A decoding step is many small ops driven from a Python loop, and
    onnxruntime's worker threads spin between ops by default, taking the
    cores from that loop (and from anything else on the machine).

    Args:
        intra_op_threads: threads an op may be split over (0: onnxruntime's
            choice, one per core).
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = intra_op_threads
    return options


def _session(path, options, providers):
    """An onnxruntime session of the graph file `path`, or a one-line
    `ExportFolderError` naming it when onnxruntime cannot read it (a
    truncated or damaged file)."""
    import onnxruntime
    # onnxruntime's own exception classes: a damaged file is the user's to
    # fix, not a bug (onnxruntime exports them only from here).
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidProtobuf

    try:
        return onnxruntime.InferenceSession(str(path), options, providers=providers)
    except (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ExportFolderError(
            f"cannot load {path}: {reason}; if the file is truncated or damaged, "
            "export the run again with `zoo export RUN_DIR --format onnx`"
        ) from None


class OnnxModel:
    """An exported model's encode / decode_step, run by onnxruntime.

    The recipes' contract over NumPy arrays (`zoo.recipes.contract`):
    `encode(source) -> state`, `decode_step(previous_tokens, state, step) ->
    (logits, state, attention)`, and the declarations the searches read.

    Args:
        folder: an export folder.
        providers: onnxruntime execution providers (default: CPU).
        session_options: optional `onnxruntime.SessionOptions` for both
            graphs; default: `default_session_options()` for the encoder,
            and the same on one thread for the decoder step (its ops are
            small: splitting each over threads costs more than it saves,
            docs/performance.md "Serving latency").

    Attributes:
        manifest: the folder's manifest dict.
        pad_id, bos_id, eos_id, max_target_length, constant_state_keys,
        attention_state_key, step_cache_axes: the contract's declarations,
        from the manifest.
        image_size, grid_shape: for a captioning export (else None).
    """

    def __init__(self, folder, providers=None, session_options=None):
        # Imported here, so that `--help`, the manifest and the limits are
        # read without loading onnxruntime.
        import onnxruntime

        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        providers = providers or ["CPUExecutionProvider"]
        encoder_options = session_options or default_session_options()
        step_options = session_options or default_session_options(intra_op_threads=1)
        graphs = self.manifest["graphs"]
        self.encoder = _session(self.folder / graphs["encoder"]["file"], encoder_options, providers)
        self.decoder = _session(
            self.folder / graphs["decoder_step"]["file"], step_options, providers
        )
        self.pad_id = self.manifest["pad_id"]
        self.bos_id = self.manifest["bos_id"]
        self.eos_id = self.manifest["eos_id"]
        self.max_target_length = self.manifest["max_target_length"]
        self.attention_state_key = self.manifest["attention_state_key"]
        self.step_cache_axes = self.manifest["step_cache_axes"]
        self.image_size = self.manifest["image_size"]
        grid = self.manifest["grid_shape"]
        self.grid_shape = tuple(grid) if grid else None
        self._state_names = self.manifest["state"]
        self._carried = self.manifest["carried_state"]
        self.constant_state_keys = tuple(n for n in self._state_names if n not in self._carried)
        self._step_outputs = graphs["decoder_step"]["outputs"]
        self._source = self.manifest["source"]

    def attention_width(self, state):
        """S: axis 1 of the declared state entry."""
        return int(state[self.attention_state_key].shape[1])

    def encode(self, source):
        """Source `[B, S]` int32 ids (or images `[B, H, W, 3]`) -> state dict."""
        source = np.asarray(source, self._source["dtype"])
        values = self.encoder.run(self._state_names, {self._source["name"]: source})
        return dict(zip(self._state_names, values))

    def decode_step(self, previous_tokens, state, step):
        """One target step: `(logits [B, V], state, attention [B, S])`."""
        feeds = {name: np.asarray(state[name]) for name in self._state_names}
        feeds["previous_tokens"] = np.asarray(previous_tokens, "int32")
        feeds["step"] = np.asarray(step, "int32")
        logits, attention, *carried = self.decoder.run(self._step_outputs, feeds)
        return logits, {**state, **dict(zip(self._carried, carried))}, attention
