"""Writing files so that a crash, a full disk or a second writer never leaves them half done.

`atomic_write_text` writes a sibling temporary file and renames it over the target, so a
reader sees the old bytes or the new, never a mix. `exclusive` holds an advisory lock on a
folder for as long as one process writes into it: a second writer fails at once.
"""

from __future__ import annotations

import itertools
import os
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


_NAMES = itertools.count()


def _create_temporary(path: Path, suffix: str) -> tuple[int, Path]:
    """A new, empty sibling of `path` (named after it, this process and a counter; created
    exclusively, so a name left by a killed process is never reused) and its open fd. Its
    mode is what open() would give, the umask's: `mkstemp`'s 0600 made datasets private."""
    while True:
        tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{next(_NAMES)}{suffix}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


@contextmanager
def _temporary(path: str | Path, suffix: str = "") -> Iterator[tuple[int, Path]]:
    """(open fd, temporary sibling of `path`), renamed over `path` when the block ends
    without error (the fd closed first) and removed when it raises. OS errors name `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming(path, always=True):
        fd, tmp = _create_temporary(path, suffix)
        try:
            try:
                yield fd, tmp
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


@contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """A temporary sibling of `path` to write to, renamed over `path` when the block ends
    without error and removed when it raises (e.g. on a full disk).

    Parameters
    ----------
    path
        The file to write; its folder is created if missing.
    suffix
        The temporary file's suffix, for writers that pick a format by name.

    Yields
    ------
    Path
        The temporary file (created empty), in `path`'s folder, so the rename is atomic.

    Raises
    ------
    OSError
        Any error of the write or the rename, naming `path` (see `naming`).
    """
    with _temporary(path, suffix) as (_, tmp):
        yield tmp


def atomic_write_bytes(path: str | Path, data: bytes, sync: bool = True) -> Path:
    """Write `data` to `path` atomically (`atomic_path`); with `sync`, flushed to disk before
    the rename, so a power cut cannot leave the new name on empty blocks (many small files,
    each cheap to write again, may skip it). Written through the temporary file's own
    descriptor: a build writes thousands of clips, and opening each file twice costs CPU
    time on every one of them."""
    with _temporary(path) as (fd, _):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (`atomic_path`), synced to disk before the rename."""
    return atomic_write_bytes(path, text.encode())


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
