"""The dimension contract: what every dimension module declares, with the protocol's defaults.

A dimension is one module, ``vocalgrad.dimensions.<name>``, that defines the required members
of `Dimension` (``SPEC``, ``endpoints``, ``inaudible_reason``, ``render``, ``measure``) and, where
the defaults do not fit, the optional ones (``QUESTION``, ``output_time``, ``source_time``,
``blind_change``, ``evidence``, ``held_evidence``). `bind` resolves a module against the
protocol once, at registration: shared code calls every member of the `Bound` it returns and
never asks a module what it has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Protocol

import numpy as np

from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.evidence import added_energy
from vocalgrad.signal.kinds import SPEECH

# track(times_s) -> parameter values at those times (already on the right scale)
Track = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class DimensionSpec:
    """Everything about a dimension that metadata, the card and the builder need to know.

    Why one declaration: the builder, verification, the audit, the dataset card and the docs'
    dimension page all read the same numbers, so none of them can disagree about a floor or a
    unit.

    Attributes
    ----------
    name : str
        The dimension's name: its module's name and the ``category`` of its rows.
    parameter : str
        The physical quantity rendered ("gain", "F0 shift", ...).
    unit : str
        The unit of `parameter`, of `tiers` and of `endpoints`' values ("dB", "semitones").
    increase_means : str
        What the label "increase" means, in words ("the voice gets louder").
    tiers : dict of str to float
        The published magnitudes by tier ("low", "mid", "high"), in `unit`.
    scale : str
        "linear" or "log": the scale the trajectory is interpolated on.
    measured : str
        What verification measures, in words.
    measured_unit : str
        The unit of the measured values and changes (`Measured`), of `audibility_floor` and
        of `constant_tolerance`.
    audibility_floor : float
        The smallest realised change, in `measured_unit`, a listener can hear (from a
        published JND, cited in `floor_basis`); a changing clip that moves less is refused as
        inaudible, never labelled.
    floor_basis : str
        The published source of `audibility_floor`.
    psychometric_range : tuple of (float, float)
        The magnitudes, in `unit`, a threshold sweep should span.
    centre : str
        How the trajectory is centred so that its time-average does not depend on curve and
        direction: "none", "mean" (the mean over the speech span is the midpoint; geometric
        on a log scale), "energy" (the same, weighted by the source's momentary loudness) or
        "harmonic" (the mean of 1/value is 1: a speed, so every clip keeps the source's
        duration).
    neutral_value : float or None
        The parameter's value outside the speech span, in `unit`, where it is held neutral
        there; None otherwise.
    loudness_neutral : bool
        Compensate the loudness the processing changes as a side effect (False where loudness
        is the target).
    source_edges : bool
        Outside the speech span (+- `vocalgrad.audio.EDGE_GUARD_S`) every clip carries the
        source's own samples, so no processing residue in the silences can differ between an
        increase clip and its decrease twin.
    target_cues : tuple of str
        Audit cue families that measure the target itself on this dimension (allowed to
        differ between directions).
    constant_tolerance : float or None
        Largest |change|, in `measured_unit`, a constant clip may show, where the measure
        varies with the speech content even when the parameter is held; None: the
        audibility floor.
    rove : float
        Half-width, in `unit` (linear scale), of the uniform shift drawn per clip for where
        its path sits, so a clip's average value tells nothing; 0 for no rove.
    channels : int
        Channels of the clip: 2 for a dimension that lives between the ears (a listener that
        hears fewer cannot be tested on it), else 1.
    warps_time : bool
        The dimension warps time (declares ``output_time`` and ``source_time``): the clip's
        speech span, loudness compensation and the audit's padding cues follow the warp.
    order_free_limit : str
        An order-free cue the dimension's physics keeps, in words with its measured size;
        the audit still fails on it and names it. Empty for none.
    kinds : tuple of str
        The kinds of sound (`vocalgrad.signal.kinds`) it is defined for; a build from a
        source of another kind is refused before any work.
    """

    name: str
    parameter: str  # the physical quantity rendered
    unit: str
    increase_means: str  # what the label "increase" means, in words
    tiers: dict[str, float]  # published magnitudes, low/mid/high
    scale: str  # "linear" or "log": the scale on which the trajectory is interpolated
    measured: str  # what verification measures
    measured_unit: str
    # The audibility floor: the smallest realised change (in measured_unit; "increase"
    # clips change upward) a listener can hear, from a published JND (floor_basis cites it). A
    # clip whose measured change is smaller is refused as inaudible, never labelled.
    audibility_floor: float
    floor_basis: str
    psychometric_range: tuple[float, float]  # magnitudes a threshold sweep should span
    # How the trajectory is centred so that its time-average does not depend on curve x
    # direction (else a quadratic increase is lower on average than its decrease twin, and
    # mean F0, loudness or duration give the label away): "none", "mean" (arithmetic mean
    # over the speech span is the midpoint; geometric on a log scale), "energy" (the same,
    # weighted by the source's momentary loudness: see render.track_for), "harmonic" (mean of
    # 1/value is 1: speed, so every clip keeps the source's duration).
    centre: str = "none"
    neutral_value: float | None = None  # the parameter outside the speech span, if held neutral
    loudness_neutral: bool = True  # compensate loudness the processing changes as a side effect
    # The process acts on the speech only: outside the speech span (+- EDGE_GUARD_S) every clip
    # carries the source's own samples, so resynthesis residue in the silences (PSOLA copies
    # and overlap-adds them too) cannot differ between an increase clip and its decrease twin.
    source_edges: bool = False
    # Audit cue families that measure the target itself on this dimension (legitimate to
    # differ between directions): e.g. the level in the last 300 ms *is* a volume cue.
    target_cues: tuple[str, ...] = ()
    # Largest |change| a constant clip may show. Measures whose value depends on the speech
    # content (error or reverb level re the speech) vary between head and tail even when the
    # parameter is held, so they need more room than the audibility floor.
    constant_tolerance: float | None = None
    # Where the path sits is roved per clip: shifted by a value drawn uniformly within
    # +-rove (linear scale; constant clips hold the midpoint, shifted alike), so the clip's
    # average value tells nothing, as level roving does for loudness.
    rove: float = 0.0
    # Channels of the clip: 2 for a dimension that lives between the ears (stereo direction);
    # a listener that hears fewer cannot be tested on it.
    channels: int = 1
    # The dimension warps time (``output_time`` / ``source_time`` are not the identity): the
    # clip's speech span, loudness compensation and the audit's padding cues follow the warp.
    warps_time: bool = False
    # An order-free cue that the physics of the dimension keeps, measured: what carries it and
    # how much. The audit still fails on it (it is a shortcut all the same) and names it in
    # its reason and its report, so the failure reads as a known limit, never a silent pass.
    order_free_limit: str = ""
    # The kinds of sound (`vocalgrad.signal.kinds`) the dimension is defined for: a build from
    # a source of another kind is refused before any work. Speech only unless declared, since
    # every process was first designed and verified on speech.
    kinds: tuple[str, ...] = (SPEECH,)

    @property
    def constant_limit(self) -> float:
        """Largest |change| (measured_unit) a constant clip may show: `constant_tolerance`,
        else the audibility floor."""
        return (
            self.constant_tolerance
            if self.constant_tolerance is not None
            else self.audibility_floor
        )

    def to_dict(self) -> dict:
        """The spec as plain data (JSON-ready), for the dataset card and `vocalgrad list`.

        Returns
        -------
        dict
            Every field by name (`tiers` a dict, tuples as tuples), values in the units
            above.
        """
        return asdict(self)


@dataclass(frozen=True)
class Question:
    """How a dimension is asked about, per question format.

    Parameters
    ----------
    attribute
        The words that name the dimension in gradual and comparison questions ("Does the
        {attribute} increase or decrease over time?"). Empty: the dimension's name with
        underscores as spaces (the published wording).
    recognition
        (what is judged, the category an increase moves towards, the one a decrease moves
        towards) for recognition items: "Is the {0} {1} or {2}?". Empty: (attribute, "high",
        "low").
    paraphrases
        Everyday gradual wordings, one per ``paraphraseN`` variant (N from 1); a dimension
        without them is not asked with those variants. They speak of a voice: speech only.
    other_kinds
        The attribute for a sound that is not speech, with ``{noun}`` for the kind's noun
        ("pitch of the {noun}" asks "Does the pitch of the tone increase ...?"): the speech
        wording names a voice or a speaker. Empty: the speech attribute.
    """

    attribute: str = ""
    recognition: tuple[str, str, str] | tuple[()] = ()
    paraphrases: tuple[str, ...] = ()
    other_kinds: str = ""


@dataclass(frozen=True)
class Measured:
    """The realised trajectory of the target quantity over the speech span.

    What verification reads instead of the rendering parameter: a label holds only when the
    clip's own measure moves its way.

    Attributes
    ----------
    start : float
        The measure over the head of the speech span (its first 20%), in the dimension's
        ``measured_unit``, relative to the source; NaN where it cannot be measured.
    end : float
        The same over the tail (its last 20%).
    """

    start: float
    end: float

    @property
    def change(self) -> float:
        """end - start, in the measured unit; positive for an "increase" clip."""
        return self.end - self.start


@dataclass(frozen=True)
class Corroborated(Measured):
    """A measured change that counts only where a second cue of the same physical event
    moves the same way by at least its own floor (a source moving away loses direct level
    *and* gains reverberation; a source moving right gains level *and* leads in time at the
    right ear). One cue alone is another dimension, or a broken renderer.

    Attributes
    ----------
    start, end : float
        As in `Measured`: the primary cue over the head and tail, in ``measured_unit``.
    corroboration : float
        The second cue's change, tail minus head, in its own unit.
    corroboration_floor : float
        The smallest |corroboration|, in the same unit, that counts as agreeing.
    """

    corroboration: float = 0.0  # the second cue's change (its own unit)
    corroboration_floor: float = 0.0

    @property
    def change(self) -> float:
        """end - start where the second cue agrees (sign and floor), 0.0 where it does not,
        NaN where either is unmeasured."""
        change = self.end - self.start
        if not (np.isfinite(change) and np.isfinite(self.corroboration)):
            return float("nan")
        agrees = (
            np.sign(self.corroboration) == np.sign(change)
            and abs(self.corroboration) >= self.corroboration_floor
        )
        return float(change) if agrees else 0.0


def held_value(measured: Measured) -> float:
    """One value for a held clip: the mean of its head and tail measures (either if one is NaN).

    Why: a held clip has no course over time, so its head and tail are two readings of one
    value, and averaging them halves the measure's noise.

    Parameters
    ----------
    measured : Measured
        The clip's head and tail measures, in the dimension's ``measured_unit``.

    Returns
    -------
    float
        Their mean in ``measured_unit``; the finite one where the other is NaN; NaN where
        both are.
    """
    values = [v for v in (measured.start, measured.end) if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")


# evidence(clip, ref, sr) -> float: > 0 means the dimension increased over the clip
Evidence = Callable[[np.ndarray, np.ndarray, int], float]


class Dimension(Protocol):
    """The module-level contract of ``vocalgrad.dimensions.<name>``: the required members.

    The optional members and their defaults are those of `Bound` (see `bind`).
    """

    SPEC: DimensionSpec

    def endpoints(self, magnitude: float, sr: int) -> tuple[float, float]:
        """(start, end) of the parameter for an *increase* of the given magnitude.

        Parameters
        ----------
        magnitude : float
            The size of the change, in ``SPEC.unit`` (one of ``SPEC.tiers``' values, or any
            value of a threshold sweep).
        sr : int
            The rate the clip is rendered at, Hz (a dimension bounded by Nyquist reads it).

        Returns
        -------
        tuple of (float, float)
            The parameter at the start and at the end of an increase, in ``SPEC.unit``; a
            decrease runs from end to start.
        """

    def inaudible_reason(self, magnitude: float, sr: int) -> str | None:
        """Why this magnitude would change nothing at sample rate sr, or None if it is fine.

        Parameters
        ----------
        magnitude : float
            The size of the change, in ``SPEC.unit``.
        sr : int
            The rate the clip would be rendered at, Hz.

        Returns
        -------
        str or None
            One line saying why no listener could hear the change (the build refuses the
            condition and records it), or None when it can be rendered.
        """

    def render(self, ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
        """Apply the time-varying change; ``track`` maps source times (s) to parameter values.

        Parameters
        ----------
        ref : Analysis
            The loudness-normalised source, mono, at ``ref.sr`` Hz, with its speech span.
        track : Track
            Maps source times (ndarray of seconds from the first sample) to the parameter's
            values there, in ``SPEC.unit`` (centred and roved already).
        rng : numpy.random.Generator
            The clip's own random stream (derived from the seed and the item id): every
            random draw of the render comes from it, so a clip is reproducible.

        Returns
        -------
        ndarray, float32 at ``ref.sr`` Hz
            The processed source, shape ``(n,)``, or ``(n, 2)`` for a two-channel dimension
            (``SPEC.channels``); ``n`` is the source's length unless the dimension warps time
            (``SPEC.warps_time``). Not yet levelled, floored or limited: the engine does that.
        """

    def measure(self, clip: Analysis, ref: Analysis) -> Measured:
        """Recover start and end of the measured quantity, relative to the reference.

        Parameters
        ----------
        clip : Analysis
            The clip as written (16-bit samples as float32), or one held part of it, at
            ``ref.sr`` Hz, with its speech span.
        ref : Analysis
            The source as heard (loudness-normalised, with its room-tone floor), same rate.

        Returns
        -------
        Measured
            The quantity over the head and the tail of the speech span, in
            ``SPEC.measured_unit``, relative to `ref`: ``change`` > 0 for an increase clip.
            Independent of the rendering parameter: read from the audio alone.
        """


def _identity_time(track: Track, times_s: np.ndarray) -> np.ndarray:
    """The default time map: a dimension that does not warp time leaves every moment in place."""
    return np.asarray(times_s, dtype=np.float64)


def _audible_on_every_source(magnitude: float, ref: Analysis) -> str | None:
    """Default `Bound.source_inaudible_reason`: the rate rule alone decides."""
    return None


def _unbounded(sr: int) -> tuple[float, float]:
    """Default `Bound.domain`: every value of the parameter can be rendered."""
    return -np.inf, np.inf


def _no_blind_change(clip: Analysis) -> float | None:
    """The default source-free measure: none (verification without a source checks nothing)."""
    return None


REQUIRED = ("SPEC", "endpoints", "inaudible_reason", "render", "measure")
OPTIONAL = (
    "QUESTION",
    "output_time",
    "source_time",
    "source_inaudible_reason",
    "domain",
    "blind_change",
    "evidence",
    "held_evidence",
    "pairs_with",
    "not_paired_with",
)


@dataclass(frozen=True)
class Bound:
    """A dimension module resolved against the protocol: every member present.

    Required (from the module): ``SPEC``, ``endpoints(magnitude, sr) -> (start, end)``,
    ``inaudible_reason(magnitude, sr) -> str | None``, ``render(ref, track, rng) -> audio`` and
    ``measure(clip, ref) -> Measured``.

    Optional, with these defaults:

    - ``QUESTION`` (`Question`): how it is asked; default: by its name, "high" / "low".
    - ``output_time(track, source_times_s) -> clip_times_s`` and ``source_time(track,
      clip_times_s) -> source_times_s``: the time maps of a warping dimension (declare
      ``SPEC.warps_time``); default: the identity.
    - ``source_inaudible_reason(magnitude, ref) -> str | None``: why a change of this
      magnitude would be inaudible on this source (its bandwidth, say), decided before
      rendering; default: None (the rate rule, ``inaudible_reason``, alone decides).
    - ``domain(sr) -> (low, high)``: the parameter values a clip may take at ``sr`` Hz, which
      bound an endpoint rove (``BuildConfig.rove_endpoints``); default: unbounded.
    - ``blind_change(clip) -> float | None``: the change measured from the clip alone, for
      datasets without sources; default: None (no source-free check).
    - ``evidence(clip, ref, sr) -> float``: the ideal observer's decision statistic on a gradual
      clip (float arrays at ``sr`` Hz, ``clip`` mono ``(n,)`` or ``(n, channels)``, ``ref`` the
      source ``(m,)``), > 0 for an increase; independent of ``measure`` by design. Default:
      the energy added to the source, late vs early (dB).
    - ``held_evidence(clip, ref, sr) -> float``: where a held clip lies on the dimension re
      its source; default: `Bound.held`'s construction from ``evidence``.
    - ``pairs_with`` (other dimension -> why): the dimensions whose change may be rendered
      onto this one's in one clip (the two-dimension formats: this process first, theirs
      onto its output), and why each one's measure still reads its own course there;
      ``not_paired_with`` (other dimension -> why not): pairs refused, with the measured
      reason. Default: none (a pair declared by neither is refused).

    Attributes
    ----------
    module : object
        The module (or namespace) bound.
    SPEC : DimensionSpec
        Its declaration.
    endpoints, inaudible_reason, render, measure : callable
        The required members, as `Dimension` describes them.
    QUESTION : Question
        How it is asked.
    output_time, source_time : callable (Track, ndarray) -> ndarray
        Source times (s) to clip times (s) and back; the identity unless it warps time.
    source_inaudible_reason : callable (float, Analysis) -> str or None
        Why a magnitude (in ``SPEC.unit``) is inaudible on one source, or None.
    domain : callable (int) -> tuple of (float, float)
        The parameter's renderable range at a rate (Hz), in ``SPEC.unit``.
    blind_change : callable (Analysis) -> float or None
        The change read from the clip alone, in ``SPEC.measured_unit``, or None.
    evidence : callable (ndarray, ndarray, int) -> float
        The ideal observer's statistic on a gradual clip; > 0 for an increase.
    held_evidence : callable (ndarray, ndarray, int) -> float, or None
        Where a held clip lies re its source; None: `held` builds it from `evidence`.
    pairs_with, not_paired_with : dict of str to str
        Other dimension -> why it may (or may not) be rendered onto this one in one clip.
    """

    module: object
    SPEC: DimensionSpec
    endpoints: Callable[[float, int], tuple[float, float]]
    inaudible_reason: Callable[[float, int], str | None]
    render: Callable[[Analysis, Track, np.random.Generator], np.ndarray]
    measure: Callable[[Analysis, Analysis], Measured]
    QUESTION: Question = Question()
    output_time: Callable[[Track, np.ndarray], np.ndarray] = _identity_time
    source_time: Callable[[Track, np.ndarray], np.ndarray] = _identity_time
    source_inaudible_reason: Callable[[float, Analysis], str | None] = _audible_on_every_source
    domain: Callable[[int], tuple[float, float]] = _unbounded
    blind_change: Callable[[Analysis], float | None] = _no_blind_change
    evidence: Evidence = added_energy
    held_evidence: Evidence | None = field(default=None, repr=False)
    pairs_with: Mapping[str, str] = field(default_factory=dict, repr=False)
    not_paired_with: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """The dimension's name (``SPEC.name``): the ``category`` of its rows."""
        return self.SPEC.name

    def held(self, clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
        """Where a held clip (comparison part, recognition clip) lies on the dimension re its
        source, as ideal-observer evidence: ``held_evidence`` where declared, else the gradual
        evidence of the source (at the clip's level, unless level is the target) followed by
        the clip, so the first third sees no change and the last third the held value.

        Parameters
        ----------
        clip
            The held clip, float, ``(n,)`` or ``(n, channels)``, at ``sr`` Hz.
        ref
            Its source, mono ``(m,)``, at ``sr`` Hz.
        sr
            Sample rate in Hz.

        Returns
        -------
        float
            Larger for a clip further towards "increase".
        """
        if self.held_evidence is not None:
            return float(self.held_evidence(clip, ref, sr))
        gain = 1.0
        if self.SPEC.loudness_neutral:
            n = min(len(clip), len(ref))
            gain = float(np.dot(clip[:n], ref[:n]) / max(np.dot(ref[:n], ref[:n]), 1e-12))
        # a multi-channel clip is led in by the source straight ahead
        lead = gain * ref if clip.ndim == 1 else np.repeat(ref[:, None], clip.shape[1], axis=1)
        return float(self.evidence(np.concatenate([lead, clip]), np.concatenate([ref, ref]), sr))


def bind(module: ModuleType | object) -> Bound:
    """Resolve a dimension module (or any namespace with the same members) against the protocol.

    Parameters
    ----------
    module
        ``vocalgrad.dimensions.<name>``, a plug-in module, or a namespace whose ``vars`` hold
        the members of `Dimension` (a test-only dimension: ``types.SimpleNamespace(...)``).

    Returns
    -------
    Bound
        The module's members, the protocol's defaults where it declares none.

    Raises
    ------
    TypeError
        A required member is missing, ``SPEC`` is not a `DimensionSpec`, or the time maps do
        not match ``SPEC.warps_time``.
    """
    members = dict(vars(module))
    missing = [name for name in REQUIRED if name not in members]
    if missing:
        raise TypeError(
            f"dimension {module!r} lacks {', '.join(missing)} "
            "(see vocalgrad.dimensions.base.Dimension)"
        )
    spec = members["SPEC"]
    if not isinstance(spec, DimensionSpec):
        raise TypeError(
            f"dimension {module!r}: SPEC must be a DimensionSpec, not {type(spec).__name__}"
        )
    declared = {name: members[name] for name in (*REQUIRED, *OPTIONAL) if name in members}
    warp = [name for name in ("output_time", "source_time") if name in declared]
    if spec.warps_time != bool(warp) or len(warp) == 1:
        raise TypeError(
            f"dimension {spec.name!r}: SPEC.warps_time={spec.warps_time} needs both "
            "output_time and source_time declared, or neither"
        )
    return Bound(module=module, **declared)
