"""Fault injection for tests: a stub chat-completions server on 127.0.0.1 that can refuse,
stall or answer slowly, a size-limited folder (a tmpfs where the machine lets us mount one)
and helpers to run the CLI as a real process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class StubServer:
    """OpenAI-compatible `/v1/chat/completions`: `mode` is "ok" (answers "increase"),
    "401", "400", "500" (with `Retry-After: 60`) or "stall" (holds every request until
    `release` or shutdown); `delay` slows each "ok" answer."""

    def __init__(self, mode: str = "ok", delay: float = 0.0) -> None:
        self.mode, self.delay = mode, delay
        self.calls = 0
        self.first_call = threading.Event()
        self.release = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.calls += 1
                stub.first_call.set()
                if stub.mode == "stall":
                    stub.release.wait(120)
                    return
                if stub.mode in ("401", "400", "500"):
                    return self._reply(
                        int(stub.mode), {"error": {"message": f"stub says {stub.mode}"}}
                    )
                time.sleep(stub.delay)
                self._reply(
                    200,
                    {
                        "model": "stub",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "increase"}}
                        ],
                    },
                )

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                if status == 500:
                    self.send_header("Retry-After", "60")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def cli(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    """`vocalgrad ARGS` as a real process (its own process group, so a signal reaches it
    alone), importing the code on $PYTHONPATH, else this checkout's."""
    environ = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT / "src")]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vocalgrad.cli", *args],
        env=environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # Ctrl-C must reach it as a user's would: a job started in the background by a
        # non-interactive shell (as CI may run the suite) inherits SIGINT ignored
        preexec_fn=_default_sigint,
        **popen,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(predicate, timeout: float = 60.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


def child_pids(pid: int) -> list[int]:
    """The processes that `pid` forked and that still run its own command line: a local
    pool's workers (not a subprocess it runs). Linux only, read from /proc."""
    proc = Path("/proc")
    try:
        own = (proc / str(pid) / "cmdline").read_bytes()
        children = (proc / str(pid) / "task" / str(pid) / "children").read_text().split()
    except OSError:
        return []
    forked = []
    for child in children:
        try:
            if (proc / child / "cmdline").read_bytes() == own:
                forked.append(int(child))
        except OSError:
            continue
    return forked


def interrupt(proc: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    os.kill(proc.pid, sig)


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path | None]:
    """A tmpfs of `size` at `path` (None where mounting is not allowed); unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,{options}", str(path)], check=True, capture_output=True
    )


def jsonl_rows(path: Path) -> list[dict]:
    """Every line parsed: a torn or malformed line fails the test."""
    return [json.loads(line) for line in path.read_text().splitlines()]
