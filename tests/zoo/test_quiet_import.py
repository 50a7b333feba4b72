"""zoo.quiet_import: TensorFlow's start-up lines are held back, the rest is not."""

import os
import subprocess
import sys
import textwrap

import pytest

from zoo.quiet_import import is_startup_noise

pytestmark = pytest.mark.backend_independent

# Lines as TensorFlow's libraries print them on a machine without a GPU.
NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796143090.623659   16306 cudart_stub.cc:31] Could not find cuda drivers "
    "on your machine, GPU will not be used.",
)


@pytest.mark.parametrize("line", NOISE)
def test_startup_lines_are_noise(line):
    assert is_startup_noise(line)


@pytest.mark.parametrize("line", [
    "W0000 00:00:1796143090.623659   16306 op_kernel.cc:1816] OP_REQUIRES failed",
    "E0000 00:00:1796143090.623659   16306 cuda_driver.cc:152] failed call to cuInit",
    "UserWarning: something the user should read",
])
def test_other_lines_are_not(line):
    assert not is_startup_noise(line)


def test_import_holds_back_the_noise_and_passes_the_rest(tmp_path):
    # A module that writes to file descriptor 2 as native code does, not
    # through sys.stderr, then a process that imports it quietly.
    lines = [*NOISE, "a real warning", NOISE[1], "and a second one"]
    payload = "".join(line + "\n" for line in lines).encode()
    (tmp_path / "noisy_module.py").write_text(f"import os\nos.write(2, {payload!r})\n")
    script = textwrap.dedent("""
        import sys
        from zoo.quiet_import import import_quietly
        import_quietly("noisy_module")
        print("after", file=sys.stderr)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=dict(os.environ, PYTHONPATH=str(tmp_path)),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "a real warning\nand a second one\nafter\n"


def test_a_failing_import_still_shows_what_it_wrote(tmp_path):
    (tmp_path / "broken_module.py").write_text(
        "import os\nos.write(2, b'why it broke\\n')\nraise ImportError('broken')\n"
    )
    script = "from zoo.quiet_import import import_quietly\nimport_quietly('broken_module')\n"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=dict(os.environ, PYTHONPATH=str(tmp_path)),
    )
    assert result.returncode == 1
    assert result.stderr.startswith("why it broke\n")
    assert "ImportError: broken" in result.stderr
