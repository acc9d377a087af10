"""Sources: turn a spec string into Source records with audio files on disk.

Speech: ``builtin`` (Piper TTS Harvard sentences; ``builtin:2`` joins two sentences per clip),
``folder:PATH``, ``vctk:PATH`` and ``hf:NAME_OR_LOCAL_PATH`` (``hf:NAME@SPLIT`` picks a split).
Other kinds of sound: ``tones`` (``tones:pure``, ``tones:harmonic``), ``noise``, ``beeps`` (the
published beep-only ablation) and ``music``; ``folder:PATH?kind=KIND`` (and ``hf:``) for your own
sounds of another kind. `SCHEMES` (`vocalgrad.sources.schemes`) lists them all. Builtin, tone
and music audio is rendered lazily: call ``ensure_rendered`` (or ``select_sources``, which does
it for what it picks) before reading their paths.
"""

from __future__ import annotations

import os
from pathlib import Path

from vocalgrad.errors import ConfigError
from vocalgrad.sources.base import Source
from vocalgrad.sources.builtin import builtin_sources
from vocalgrad.sources.folder import folder_sources
from vocalgrad.sources.hf import hf_sources
from vocalgrad.sources.schemes import (
    SCHEMES,
    Options,
    ensure_rendered,
    parse_spec,
    resolve_spec,
    spec_kind,
    with_kind,
)
from vocalgrad.sources.selection import drop_duplicates, duplicates_note, select_sources
from vocalgrad.sources.vctk import vctk_sources

__all__ = [
    "SCHEMES",
    "Source",
    "Source",
    "builtin_sources",
    "default_cache_dir",
    "drop_duplicates",
    "duplicates_note",
    "ensure_rendered",
    "folder_sources",
    "hf_sources",
    "parse_spec",
    "resolve_sources",
    "select_sources",
    "source_folders",
    "spec_kind",
    "vctk_sources",
    "with_kind",
]


def default_cache_dir() -> Path:
    """$VOCALGRAD_CACHE, else $XDG_CACHE_HOME/vocalgrad, else ~/.cache/vocalgrad.

    Raises
    ------
    ConfigError
        The variable names a home folder that cannot be found (``~nosuchuser/x``), or no
        home folder is known for the default.
    """
    if os.environ.get("VOCALGRAD_CACHE"):
        return _expanded("VOCALGRAD_CACHE", os.environ["VOCALGRAD_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return _expanded("XDG_CACHE_HOME", os.environ["XDG_CACHE_HOME"]) / "vocalgrad"
    try:
        return Path.home() / ".cache" / "vocalgrad"
    except RuntimeError as err:
        raise ConfigError(
            f"no home folder to keep the cache in ({err}); set VOCALGRAD_CACHE to a folder"
        ) from None


def _expanded(name: str, value: str) -> Path:
    """`value` of the environment variable `name` as a path, `~` expanded, or one line."""
    try:
        return Path(value).expanduser()
    except RuntimeError as err:  # "Could not determine home directory."
        raise ConfigError(
            f"{name}={value!r}: cannot expand '~' ({err}); set it to a folder path "
            "that exists or can be made, e.g. an absolute one"
        ) from None


def resolve_sources(
    spec: str,
    *,
    cache_dir: Path | None = None,
    speaker_pattern: str | None = None,
    hf_audio_column: str = "audio",
    hf_split: str = "train",
    hf_max_rows: int | None = None,
) -> list[Source]:
    """Parse a source spec and list its sources (lazily rendered paths may not exist yet).

    Parameters
    ----------
    spec
        ``SCHEME[:ARG][?kind=KIND]`` (`SCHEMES`).
    cache_dir
        Where rendered and downloaded sources live (default: `default_cache_dir`).
    speaker_pattern, hf_audio_column, hf_split, hf_max_rows
        Options of the folder: and hf: schemes.

    Returns
    -------
    list[Source]
        Every source of the spec, each of the spec's kind of sound.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    options = Options(cache, speaker_pattern, hf_audio_column, hf_split, hf_max_rows)
    return resolve_spec(spec, options)


def source_folders(spec: str) -> list[Path]:
    """The local folders a source spec reads its audio from (``folder:``, ``vctk:`` and a
    local ``hf:`` path): a build must not write inside one, or a rerun would take its own
    clips for sources.

    Parameters
    ----------
    spec : str
        A source spec, as `resolve_sources` takes it.

    Returns
    -------
    list of Path
        Resolved (absolute, symlinks followed) folders; empty for ``builtin`` and hub names.
    """
    scheme, arg, _ = parse_spec(spec)
    if not arg or scheme.name not in ("folder", "vctk", "hf"):
        return []
    if scheme.name == "hf":
        arg = arg.rpartition("@")[0] if "@" in arg else arg
    try:
        path = Path(arg).expanduser()
    except RuntimeError:  # ~user of no such user: `resolve_sources` says so
        return []
    return [path.resolve()] if path.is_dir() else []
