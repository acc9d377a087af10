"""What a stereo-direction clip sounds like summed to mono, against what the two ears get.

Why: a model that sums its input to one channel hears the mean of the ears. Summed to mono, a
voice off to one side is comb-filtered by the interaural delay. Up to renderer revision 17 the
renderer held the sum of the ears' power, so that downmix came out quieter off to one side and
stereo direction's constant clips (held near ahead) were told from its sweeps by level alone;
since revision 18 it holds the downmix per octave band (`stereo_direction.downmix_gain`) and
the ears' sum rises instead. This script measures both loudnesses (BS.1770) of the builtin
sources rendered by `stereo_direction.render`, held at a few azimuths and swept along each
tier's path, relative to the voice held ahead, beside the revision-17 law (`--ears-held`).

    python benchmarks/stereo_downmix.py [--sources 6] [--ears-held]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from scipy.signal import istft, stft

from vocalgrad.audio import loudness_lufs
from vocalgrad.dimensions import stereo_direction
from vocalgrad.dimensions.base import Track
from vocalgrad.dimensions.stereo_direction import HOP, N_FFT, ear_response
from vocalgrad.signal.analysis import Analysis
from vocalgrad.sources import builtin_sources, default_cache_dir
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.render import prepare_reference

HELD_DEG = (15.0, 30.0, 45.0, 60.0)


def path_track(ref: Analysis, azimuth_deg: np.ndarray) -> Track:
    """A path given at evenly spaced points of the clip, as the track both laws render."""
    points = np.linspace(0, ref.duration_s, len(azimuth_deg))
    return lambda t: np.interp(t, points, azimuth_deg)


def render_ears_held(ref: Analysis, azimuth_deg: np.ndarray) -> np.ndarray:
    """The ears under the revision-17 pan law: power-normalised per frequency only, so the
    sum of the ears is the source's wherever the voice is."""
    freqs, times, spec = stft(
        ref.audio, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary="even"
    )
    path = path_track(ref, azimuth_deg)(np.clip(times, 0, ref.duration_s))  # as `render` reads it
    left, right = ear_response(freqs, path, -1), ear_response(freqs, path, 1)
    norm = np.sqrt(2.0 / (np.abs(left) ** 2 + np.abs(right) ** 2))
    ears = []
    for response in (left, right):
        _, out = istft(spec * response * norm, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP)
        ears.append(np.pad(out, (0, max(0, len(ref.audio) - len(out))))[: len(ref.audio)])
    return np.stack(ears, axis=1).astype(np.float32)


def render_current(ref: Analysis, azimuth_deg: np.ndarray) -> np.ndarray:
    """The renderer's own clip along the same path."""
    return stereo_direction.render(ref, path_track(ref, azimuth_deg), np.random.default_rng(0))


def loudness_pair(ears: np.ndarray, sr: int) -> tuple[float, float]:
    """(mono mean, both ears) BS.1770 integrated loudness, LUFS."""
    return loudness_lufs(ears.mean(axis=1), sr), loudness_lufs(ears, sr)


def paths() -> dict[str, np.ndarray]:
    """Held azimuths and each tier's sweep from -tier to +tier."""
    out = {f"held {a:.0f} deg": np.array([a, a]) for a in HELD_DEG}
    for tier, deg in stereo_direction.SPEC.tiers.items():
        out[f"sweep +-{deg:.0f} deg ({tier})"] = np.array([-deg, deg])
    return out


def measure(refs: list[Analysis], ears_held: bool) -> dict[str, tuple[float, float]]:
    """Mean over sources of (mono, ears) loudness minus the same for the voice held ahead."""
    out: dict[str, list[tuple[float, float]]] = {}
    for ref in refs:

        def render(path: np.ndarray, ref: Analysis = ref) -> np.ndarray:
            return render_ears_held(ref, path) if ears_held else render_current(ref, path)

        ahead = loudness_pair(render(np.array([0.0, 0.0])), ref.sr)
        for name, path in paths().items():
            mono, ears = loudness_pair(render(path), ref.sr)
            out.setdefault(name, []).append((mono - ahead[0], ears - ahead[1]))
    return {k: tuple(np.mean(v, axis=0)) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=6, help="builtin sources (default 6)")
    parser.add_argument(
        "--ears-held",
        action="store_true",
        help="also measure the revision-17 pan law, which held the sum of the ears",
    )
    args = parser.parse_args(argv)
    config = BuildConfig()
    sources = builtin_sources(default_cache_dir(), render=True)[: args.sources]
    refs = [prepare_reference(s.path, config.sample_rate, config.target_lufs) for s in sources]
    print(
        f"{len(refs)} builtin sources at {config.sample_rate} Hz; loudness (BS.1770, dB) "
        "relative to the voice held ahead: mono mean / both ears"
    )
    variants = [False, True] if args.ears_held else [False]
    results = {v: measure(refs, v) for v in variants}
    header = f"{'path':<24}" + "".join(
        f" | {'ears held (rev. 17)' if v else 'renderer':>22}" for v in variants
    )
    print(header)
    print("-" * len(header))
    for name in paths():
        cells = "".join(
            f" | {results[v][name][0]:>+9.2f} / {results[v][name][1]:>+9.2f}" for v in variants
        )
        print(f"{name:<24}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
