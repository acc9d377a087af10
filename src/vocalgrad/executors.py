"""Where the heavy work runs: local processes (the default) or a Ray cluster.

Two shapes of work go through this seam:

* `map_tasks(fn, tasks)`: independent, pure tasks (build: one per source). Results come back
  in completion order; the driver alone writes state from them, so the output does not
  depend on which worker ran what.
* `map_batches(listener, fn, payloads)`: batches for a loaded model (eval answers, probe
  features). Locally `fn(listener, payload)` runs in this process; on Ray each actor loads the
  listener once and batches go to whichever actor is free. A batch whose actor dies is sent
  to another actor; each payload's result is yielded exactly once.

Ray is optional (`pip install vocalgrad[ray]`) and imported only when asked for.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vocalgrad.errors import ConfigError, VocalgradError
from vocalgrad.jit import warm_up
from vocalgrad.listeners import load_listener
from vocalgrad.listeners.base import Listener
from vocalgrad.listeners.registry import family
from vocalgrad.parallel import TaskPool

CONNECT_TIMEOUT_S = 5.0
MAX_REPLACEMENTS_PER_ACTOR = 3


@dataclass(frozen=True)
class ListenerSpec:
    """A listener as a spec string: what a Ray actor loads on its own node (the model is never
    shipped from the driver)."""

    spec: str
    dataset: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> Listener:
        return load_listener(self.spec, dataset=self.dataset, **self.options)

    @property
    def wants_gpu(self) -> bool:
        """Whether the spec's family declares that its listeners want an accelerator (asked of
        the family, so the model is never loaded on the driver)."""
        return family(self.spec.partition(":")[0]).wants_gpu


class Executor(TaskPool):
    """Local processes for tasks; listener batches in this process, or, with
    `listener_copies` > 1 and a listener given as a spec, on that many local processes that
    each load their own copy (and share the cores between them)."""

    def __init__(self, workers: int = 1, listener_copies: int = 1) -> None:
        super().__init__(workers)
        self.listener_copies = max(1, listener_copies)
        self._copies: list[LocalListenerCopies] = []

    def listener(self, load: Callable[[], Listener]) -> Listener:
        """The listener batches are answered by (loaded here; on Ray: once in each actor)."""
        if self.listener_copies > 1 and isinstance(load, ListenerSpec):
            copies = LocalListenerCopies(load, self.listener_copies)
            self._copies.append(copies)
            return copies
        return load()

    def map_batches(
        self, listener: Listener, fn: Callable[[Listener, Any], Any], payloads: Iterable
    ) -> Iterator[tuple[int, Any]]:
        """(index, fn(listener, payload)) for every payload, each exactly once."""
        if isinstance(listener, LocalListenerCopies):
            yield from listener.dispatch(fn, payloads)
            return
        for i, payload in enumerate(payloads):
            yield i, fn(listener, payload)

    def close(self) -> None:
        """Release what the executor started."""
        for copies in self._copies:
            copies.close()
        self._copies.clear()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(
    name: str = "local",
    workers: int | None = None,
    address: str | None = None,
    gpus_per_actor: float | None = None,
) -> Executor:
    """From the CLI options: an address implies Ray; Ray without one starts on this machine.
    Locally, `workers` processes take tasks (default: all cores) and, when given, also answer
    listener batches (default: one copy, in this process)."""
    if address and name == "local":
        name = "ray"
    if name == "local":
        return Executor(workers or os.cpu_count() or 1, listener_copies=workers or 1)
    if name == "ray":
        return RayExecutor(address, workers, gpus_per_actor)
    raise ConfigError(f"unknown executor {name!r}; use local or ray")


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in seconds, naming the address, instead of after Ray's long connection retries."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").split("/")[0].rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}: expected HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {err}") from None


_COPY: Listener | None = None  # the listener a local copy process answers with


def _load_copy(load: ListenerSpec, threads: int) -> None:
    """A copy process: its share of the cores (BLAS, OpenMP and torch's pools), then its
    listener."""
    global _COPY
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    _COPY = load()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _describe_copy() -> dict:
    assert _COPY is not None
    return {
        "listener_id": _COPY.listener_id,
        "revision": _COPY.revision,
        "sample_rate": _COPY.sample_rate,
        "capabilities": _COPY.capabilities(),
        "manifest": _COPY.manifest(),
    }


def _run_copy(fn: Callable[[Listener, Any], Any], payload: Any) -> Any:
    assert _COPY is not None
    return fn(_COPY, payload)


class LocalListenerCopies(Listener):
    """The driver's stand-in for `copies` local processes that each hold one copy of a
    listener (loaded from its spec there, never here): it carries the identity that manifests
    and cache keys need. Batches go to whichever copy is free, two in flight per copy, and
    come back in payload order, so a run's results file reads as if one process had answered."""

    def __init__(self, load: ListenerSpec, copies: int) -> None:
        threads = max(1, (os.cpu_count() or 1) // copies)
        self.copies = copies
        self._pool = ProcessPoolExecutor(
            max_workers=copies, initializer=_load_copy, initargs=(load, threads)
        )
        try:
            info = self._pool.submit(_describe_copy).result()
        except BaseException:  # Ctrl-C while the pool starts: join nothing (parallel.process_pool)
            self.close(wait=False)
            raise
        self.listener_id = info["listener_id"]
        self.revision = info["revision"]
        self.sample_rate = info["sample_rate"]
        for name, value in info["capabilities"].items():
            setattr(self, name, value)
        self._manifest = info["manifest"]

    def dispatch(
        self, fn: Callable[[Listener, Any], Any], payloads: Iterable
    ) -> Iterator[tuple[int, Any]]:
        """(index, fn(copy, payload)) for every payload, in payload order."""
        fresh = enumerate(payloads)  # pulled lazily: payloads hold audio
        pending: dict[int, Future] = {}
        following = 0
        try:
            while True:
                while len(pending) < 2 * self.copies:
                    item = next(fresh, None)
                    if item is None:
                        break
                    pending[item[0]] = self._pool.submit(_run_copy, fn, item[1])
                if not pending:
                    return
                result = pending.pop(following).result()
                yield following, result
                following += 1
        except BaseException:
            for future in pending.values():
                future.cancel()
            raise

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    def manifest(self) -> dict:
        return self._manifest

    def generate(self, requests, max_new_tokens: int = 16) -> list[str]:
        raise NotImplementedError("local listener copies answer through Executor.map_batches")


class RayExecutor(Executor):
    """Tasks and listener actors on a Ray cluster. Joins the Ray session this process already
    has, else connects to `address`, else starts a Ray instance on this machine."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        gpus_per_actor: float | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("the Ray executor needs Ray: pip install 'vocalgrad[ray]'") from None
        self.ray = ray
        self.started = False
        if address:
            check_reachable(address)
        if not ray.is_initialized():
            ray.init(
                address=address,
                num_cpus=None if address else workers,
                include_dashboard=False,
                log_to_driver=False,
            )
            self.started = True
        resources = ray.cluster_resources()
        self.gpus = float(resources.get("GPU", 0))
        self.cpus = int(resources.get("CPU", 1))
        super().__init__(workers or self.cpus)
        self.gpus_per_actor = gpus_per_actor
        self.pools: list[RemoteListener] = []

    def map_tasks(self, fn: Callable[[Any], Any], tasks: list) -> Iterator[Any]:
        ray = self.ray
        if not tasks:
            return
        warm_up()  # this node's workers find librosa's numba caches written
        remote = ray.remote(num_cpus=1, max_retries=5)(fn)  # a killed worker's task runs again
        queue = list(reversed(tasks))
        pending = [remote.remote(queue.pop()) for _ in range(min(self.workers, len(queue)))]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            if queue:  # refill before handing the result over: no worker waits on the driver
                pending.append(remote.remote(queue.pop()))
            yield ray.get(done[0])

    def listener(self, load: Callable[[], Listener]) -> Listener:
        """Listener actors, kept until `close` (they hold their CPUs or GPUs while alive)."""
        pool = RemoteListener(self, load)
        self.pools.append(pool)
        return pool

    def map_batches(
        self, listener: Listener, fn: Callable[[Listener, Any], Any], payloads: Iterable
    ) -> Iterator[tuple[int, Any]]:
        if isinstance(listener, RemoteListener):
            yield from self._dispatch(listener, fn, payloads)
            return
        pool = RemoteListener(self, lambda: listener)  # actors for this call only
        try:
            yield from self._dispatch(pool, fn, payloads)
        finally:
            pool.close()

    def _dispatch(
        self, pool: RemoteListener, fn: Callable[[Listener, Any], Any], payloads: Iterable
    ) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        fresh = enumerate(payloads)  # pulled lazily: payloads may hold audio
        retry: list[tuple[int, Any]] = []
        # two tokens per actor: one batch running and one queued, so a free actor never waits
        free = [slot for slot in range(len(pool.actors)) for _ in range(2)]
        dead: dict[int, int] = {}  # slot of a dead actor -> its tokens, parked
        pending: dict[Any, tuple[int, Any, int, Any]] = {}
        while True:
            while free:
                item = retry.pop() if retry else next(fresh, None)
                if item is None:
                    break
                slot = free.pop(0)
                handle = pool.actors[slot]
                pending[handle.run.remote(fn, item[1])] = (item[0], item[1], slot, handle)
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            i, payload, slot, handle = pending.pop(done[0])
            try:
                result, answered = ray.get(done[0]), True
            except ray.exceptions.RayActorError:
                # the actor died: its batches go to the live actors. A dead actor is replaced
                # only when none is left (a lost node's replacement might never be placed).
                retry.append((i, payload))
                if pool.actors[slot] is handle and slot not in dead:
                    dead[slot] = free.count(slot)
                    free = [s for s in free if s != slot]
                result, answered = None, False
            if slot in dead:
                dead[slot] += 1
                if len(dead) == len(pool.actors):
                    pool.replace(slot)
                    free += [slot] * dead.pop(slot)
            else:
                free.append(slot)
            if answered:
                yield i, result

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
        self.pools.clear()
        if self.started:
            self.ray.shutdown()
            self.started = False


class _ListenerActor:
    """Holds one loaded listener; runs batch functions on it."""

    def __init__(self, load: Callable[[], Listener]) -> None:
        self.listener = load()

    def describe(self) -> dict:
        lst = self.listener
        return {
            "listener_id": lst.listener_id,
            "revision": lst.revision,
            "sample_rate": lst.sample_rate,
            "capabilities": lst.capabilities(),
            "manifest": lst.manifest(),
        }

    def run(self, fn: Callable[[Listener, Any], Any], payload: Any) -> Any:
        return fn(self.listener, payload)


class RemoteListener(Listener):
    """The driver's stand-in for listener actors: it carries the identity (id, revision,
    manifest, rate) that manifests and cache keys need; the model lives in the actors."""

    def __init__(self, executor: RayExecutor, load: Callable[[], Listener]) -> None:
        ray = executor.ray
        gpus = executor.gpus_per_actor
        if gpus is None:
            wants = load.wants_gpu if isinstance(load, ListenerSpec) else load().wants_gpu
            gpus = 1.0 if wants and executor.gpus >= 1 else 0.0
        # one CPU per actor on CPU-only work, so actors never outnumber cores
        self._cls = ray.remote(num_cpus=0 if gpus else 1, num_gpus=gpus)(_ListenerActor)
        self._load = load
        self._ray = ray
        # never more actors than the cluster can place: the others would wait forever
        n = min(executor.workers, max(1, int(executor.gpus // gpus)) if gpus else executor.cpus)
        self.actors = [self._cls.remote(load) for _ in range(n)]
        # every actor loaded (a load that fails, fails here) and all agree on what they are
        infos = ray.get([a.describe.remote() for a in self.actors])
        info = infos[0]
        if any(i != info for i in infos):
            raise ConfigError(f"listener actors disagree about what they loaded: {infos}")
        self.listener_id = info["listener_id"]
        self.revision = info["revision"]
        self.sample_rate = info["sample_rate"]
        for name, value in info["capabilities"].items():  # what the actors' listener declares
            setattr(self, name, value)
        self._manifest = info["manifest"]
        self.replaced = 0

    def replace(self, slot: int) -> None:
        """A fresh actor in place of a dead one; a pool whose actors keep dying (a batch that
        crashes its process, a node out of memory) stops instead of retrying forever."""
        self.replaced += 1
        if self.replaced > MAX_REPLACEMENTS_PER_ACTOR * len(self.actors):
            raise VocalgradError(
                f"{self.listener_id}: listener actors died {self.replaced} times; "
                "see the Ray worker logs"
            )
        self.actors[slot] = self._cls.remote(self._load)

    def close(self) -> None:
        """End the actors now, freeing their CPUs or GPUs for the next pool or task."""
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []

    def manifest(self) -> dict:
        return self._manifest

    def generate(self, requests, max_new_tokens: int = 16) -> list[str]:
        raise NotImplementedError("a RemoteListener answers through Executor.map_batches")
