"""Progress for anything that takes more than a few seconds: a bar, or a line now and then.

In a terminal (stderr is a TTY) or a notebook, `progress` is a tqdm bar with rate and ETA
(`tqdm.auto`: a widget in Jupyter). Elsewhere, a log or a CI job, a redrawn bar is noise, so
it prints one line at most every `NOTE_EVERY_S` seconds instead ("eval whisper:tiny.en:
96/180 items (53%), 1:02 elapsed, about 0:55 left"), and nothing for a step that ends
sooner: a log is never silent for minutes, nor flooded. ``VOCALGRAD_PROGRESS=bar|log|off``
overrides the choice.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

NOTE_EVERY_S = 30.0
"""Seconds between two progress lines where no bar is drawn."""


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (its stderr is no TTY, yet it draws widgets)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def mode() -> str:
    """``"bar"``, ``"log"`` or ``"off"``: ``VOCALGRAD_PROGRESS`` where set, else a bar in a
    terminal or notebook and lines elsewhere."""
    chosen = os.environ.get("VOCALGRAD_PROGRESS", "").strip().lower()
    if chosen in ("bar", "log", "off"):
        return chosen
    isatty = getattr(sys.stderr, "isatty", None)
    return "bar" if (isatty is not None and isatty()) or _in_notebook() else "log"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class LogProgress:
    """The stand-in for a bar where none is drawn: the same calls (`update`,
    `set_description`, `close`, a context manager), and one line to stderr every
    `NOTE_EVERY_S` seconds while it is open, whether or not a step ended meanwhile (a long
    step is not silence); none at all when `quiet`."""

    def __init__(
        self, total: int | None, desc: str, unit: str, initial: int = 0, quiet: bool = False
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.initial, self.quiet = initial, quiet
        self.started = self.last_note = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if not quiet:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(max(NOTE_EVERY_S / 4, 0.01)):
            self._maybe_note()

    def _maybe_note(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self.quiet or self._stop.is_set() or now - self.last_note < NOTE_EVERY_S:
                return
            self.last_note = now
            print(self.note(now - self.started), file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.n += n
        self._maybe_note()

    def note(self, elapsed: float) -> str:
        """``desc: n/total units (p%), m:ss elapsed, about m:ss left``."""
        done = self.n - self.initial
        text = f"{self.desc}: {self.n}"
        if self.total:
            text += f"/{self.total} {self.unit}s ({100 * self.n / self.total:.0f}%)"
        else:
            text += f" {self.unit}s"
        text += f", {_clock(elapsed)} elapsed"
        if self.total and done > 0 and self.n < self.total:
            text += f", about {_clock(elapsed / done * (self.total - self.n))} left"
        return text

    def set_description(self, desc: str, refresh: bool = True) -> None:
        self.desc = desc

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(
    total: int | None, desc: str, unit: str = "item", initial: int = 0, **options: Any
) -> tqdm | LogProgress:
    """A progress display for `total` steps of `unit` (see the module for which kind).

    Parameters
    ----------
    total : int or None
        Steps in all (None: unknown, no percentage or ETA).
    desc : str
        What is running, e.g. ``"eval whisper:tiny.en"``.
    unit : str
        What one step is ("item", "clip", "fit").
    initial : int
        Steps already done (a resumed run).
    **options
        More `tqdm` options for the bar (ignored by the line printer).

    Returns
    -------
    tqdm or LogProgress
        Use as a context manager and call ``update(n)``.
    """
    chosen = mode()
    if chosen == "bar":
        return tqdm(
            total=total,
            desc=desc,
            unit=unit,
            initial=initial,
            file=sys.stderr,
            dynamic_ncols=True,
            **options,
        )
    return LogProgress(total, desc, unit, initial, quiet=chosen == "off")


def tracked(items: Iterable[T], desc: str, unit: str = "item") -> Iterator[T]:
    """Each of `items`, counted on a `progress` display (closed when the loop ends or is
    left by an exception).

    Parameters
    ----------
    items : iterable
        What to loop over (its length, where it has one, is the total).
    desc, unit : str
        As for `progress`.

    Yields
    ------
    object
        The items, in order.
    """
    total = len(items) if isinstance(items, Sized) else None
    with progress(total, desc, unit) as bar:
        for item in items:
            yield item
            bar.update(1)


@contextmanager
def progress_callback(desc: str, unit: str = "item") -> Iterator[Callable[[int, int], None]]:
    """A ``callback(done, total)`` for code that reports progress that way (the audit's cue
    measurement, the probes' fits), drawn by `progress` from the first call on.

    Parameters
    ----------
    desc, unit : str
        As for `progress`.

    Yields
    ------
    callable
        ``callback(done, total)``: `done` steps of `total` finished so far.
    """
    shown: list[tqdm | LogProgress] = []

    def callback(done: int, total: int) -> None:
        if not shown:
            shown.append(progress(total, desc, unit))
        bar = shown[0]
        bar.update(done - bar.n)

    try:
        yield callback
    finally:
        for bar in shown:
            bar.close()
