"""zoo.files: the one atomic write-and-replace and the one output-folder check."""

import pytest

from zoo import files
from zoo.errors import ZooUserError

pytestmark = pytest.mark.backend_independent


def test_a_file_is_replaced_whole_and_no_temporary_is_left(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    with files.replacing(path) as temporary:
        temporary.write_text("new")
        assert path.read_text() == "old", "replaced before the block ended"
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    with pytest.raises(OSError, match="disk full"):
        with files.replacing(path) as temporary:
            temporary.write_text("half")
            raise OSError("disk full")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_the_temporary_keeps_the_final_suffix(tmp_path):
    # Keras' save_weights refuses a name that does not end in .weights.h5.
    with files.replacing(tmp_path / "model.weights.h5") as temporary:
        assert temporary.name.endswith(".weights.h5") and temporary.name.startswith(".")
        temporary.write_text("")


def test_a_folder_replaces_the_old_one(tmp_path):
    out = tmp_path / "deep" / "export"
    with files.replacing(out, folder=True) as staging:
        (staging / "one").write_text("1")
    with files.replacing(out, folder=True) as staging:
        (staging / "two").write_text("2")
        assert (out / "one").is_file(), "the old folder went before the new one was done"
    assert sorted(p.name for p in out.iterdir()) == ["two"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["export"]


def test_a_failed_folder_keeps_the_old_one(tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "keep").write_text("ours")
    with pytest.raises(KeyboardInterrupt):
        with files.replacing(out, folder=True) as staging:
            (staging / "half").write_text("")
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert (out / "keep").read_text() == "ours"


class _Refused(ZooUserError):
    pass


def test_output_folder_check(tmp_path):
    files.check_output_folder(tmp_path / "missing", overwrite=False, error=_Refused)
    files.check_output_folder(tmp_path, overwrite=False, error=_Refused)  # empty
    (tmp_path / "file").write_text("")
    with pytest.raises(_Refused, match="not a folder"):
        files.check_output_folder(tmp_path / "file", overwrite=True, error=_Refused)
    with pytest.raises(_Refused, match="--overwrite"):
        files.check_output_folder(tmp_path, overwrite=False, error=_Refused)
    files.check_output_folder(tmp_path, overwrite=True, error=_Refused)


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    # A file where a folder should be: as root (the tests' CI), chmod would
    # not stop a write, and this does.
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me")
    for out in (blocker / "export", blocker / "deeper" / "export"):
        with pytest.raises(_Refused, match="cannot write --out .*: Not a directory; choose another --out"):
            files.check_output_folder(out, overwrite=False, error=_Refused)
    with pytest.raises(_Refused, match="cannot write --output"):
        files.check_writable(blocker / "out.txt", "--output", _Refused)
    files.check_writable(tmp_path / "out.txt", "--output", _Refused)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"], "the probe was left"
