"""The one way zoo writes its outputs, the one check of an output folder,
and the one checksum of a file it wrote (checkpoints' and run directories'
manifests).

A file or folder is written under a hidden temporary name beside its place
(the same file system, so the rename is atomic) and renamed into place when
complete, so a crash never leaves a half-written one and a reader sees
either the old output or the new one. Keras-free: the command line uses it
before TensorFlow loads.
"""

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path


def _sibling(path, kind):
    # The name ends with the final one, whose suffix some writers need
    # (Keras' `save_weights` wants `.weights.h5`).
    return path.with_name(f".{kind}-{uuid.uuid4().hex}.{path.name}")


@contextlib.contextmanager
def replacing(path, folder=False):
    """Yields a temporary path beside `path` to write; once the block ends
    without an error it is renamed to `path`, else removed.

    Args:
        path: the file (or, with `folder`, the folder) to write.
        folder: yield a new empty folder rather than a file name (its
            parents are made); an existing folder at `path` is moved aside
            and removed after the rename. Made with `mkdir` (the umask's permissions, unlike
            `tempfile.mkdtemp`'s owner-only ones, so that a model server
            running as another user can read an export).
    """
    path = Path(path)
    temporary = _sibling(path, "tmp")
    if folder:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.mkdir()
    try:
        yield temporary
        if folder and path.exists():
            retired = _sibling(path, "old")
            os.replace(path, retired)
            os.replace(temporary, path)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(temporary, path)
    except BaseException:
        if temporary.is_dir():
            shutil.rmtree(temporary, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
        raise


def check_output_folder(out, overwrite, error):
    """Refuses an output folder that is a file, that holds anything without
    `overwrite`, or whose parent can't be written (`check_writable`),
    raising `error` (a `ZooUserError` class). Makes its parent folders."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise error(f"output {str(out)!r} exists and is not a folder; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise error(
            f"output folder {str(out)!r} already exists and is not empty; choose another "
            "--out or pass --overwrite (overwrite=True in Python)"
        )
    check_writable(out, "--out", error, make_folder=True)


def check_writable(path, flag, error, make_folder=False):
    """Refuses, before any work, an output `path` whose folder can't be
    written (read-only, or a file where a folder should be), raising `error`
    naming `flag`; `make_folder` first makes the missing folders.

    A temporary file is made and removed there, as `replacing` will make
    its own: unlike `os.access`, this holds for root and read-only mounts.
    """
    folder = Path(path).parent
    try:
        if make_folder and not folder.exists():
            folder.mkdir(parents=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as cause:
        raise error(
            f"cannot write {flag} {str(path)!r}: {cause.strerror}; choose another {flag}"
        ) from None


def sha256(path):
    """The SHA-256 of the file at `path`, as hex, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(path):
    """What a manifest records of a file: {"bytes": size, "sha256": hex}."""
    return {"bytes": Path(path).stat().st_size, "sha256": sha256(path)}


def fingerprint_problem(path, expected):
    """Why the file at `path` is not the one `expected` (a `fingerprint`)
    describes: a phrase naming the file, or None when it matches.

    The size is compared first: it is cheap, and a truncated file is the
    most common damage (a full disk, an interrupted copy).
    """
    path = Path(path)
    if not path.is_file():
        return f"{path.name} is missing"
    size = path.stat().st_size
    if size != expected["bytes"]:
        guess = "truncated?" if size < expected["bytes"] else "damaged"
        return f"{path.name} has {size} bytes, not {expected['bytes']} ({guess})"
    if sha256(path) != expected["sha256"]:
        return f"{path.name} does not match its checksum (damaged)"
    return None
