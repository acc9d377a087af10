"""Independent, pure tasks on local processes: the seam the build stage runs through.

`TaskPool.map_tasks(fn, tasks)` yields results in completion order; the caller alone writes
state from them, so the output does not depend on which worker ran what. Executors that also
answer listener batches (`vocalgrad.executors`) extend this class, so a build accepts either.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from vocalgrad.jit import warm_up


class TaskPool:
    """`workers` local processes (one: this process)."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)

    def map_tasks(self, fn: Callable[[Any], Any], tasks: list) -> Iterator[Any]:
        """fn(task) for every task, in completion order."""
        if self.workers <= 1 or len(tasks) <= 1:
            for task in tasks:
                yield fn(task)
            return
        warm_up()  # workers must find librosa's numba caches written, not write them together
        with ProcessPoolExecutor(max_workers=self.workers, initializer=_die_on_interrupt) as pool:
            futures = [pool.submit(fn, t) for t in tasks]
            try:
                for future in as_completed(futures):
                    yield future.result()
            except BaseException:  # Ctrl-C or an error: start nothing more
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def _die_on_interrupt() -> None:
    """Workers end silently on Ctrl-C (the terminal signals every process of the group):
    the main process alone reports it, and results come only from finished tasks."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
