"""Shared helpers of the command-line tests."""

from zoo import cli


def run_cli(capsys, *argv):
    """Runs `zoo ARGV` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, *words):
    """A user mistake: exit status 2 and one line naming `words`, no traceback."""
    assert code == cli.USER_ERROR
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err}"
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0]
