"""Benchmark the first install: uv against pip, each into a fresh virtual environment.

Why: on a fresh clone `make demo` starts by installing the project, and with pip that alone
took over three minutes. The Makefile now bootstraps uv with pip and lets uv install the
rest; this script measures both ways in one run, with cold caches, so the ratio is fair.

    python benchmarks/bench_install.py [--extras models] [--pip-extras all,test]

The old way, as the Makefile did: `python -m venv`, pip upgraded, the CPU build of torch
with pip, then the project in editable mode with pip (`--no-cache-dir`). The new way, as the
Makefile does now: `python -m venv`, uv installed by pip, the pinned torch wheel fetched by
pip from wherever pip finds it (uv would resolve a multi-GB CUDA build of a plain `torch`),
then that wheel and the project installed by uv (an empty `UV_CACHE_DIR`), and the bytecode
of what vocalgrad and Whisper import written (`python -m vocalgrad.bytecode`; pip compiles all it
installs). The Makefile splits that uv step in two, the core and then the models extra, to
compile librosa's numba kernels beside the second; timed here as one.
Timings are wall clock: an install waits on the network and the disk more than on the CPU.
The machine's load is printed, since other work on it slows both ways alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the Makefile's pin: the CPU build


def _run(cmd: list[str], env: dict[str, str]) -> None:
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def install(tool: str, extras: str, python: str) -> tuple[float, float]:
    """Seconds for the whole install into a fresh venv, and for its last step alone."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-install-{tool}-"))
    env = {**os.environ, "UV_CACHE_DIR": str(work / "uv-cache"), "PIP_NO_CACHE_DIR": "1"}
    py = str(work / "venv" / "bin" / "python")
    target = f"{ROOT}[{extras}]" if extras else str(ROOT)
    try:
        start = time.perf_counter()
        _run([python, "-m", "venv", str(work / "venv")], env)
        if tool == "uv":
            _run([py, "-m", "pip", "install", "--quiet", "uv"], env)
            wheels = work / "wheels"
            _run(
                [py, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(wheels), TORCH],
                env,
            )
            project = time.perf_counter()
            _run(
                [
                    str(work / "venv" / "bin" / "uv"),
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    py,
                    *map(str, wheels.glob("torch-*.whl")),
                    "-e",
                    target,
                ],
                env,
            )
            _run([py, "-m", "vocalgrad.bytecode", "whisper:tiny.en"], env)  # as the Makefile does
        else:
            _run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], env)
            _run([py, "-m", "pip", "install", "--quiet", TORCH], env)
            project = time.perf_counter()
            _run([py, "-m", "pip", "install", "--quiet", "-e", target], env)
        end = time.perf_counter()
        _run([py, "-c", "import torch, vocalgrad"], env)  # the result must work
        return end - start, end - project
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--extras", default="models", help="extras uv installs: the demo's (default models)"
    )
    parser.add_argument(
        "--pip-extras",
        default="all,test",
        help="extras pip installs: what the Makefile installed before (default all,test)",
    )
    parser.add_argument(
        "--same",
        action="store_true",
        help="also time pip on uv's extras, for a like-for-like ratio",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter that makes the venvs")
    args = parser.parse_args(argv)
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"install benchmark: fresh venvs, cold caches, {os.cpu_count()} CPUs, load {load}")
    runs = [("uv", args.extras), ("pip", args.pip_extras)]
    if args.same and args.pip_extras != args.extras:
        runs.append(("pip", args.extras))
    times = {}
    for tool, extras in runs:
        total, project = install(tool, extras, args.python)
        times[(tool, extras)] = total
        print(
            f"  {tool:<3} [{extras or '-'}]: {total:6.1f} s in all, {project:6.1f} s "
            "for the last install step"
        )
    uv = times[("uv", args.extras)]
    print(
        f"\n  pip [{args.pip_extras}] / uv [{args.extras}] = "
        f"{times[('pip', args.pip_extras)] / uv:.2f}x"
    )
    if ("pip", args.extras) in times and args.pip_extras != args.extras:
        print(
            f"  pip [{args.extras}] / uv [{args.extras}] = {times[('pip', args.extras)] / uv:.2f}x "
            "(same requirements)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
