"""Writing files so that a crash, a full disk or a second writer never leaves them half done.

`atomic_write_text` writes a sibling temporary file and renames it over the target, so a
reader sees the old bytes or the new, never a mix. `exclusive` holds an advisory lock on a
folder for as long as one process writes into it: a second writer fails at once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from vocalgrad.errors import BusyError

LOCK_NAME = ".lock"


@contextmanager
def naming(path: str | Path, always: bool = False) -> Iterator[None]:
    """An OS error raised inside (a write on a full disk says no file name; a temporary
    file's name means nothing to a user) names `path`, so its one-line message says where."""
    try:
        yield
    except OSError as err:
        if (err.filename is not None and not always) or err.errno is None:
            raise
        raise type(err)(err.errno, err.strerror, str(path)) from err


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file and a rename (the temporary file is
    removed again if the write fails, e.g. on a full disk)."""
    path = Path(path)
    with naming(path, always=True):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path


@contextmanager
def exclusive(folder: str | Path, what: str = "folder") -> Iterator[None]:
    """Hold `folder`'s lock while writing into it; raise `BusyError` at once if another
    process holds it. The lock is the kernel's (flock), so a killed holder never leaves a
    stale lock behind."""
    path = Path(folder) / LOCK_NAME
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise BusyError(
            f"{folder}: another vocalgrad process is writing this {what} (lock {path}); "
            "wait for it to finish or choose another --out"
        ) from None
    try:
        yield
    finally:
        lock.release()
