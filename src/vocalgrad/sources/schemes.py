"""The registry of source schemes: every way a source spec can begin, the kind of sound each
gives, and how its files come to exist.

A spec is ``SCHEME`` or ``SCHEME:ARG``; the spec of a scheme whose files can hold any kind of
sound (``folder:``, ``vctk:``, ``hf:``) may end in ``?kind=KIND`` (speech when it does not),
which the build and the source check read. Adding a kind of source is adding a `Scheme` here
(``register`` for a plug-in or a test); `resolve_sources`, ``vocalgrad list sources``,
`spec_kind` and `ensure_rendered` follow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalgrad.errors import SourceError, did_you_mean
from vocalgrad.signal.kinds import KINDS, SPEECH
from vocalgrad.sources import builtin, music, tones
from vocalgrad.sources.base import Source
from vocalgrad.sources.everyday import everyday_sources
from vocalgrad.sources.folder import folder_sources
from vocalgrad.sources.hf import hf_sources
from vocalgrad.sources.vctk import vctk_sources


@dataclass(frozen=True)
class Options:
    """What resolving a spec may need besides the spec itself."""

    cache_dir: Path
    speaker_pattern: str | None = None
    hf_audio_column: str = "audio"
    hf_split: str = "train"
    hf_max_rows: int | None = None


@dataclass(frozen=True)
class Scheme:
    """One way a source spec can begin.

    Parameters
    ----------
    name
        The spec's scheme (before any ``:``).
    kind
        The kind of sound its sources are; None: any, told by ``?kind=KIND`` (speech by default).
    usage
        The spec's forms, for listings and error messages.
    help
        One line on what it gives.
    resolve
        ``resolve(arg, options) -> sources`` (``arg`` after the ``:``, "" when absent); cheap
        where ``render`` is given (paths may not exist yet).
    needs_arg
        The spec must carry ``:ARG``.
    render
        Writes one missing source file (lazily rendered schemes); None: files exist already.
    domains
        The ``domain`` of the sources ``render`` writes (how `ensure_rendered` finds it).
    protocols
        Protocol name -> build settings that reproduce the protocol on this source (merged
        into the protocol's preset).
    """

    name: str
    kind: str | None
    usage: str
    help: str
    resolve: Callable[[str, Options], list[Source]]
    needs_arg: bool = False
    render: Callable[[Source], None] | None = None
    domains: tuple[str, ...] = ()
    protocols: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _builtin(arg: str, options: Options) -> list[Source]:
    if not arg:
        return builtin.builtin_sources(options.cache_dir)
    if not arg.isdigit() or int(arg) < 1:
        raise SourceError(
            f"source spec 'builtin:{arg}': write 'builtin' or 'builtin:N' (N sentences per clip)"
        )
    return builtin.builtin_sources(options.cache_dir, sentences_per_clip=int(arg))


def _hf(arg: str, options: Options) -> list[Source]:
    name, at, split = arg.rpartition("@") if "@" in arg else (arg, "", options.hf_split)
    if at and (not name or not split):
        raise SourceError(f"source spec 'hf:{arg}': write hf:NAME@SPLIT with both parts non-empty")
    return hf_sources(
        name,
        options.cache_dir,
        split=split,
        audio_column=options.hf_audio_column,
        max_rows=options.hf_max_rows,
    )


_TONE_FAMILIES = {"": ("pure", "harmonic"), "pure": ("pure",), "harmonic": ("harmonic",)}


def _tones(arg: str, options: Options) -> list[Source]:
    if arg not in _TONE_FAMILIES:
        raise SourceError(
            f"source spec 'tones:{arg}': write tones, tones:pure or tones:harmonic "
            "(noise bands: noise)"
        )
    return tones.tone_sources(options.cache_dir, _TONE_FAMILIES[arg])


def _no_arg(scheme: str, make: Callable[[Path], list[Source]]) -> Callable:
    def resolve(arg: str, options: Options) -> list[Source]:
        if arg:
            raise SourceError(f"source spec '{scheme}:{arg}': write '{scheme}' alone")
        return make(options.cache_dir)

    return resolve


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme(
            "builtin",
            SPEECH,
            "builtin | builtin:N",
            "Harvard sentences by eight Piper TTS speakers (N sentences per clip)",
            _builtin,
            render=builtin.render_missing,
            domains=(builtin.BUILTIN_DOMAIN,),
        ),
        Scheme(
            "folder",
            None,
            "folder:PATH[?kind=KIND]",
            "your own recordings, one group per top-level sub-folder",
            lambda arg, o: folder_sources(arg, speaker_pattern=o.speaker_pattern),
            needs_arg=True,
        ),
        Scheme(
            "vctk",
            SPEECH,
            "vctk:PATH",
            "the VCTK corpus (the published benchmark's speech)",
            lambda arg, o: vctk_sources(arg),
            needs_arg=True,
        ),
        Scheme(
            "hf",
            None,
            "hf:NAME_OR_PATH[@SPLIT][?kind=KIND]",
            "a Hugging Face audio dataset, or a local audiofolder",
            _hf,
            needs_arg=True,
        ),
        Scheme(
            "tones",
            "tone",
            "tones | tones:pure | tones:harmonic",
            "synthetic pure tones and harmonic complexes, grouped by half-octave band",
            _tones,
            render=tones.render_missing,
            domains=("tones", "beeps"),
        ),
        Scheme(
            "noise",
            "noise",
            "noise",
            "synthetic one-octave noise bands, grouped by half-octave band",
            _no_arg("noise", lambda cache: tones.tone_sources(cache, ("noise",))),
        ),
        Scheme(
            "beeps",
            "tone",
            "beeps",
            "the published beep-only ablation's ten pure tones (700-2050 Hz)",
            _no_arg("beeps", tones.beep_sources),
            protocols=tones.PROTOCOLS,
        ),
        Scheme(
            "music",
            "music",
            "music",
            "notes and phrases by 16 General MIDI instruments (pretty-midi's SoundFont, "
            "FluidSynth), grouped by instrument family",
            _no_arg("music", music.music_sources),
            render=music.render_missing,
            domains=("music",),
        ),
        Scheme(
            "everyday",
            "everyday",
            "everyday",
            "recordings of machines, water, fire, traffic, farms and crowds (Debian's "
            "lincity-ng-data), grouped by what makes the sound",
            _no_arg("everyday", lambda cache: everyday_sources()),
        ),
    )
}

_KIND_OPTION = re.compile(r"\?kind=(?P<kind>[a-z]+)$")


def register(scheme: Scheme, *, replace: bool = False) -> None:
    """Add a source scheme (a plug-in's, or a test's).

    Raises
    ------
    SourceError
        A scheme of that name exists and ``replace`` is false.
    """
    if scheme.name in SCHEMES and not replace:
        raise SourceError(f"a source scheme named {scheme.name!r} exists")
    SCHEMES[scheme.name] = scheme


def parse_spec(spec: str) -> tuple[Scheme, str, str]:
    """(scheme, argument, kind of sound) of a source spec, without touching any file.

    Raises
    ------
    SourceError
        Unknown scheme, a missing or unwanted argument, or a ``?kind=`` that is unknown or
        given to a scheme of one kind.
    """
    text = spec.strip()
    option = _KIND_OPTION.search(text)
    if option:
        text = text[: option.start()]
    name, sep, arg = text.partition(":")
    scheme = SCHEMES.get(name)
    if scheme is None:
        raise SourceError(
            f"source spec {spec!r} is not understood{did_you_mean(name, SCHEMES)}; use one of: "
            + ", ".join(s.usage for s in SCHEMES.values())
        )
    if scheme.needs_arg and not arg:
        raise SourceError(f"source spec {spec!r} lacks a path or name after '{name}:'")
    kind = scheme.kind or SPEECH
    if option:
        wanted = option["kind"]
        if wanted not in KINDS:
            raise SourceError(
                f"source spec {spec!r}: unknown kind {wanted!r}; choose from {', '.join(KINDS)}"
            )
        if scheme.kind is not None and wanted != scheme.kind:
            raise SourceError(
                f"source spec {spec!r}: {name} sources are {scheme.kind}; "
                "?kind= is for folder: and hf: sources"
            )
        kind = wanted
    return scheme, arg, kind


def spec_kind(spec: str) -> str:
    """The kind of sound a source spec gives (`parse_spec`)."""
    return parse_spec(spec)[2]


def with_kind(spec: str, kind: str | None) -> str:
    """The spec with ``?kind=KIND`` set (what ``--kind`` does); unchanged for None."""
    if kind is None:
        return spec
    return f"{_KIND_OPTION.sub('', spec.strip())}?kind={kind}"


def resolve_spec(spec: str, options: Options) -> list[Source]:
    """The sources of a spec, each of its kind (`parse_spec`)."""
    scheme, arg, kind = parse_spec(spec)
    sources = scheme.resolve(arg, options)
    if scheme.kind is None and kind != SPEECH:
        from dataclasses import replace

        sources = [replace(s, kind=kind) for s in sources]
    return sources


def ensure_rendered(sources: Iterable[Source]) -> list[Source]:
    """Write every missing file of a lazily rendered source (builtin speech, tones, music);
    check that every other source's file exists."""
    renderers = {d: s.render for s in SCHEMES.values() if s.render for d in s.domains}
    sources = list(sources)
    for src in sources:
        if os.path.exists(src.path):
            continue
        render = renderers.get(src.domain)
        if render is None:
            raise SourceError(
                f"{src.path}: audio file for {src.source_id} is missing; re-resolve the source"
            )
        render(src)
    return sources
