"""The export tests' shared fixture: each tiny run exported once per process."""

import pytest
from onnx_exports import OVERWRITTEN
from onnx_exports import STALE
from onnx_exports import Exported
from onnx_exports import write_run


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    """`exports(preset)`: the `Exported` tiny run of `preset`, made once."""
    import zoo
    from zoo.export import onnx_export
    from zoo.export import onnx_runner

    made = {}

    def export(preset):
        if preset not in made:
            root = tmp_path_factory.mktemp(preset)
            run_dir = write_run(root / "run", preset)
            if preset == OVERWRITTEN:
                (root / "onnx").mkdir()
                (root / "onnx" / STALE).write_text("from an older export")
            out = onnx_export.export_onnx(run_dir, root / "onnx", overwrite=preset == OVERWRITTEN)
            made[preset] = Exported(run_dir, out, zoo.load(run_dir), onnx_runner.load(out))
        return made[preset]

    return export
