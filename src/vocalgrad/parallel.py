"""Independent, pure tasks on local processes: the seam the build stage runs through.

`TaskPool.map_tasks(fn, tasks)` yields results in completion order; the caller alone writes
state from them, so the output does not depend on which worker ran what. Executors that also
answer listener batches (`vocalgrad.executors`) extend this class, so a build accepts either.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any

from vocalgrad.jit import deferred_interrupt, warm_up


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
        with process_pool(self.workers) as pool:
            for future in as_completed([pool.submit(fn, t) for t in tasks]):
                yield future.result()


@contextmanager
def process_pool(
    workers: int, initializer: Callable[[], Any] | None = None
) -> Iterator[ProcessPoolExecutor]:
    """Worker processes that Ctrl-C, or any error, ends at once, leaving one clear error.

    Why: a terminal's Ctrl-C reaches every process of the group. A worker that died of it
    broke the pool, and the main process could report BrokenProcessPool instead of the
    interrupt; one signalled while forked (the first submit forks them all) could hang on a
    lock and outlive the main process, holding its output open; and the executor's own
    `with` joined a manager thread that a Ctrl-C had kept from starting ("RuntimeError:
    cannot join thread before it is started"). So the workers ignore Ctrl-C (started with it
    held, `deferred_interrupt`), and the main process, which alone acts on it, kills them."""
    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=_start_worker, initargs=(initializer,)
    )
    try:
        with deferred_interrupt():
            pool.submit(int)  # forks every worker and starts the manager thread now
        yield pool
    except BaseException:
        workers_now = list((pool._processes or {}).values())  # public from Python 3.14
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers_now:
            process.kill()
        raise
    pool.shutdown(wait=True)


def _start_worker(initializer: Callable[[], Any] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer()
