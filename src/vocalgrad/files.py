"""Writing files so that a crash, a full disk, a second writer or a wrong path never costs data.

`atomic_write_text` writes a sibling temporary file and renames it over the target, so a
reader sees the old bytes or the new, never a mix. `exclusive` holds an advisory lock on a
folder for as long as one process writes into it: a second writer fails at once.
`claim_output` is the one gate every command's output path goes through: it refuses a path
inside a dataset the command reads, and a file or folder that holds something other than
this kind of output, unless the user passes ``--overwrite``.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from vocalgrad.errors import BusyError, ConfigError

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


# --- output paths -----------------------------------------------------------------------


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _manifest(folder: Path) -> dict:
    found = _json(folder / "manifest.json")
    return found if isinstance(found, dict) else {}


def _json_keys(path: Path) -> set[str]:
    found = _json(path) if path.is_file() else None
    return set(found) if isinstance(found, dict) else set()


def _head(path: Path, size: int = 4096) -> str:
    try:
        with path.open("rb") as f:
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def _is_adaptive_run(folder: Path) -> bool:
    return (folder / "adaptive.json").is_file() or "adaptive" in _manifest(folder)


def _is_run(folder: Path) -> bool:
    if (folder / "manifest.json").is_file() and _json(folder / "manifest.json") is None:
        return (folder / "results.jsonl").is_file()  # damaged: the run's reader says how
    listener = _manifest(folder).get("listener")
    if isinstance(listener, dict):
        return "harness" not in listener and not _is_adaptive_run(folder)
    # a finetune killed while tuning: the adapter or its checkpoint, no run yet
    return (folder / "adapter" / "tuning.json").is_file() or (
        folder / "checkpoint" / "state.pt"
    ).is_file()


def _is_harness_run(folder: Path) -> bool:
    listener = _manifest(folder).get("listener")
    return isinstance(listener, dict) and "harness" in listener


def _is_human_export(folder: Path) -> bool:
    if (folder / "manifest.json").is_file():
        return _manifest(folder).get("kind") == "human listening test"
    # killed while replacing an earlier export: its own files, the manifest not yet back
    return (folder / "trials.jsonl").is_file() and (folder / "agreement.json").is_file()


def _is_probe(folder: Path) -> bool:
    return {"pooling", "thresholds", "categories"} <= _json_keys(folder / "summary.json")


def _is_lmms_tasks(folder: Path) -> bool:
    # a task's YAML is written before the export's index: a killed export has only tasks
    return (folder / "vocalgrad_export.json").is_file() or any(
        folder.glob("vocalgrad_*/vocalgrad_*.yaml")
    )


def _is_lm_eval(folder: Path) -> bool:
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return bool(entries) and all(p.is_dir() and any(p.glob("results_*.json")) for p in entries)


def _is_report(path: Path) -> bool:
    head = _head(path)
    return head.startswith("# vocalgrad report") or (
        head.lstrip().startswith("<!DOCTYPE html>") and "<title>vocalgrad report</title>" in head
    )


def _is_verify_report(path: Path) -> bool:
    return {"dataset", "per_category", "failures"} <= _json_keys(path)


def _is_audit_report(path: Path) -> bool:
    return {"dataset", "per_category", "thresholds", "passes"} <= _json_keys(path)


def _is_sqlite(path: Path) -> bool:
    return _head(path, 16).startswith("SQLite format 3")


def _is_dataset(path: Path) -> bool:
    return path.is_dir() and (
        (path / "build.json").is_file()
        or any((path / split / "metadata.jsonl").is_file() for split in ("test", "train"))
    )


@dataclass(frozen=True)
class Output:
    """One kind of output a command writes, and how to recognise one written earlier.

    Parameters
    ----------
    name
        What it is called in messages (``run folder``, ``report``...).
    folder
        A folder of files (True) or one file.
    written_before
        Whether a path holds this kind of output (written whole, or as a writer killed
        midway leaves it).
    """

    name: str
    folder: bool
    written_before: Callable[[Path], bool]


RUN = Output("run folder", True, _is_run)
ADAPTIVE_RUN = Output("adaptive run folder", True, _is_adaptive_run)
HARNESS_RUN = Output("harness run folder", True, _is_harness_run)
HUMAN_EXPORT = Output("listening-test export", True, _is_human_export)
PROBE = Output("probe folder", True, _is_probe)
LMMS_TASKS = Output("lmms-eval task folder", True, _is_lmms_tasks)
LM_EVAL = Output("lm-eval results folder", True, _is_lm_eval)
REPORT = Output("report", False, _is_report)
VERIFY_REPORT = Output("verify report", False, _is_verify_report)
AUDIT_REPORT = Output("audit report", False, _is_audit_report)
STUDY_DB = Output("study database", False, _is_sqlite)
FEATURE_CACHE = Output("feature cache", True, lambda folder: True)  # entries in hashed folders
OUTPUTS = (
    RUN, ADAPTIVE_RUN, HARNESS_RUN, HUMAN_EXPORT, PROBE, LMMS_TASKS, LM_EVAL,
    REPORT, VERIFY_REPORT, AUDIT_REPORT, STUDY_DB,
)  # fmt: skip


def _what(path: Path) -> str:
    """What a path holds, in words, for a refusal."""
    if _is_dataset(path):
        return "a dataset"
    if path.is_dir():
        kind = next((o.name for o in OUTPUTS if o.folder and o.written_before(path)), None)
        return f"a {kind}" if kind else "files vocalgrad did not write"
    kind = next((o.name for o in OUTPUTS if not o.folder and o.written_before(path)), None)
    return f"a {kind}" if kind else "a file vocalgrad did not write"


def _ours(path: Path, kind: Output) -> bool:
    """Whether writing `kind` at `path` replaces only an earlier output of the same kind."""
    if not kind.folder:
        return kind.written_before(path)
    if not any(not p.name.startswith(".") for p in path.iterdir()):
        return True  # empty, or only a lock and temporary files
    return not _is_dataset(path) and kind.written_before(path)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def claim_output(
    path: str | os.PathLike,
    kind: Output,
    *,
    reads: Iterable[str | os.PathLike | None] = (),
    overwrite: bool | None = False,
) -> Path:
    """Check, before a command starts, that it may write `kind` at `path`; writes nothing.

    The rule: a command never writes inside a dataset it reads, and never over a file or
    folder that holds anything but an earlier output of the same kind, unless the user
    passes ``--overwrite``. A report over a dataset's metadata, or a listening-test export
    over a model's run, loses data that no rerun brings back.

    Parameters
    ----------
    path
        The output file or folder.
    kind
        What the command writes there (`RUN`, `REPORT`, ...).
    reads
        The datasets the command reads (None entries are skipped).
    overwrite
        The user's ``--overwrite``: write there anyway; None where the command has no such
        option (the message then only says to choose another path).

    Returns
    -------
    Path
        `path`, unchanged.

    Raises
    ------
    ConfigError
        The path is inside a dataset the command reads, or holds something else.
    FileExistsError
        A folder kind's path is a file.
    """
    path = Path(path)
    where = path.resolve()
    escape = "choose another path" + (" or pass --overwrite" if overwrite is not None else "")
    if not overwrite:
        for dataset in reads:
            if dataset is not None and _inside(where, Path(dataset).resolve()):
                raise ConfigError(
                    f"{path} is inside the dataset {dataset} this command reads: writing the "
                    f"{kind.name} there would change the dataset; {escape}"
                )
    if kind.folder and path.exists() and not path.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(path))
    if path.exists() and not overwrite and not _ours(path, kind):
        raise ConfigError(
            f"{path} holds {_what(path)}, not a {kind.name}: writing there would replace "
            f"what is in it; {escape}"
        )
    return path
