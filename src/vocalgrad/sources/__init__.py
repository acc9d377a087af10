"""Speech sources: turn a spec string into SpeechSource objects with audio files on disk.

Specs: ``builtin`` (Piper TTS Harvard sentences; ``builtin:2`` joins two sentences per clip),
``folder:PATH``, ``vctk:PATH`` and ``hf:NAME_OR_LOCAL_PATH`` (``hf:NAME@SPLIT`` picks a split).
Builtin audio is rendered lazily: call ``ensure_rendered`` (or ``select_sources``, which does
it for what it picks) before reading builtin paths.
"""

from __future__ import annotations

import os
from pathlib import Path

from vocalgrad.errors import ConfigError, SourceError
from vocalgrad.sources.base import SpeechSource
from vocalgrad.sources.builtin import builtin_sources, ensure_rendered
from vocalgrad.sources.folder import folder_sources
from vocalgrad.sources.hf import hf_sources
from vocalgrad.sources.selection import drop_duplicates, duplicates_note, select_sources
from vocalgrad.sources.vctk import vctk_sources

__all__ = [
    "SpeechSource",
    "builtin_sources",
    "default_cache_dir",
    "drop_duplicates",
    "duplicates_note",
    "ensure_rendered",
    "folder_sources",
    "hf_sources",
    "resolve_sources",
    "select_sources",
    "source_folders",
    "vctk_sources",
]

SCHEMES = ("builtin", "folder", "vctk", "hf")


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
) -> list[SpeechSource]:
    """Parse a source spec and list its utterances (builtin paths may not exist yet)."""
    scheme, sep, arg = spec.strip().partition(":")
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    if scheme == "builtin":
        if not arg:
            return builtin_sources(cache)
        if not arg.isdigit() or int(arg) < 1:
            raise SourceError(
                f"source spec {spec!r}: write 'builtin' or 'builtin:N' (N sentences per clip)"
            )
        return builtin_sources(cache, sentences_per_clip=int(arg))
    if scheme not in SCHEMES or not sep:
        raise SourceError(
            f"source spec {spec!r} is not understood; use one of: builtin, folder:PATH, "
            "vctk:PATH, hf:NAME_OR_PATH[@SPLIT]"
        )
    if not arg:
        raise SourceError(f"source spec {spec!r} lacks a path or name after '{scheme}:'")
    if scheme == "folder":
        return folder_sources(arg, speaker_pattern=speaker_pattern)
    if scheme == "vctk":
        return vctk_sources(arg)
    name, at, split = arg.rpartition("@") if "@" in arg else (arg, "", hf_split)
    if at and (not name or not split):
        raise SourceError(f"source spec {spec!r}: write hf:NAME@SPLIT with both parts non-empty")
    return hf_sources(name, cache, split=split, audio_column=hf_audio_column, max_rows=hf_max_rows)


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
    scheme, sep, arg = spec.strip().partition(":")
    if not sep or not arg or scheme not in ("folder", "vctk", "hf"):
        return []
    if scheme == "hf":
        arg = arg.rpartition("@")[0] if "@" in arg else arg
    try:
        path = Path(arg).expanduser()
    except RuntimeError:  # ~user of no such user: `resolve_sources` says so
        return []
    return [path.resolve()] if path.is_dir() else []
