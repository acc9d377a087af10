"""Compile librosa's numba kernels once, in one process, before anything runs in parallel.

librosa caches its numba functions next to its own files. On a fresh install, several
processes compiling and writing those caches at the same time can read a half-written
cache and crash with a segmentation fault (seen with two test workers on a new venv). One
call here, made before workers start, writes the caches; later processes only read them.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block ends, then act on it as the handler before would.

    Why: numba loads its caches through ctypes callbacks, and a KeyboardInterrupt raised
    inside a callback is printed ("Exception ignored on calling ctypes callback function")
    and dropped. A Ctrl-C during the warm-up was lost and the build ran on to its end. Only
    the main thread can swap the handler; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def warm_up(sr: int = 16000) -> None:
    """Touch every numba-compiled librosa path vocalgrad uses (tens of seconds the first time),
    with Ctrl-C held until it is done (`deferred_interrupt`)."""
    with deferred_interrupt():
        _touch_numba_paths(sr)


def _touch_numba_paths(sr: int) -> None:
    import librosa

    rng = np.random.default_rng(0)
    y = (0.1 * rng.standard_normal(sr)).astype(np.float32)
    mel = np.log(
        librosa.feature.melspectrogram(y=y, sr=sr, n_fft=512, hop_length=160, n_mels=40) + 1e-8
    )
    librosa.sequence.dtw(X=mel, Y=mel, backtrack=True)
    mfcc = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13, hop_length=160)
    librosa.sequence.dtw(X=mfcc, Y=mfcc, metric="cosine")
    librosa.yin(y, fmin=60, fmax=400, sr=sr, frame_length=1024, hop_length=160)
    librosa.feature.rms(y=y, frame_length=512, hop_length=160, center=False)
    librosa.stft(y, n_fft=512, hop_length=160)
    frames = librosa.util.frame(y.astype(np.float64), frame_length=400, hop_length=160).T
    librosa.lpc(frames * np.hanning(400), order=18, axis=-1)  # vocal-tract length's envelope


if __name__ == "__main__":
    warm_up()
