"""What a stereo-direction clip sounds like summed to mono, against what the two ears get.

Why: stereo direction's constant clips (held ahead, roved +-15 degrees) are told from its
changing clips (sweeping to +-45) with an AUC of 0.55-0.68 in every build (results page).
The renderer holds the sum of the ears' power fixed wherever the voice is; summed to mono
(the mean of the channels, what a model that downmixes hears), a voice off to one side is
comb-filtered by the interaural delay and comes out quieter. This script measures both
loudnesses (BS.1770) of the builtin sources rendered by `stereo_direction.render`, held at
a few azimuths and swept along each tier's path, relative to the voice held ahead.

`--mid-cap-db X` renders instead with the per-frequency gain that keeps the mono mean equal
to the source, capped at X dB above the renderer's (a large X keeps it exactly): the
alternative pan law, measured and not adopted, since it moves the same loss onto the ears.

    python benchmarks/stereo_downmix.py [--sources 6] [--mid-cap-db 1.5 3 6 60]
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


def render_mid_capped(ref: Analysis, azimuth_deg: np.ndarray, cap_db: float) -> np.ndarray:
    """The ears with the mono mean held to the source, the boost capped at `cap_db` over the
    renderer's power normalisation (which it equals for a voice ahead)."""
    freqs, times, spec = stft(
        ref.audio, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary="even"
    )
    path = path_track(ref, azimuth_deg)(np.clip(times, 0, ref.duration_s))  # as `render` reads it
    left, right = ear_response(freqs, path, -1), ear_response(freqs, path, 1)
    power_norm = np.sqrt(2.0 / (np.abs(left) ** 2 + np.abs(right) ** 2))
    mid_norm = 2.0 / np.maximum(np.abs(left + right), 1e-9)
    norm = np.minimum(mid_norm, power_norm * 10 ** (cap_db / 20))
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


def measure(refs: list[Analysis], cap_db: float | None) -> dict[str, tuple[float, float]]:
    """Mean over sources of (mono, ears) loudness minus the same for the voice held ahead."""
    out: dict[str, list[tuple[float, float]]] = {}
    for ref in refs:

        def render(path: np.ndarray, ref: Analysis = ref) -> np.ndarray:
            return (
                render_current(ref, path)
                if cap_db is None
                else render_mid_capped(ref, path, cap_db)
            )

        ahead = loudness_pair(render(np.array([0.0, 0.0])), ref.sr)
        for name, path in paths().items():
            mono, ears = loudness_pair(render(path), ref.sr)
            out.setdefault(name, []).append((mono - ahead[0], ears - ahead[1]))
    return {k: tuple(np.mean(v, axis=0)) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=6, help="builtin sources (default 6)")
    parser.add_argument(
        "--mid-cap-db",
        type=float,
        nargs="*",
        default=[],
        help="also measure the mono-holding pan law, capped at these boosts (dB)",
    )
    args = parser.parse_args(argv)
    config = BuildConfig()
    sources = builtin_sources(default_cache_dir(), render=True)[: args.sources]
    refs = [prepare_reference(s.path, config.sample_rate, config.target_lufs) for s in sources]
    print(
        f"{len(refs)} builtin sources at {config.sample_rate} Hz; loudness (BS.1770, dB) "
        "relative to the voice held ahead: mono mean / both ears"
    )
    variants: list[float | None] = [None, *args.mid_cap_db]
    results = {v: measure(refs, v) for v in variants}
    header = f"{'path':<24}" + "".join(
        f" | {'renderer' if v is None else f'mono held, cap {v:g} dB':>22}" for v in variants
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
