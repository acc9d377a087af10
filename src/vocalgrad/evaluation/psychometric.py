"""Psychometric functions: how much change a listener needs, in the dimension's own units.

Accuracy at three fixed tiers cannot say *how much* change a listener needs to hear. A
two-alternative psychometric function can:

    P(correct | m) = 0.5 + (0.5 - lapse) * F((s * log m - alpha) / beta)

with F the normal CDF (or the Gumbel CDF, i.e. a Weibull in m), guess rate 0.5 (increase vs
decrease), a lapse rate in [0, 0.06] for attention slips, and `s` the dimension's polarity:
+1 when a larger magnitude is a larger change (semitones, dB...), -1 when it is a smaller one
(low-pass cutoff in Hz, bit depth). Fitting on log magnitude makes the threshold a ratio,
which is how sensory thresholds behave (Weber). The fit is by maximum likelihood on the
binomial counts per magnitude; the 75%-correct threshold is reported in physical units with a
95% CI from a bootstrap that resamples whole sources (the clips of one source share a voice
and a sentence, so they are not independent). With fewer sources the CI follows the rule of
`vocalgrad.stats.ci_method_for` (`ci_method` says which): a delete-one-source
jackknife t-interval on the log-magnitude threshold, and none from a single source.

A listener that never leaves chance (a likelihood-ratio test against the flat 0.5 model is
not significant at the 1% level) or whose fitted threshold lies beyond the strongest tested change
gets "no threshold within range", never a number.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import optimize, special, stats
from threadpoolctl import threadpool_limits

from vocalgrad import dimensions
from vocalgrad.records import LABELS
from vocalgrad.stats import (
    BOOTSTRAP,
    JACKKNIFE,
    NO_CI,
    ci_method_for,
    jackknife_t_ci,
    leave_one_out_weights,
)
from vocalgrad.stimuli.plan import change_size

GUESS = 0.5
LAPSE_MAX = 0.06
TARGET = 0.75


class _Link:
    """A sigmoid F with its density and inverse, on scipy.special ufuncs (scipy.stats' frozen
    distributions cost ~25 us per call, which dominates thousands of bootstrap refits)."""

    def __init__(self, cdf, pdf, ppf) -> None:
        self.cdf, self.pdf, self.ppf = cdf, pdf, ppf


FUNCTIONS = {
    "normal": _Link(
        special.ndtr, lambda z: np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi), special.ndtri
    ),
    # Gumbel (minimum) CDF on log magnitude = Weibull CDF on magnitude
    "weibull": _Link(
        lambda z: -np.expm1(-np.exp(z)),
        lambda z: np.exp(z - np.exp(z)),
        lambda q: np.log(-np.log1p(-q)),
    ),
}
MIN_LEVELS = 3
MIN_TRIALS = 12
ALPHA_LEVEL = 0.01  # LRT against chance; strict, as a report fits many listener x category pairs
MAX_BOOT = 2000

# Status values of a fit.
OK, BELOW, NONE, INSUFFICIENT = "ok", "below_range", "no_threshold", "insufficient_data"


def polarity(category: str, sr: int = 16000) -> int:
    """+1 if a larger magnitude is a larger change, -1 if smaller (cutoff Hz, bits)."""
    dim = dimensions.get(category)
    lo, hi = dim.SPEC.psychometric_range
    grows = change_size(category, *dim.endpoints(hi, sr)) > change_size(
        category, *dim.endpoints(lo, sr)
    )
    return 1 if grows else -1


@dataclass(frozen=True)
class Level:
    """Observed accuracy at one magnitude (Wilson 95% interval, trials treated as independent)."""

    magnitude: float
    n: int
    k: int
    accuracy: float
    lo: float
    hi: float


@dataclass
class PsychometricFit:
    """One listener x category fit. `threshold` is None unless `status == "ok"`."""

    listener: str
    category: str
    unit: str
    status: str
    threshold: float | None
    ci: tuple[float | None, float | None]
    alpha: float  # location on s * ln(magnitude)
    beta: float  # spread on s * ln(magnitude)
    lapse: float
    polarity: int
    function: str
    tested: tuple[float, float]  # weakest and strongest magnitude tested
    n: int
    n_sources: int
    p_value: float  # likelihood-ratio test against P = 0.5 everywhere
    levels: list[Level] = field(default_factory=list)
    n_boot: int = 0
    target: float = TARGET
    ci_method: str = NO_CI

    def predict(self, magnitudes: Sequence[float] | np.ndarray) -> np.ndarray:
        """P(correct) at the given magnitudes under the fitted parameters."""
        x = self.polarity * np.log(np.asarray(magnitudes, dtype=float))
        return _p(x, self.alpha, self.beta, self.lapse, FUNCTIONS[self.function])

    def threshold_at(self, p: float) -> float:
        """Magnitude at which the fitted curve reaches `p` (nan if it never does)."""
        x = _x_at(p, self.alpha, self.beta, self.lapse, FUNCTIONS[self.function])
        return float(np.exp(self.polarity * x)) if np.isfinite(x) else float("nan")

    def label(self, digits: int = 3) -> str:
        """Human-readable threshold: a number with CI, a bound, or the reason there is none."""
        weak = min(self.tested, key=lambda m: self.polarity * math.log(m))
        if self.status == OK and self.threshold is not None:
            lo, hi = self.ci
            ci = (
                f" [{_g(lo, digits)}, {_g(hi, digits)}]"
                if lo is not None and hi is not None
                else ""
            )
            return f"{_g(self.threshold, digits)} {self.unit}{ci}"
        if self.status == BELOW:
            sign = "<" if self.polarity > 0 else ">"
            return f"{sign} {_g(weak, digits)} {self.unit} (below tested range)"
        if self.status == NONE:
            return "no threshold within range"
        return "insufficient data"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["label"] = self.label()
        return d


def _g(value: float | None, digits: int = 3) -> str:
    """`digits` significant digits, never in e-notation (2460 Hz, not 2.46e+03 Hz)."""
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    rounded = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{rounded:.0f}" if abs(rounded) >= 10 ** (digits - 1) else f"{rounded:g}"


format_magnitude = _g


def _p(x, alpha, beta, lapse, dist) -> np.ndarray:
    return GUESS + (1 - GUESS - lapse) * dist.cdf((x - alpha) / beta)


def _x_at(p: float, alpha, beta, lapse, dist):
    """Inverse of `_p` in x; nan where the curve never reaches p (lapse too large)."""
    q = (np.asarray(p) - GUESS) / (1 - GUESS - np.asarray(lapse))
    with np.errstate(invalid="ignore"):
        z = np.where((q > 0) & (q < 1), dist.ppf(np.clip(q, 1e-12, 1 - 1e-12)), np.nan)
    return alpha + beta * z


class _Problem:
    """Binomial counts per level on the x axis, with the bounds and start grid of the fit."""

    def __init__(self, x: np.ndarray, dist, lapse: float | None) -> None:
        self.x, self.dist, self.fixed_lapse = x, dist, lapse
        lo, hi = float(x.min()), float(x.max())
        span = max(hi - lo, 1e-3)
        self.lo, self.hi, self.span = lo, hi, span
        self.bounds = [
            (lo - span, hi + span),
            (math.log(span / 200), math.log(span * 4)),
            (0.0, LAPSE_MAX),
        ]
        a = np.linspace(lo - 0.25 * span, hi + 0.5 * span, 25)
        b = np.log(span * np.array([0.02, 0.08, 0.25, 0.8]))
        lam = np.array([0.0, 0.03]) if lapse is None else np.array([lapse])
        self.grid = np.array(np.meshgrid(a, b, lam, indexing="ij")).reshape(3, -1).T

    def nll_grid(self, k: np.ndarray, n: np.ndarray) -> np.ndarray:
        """Negative log-likelihood of each start-grid point for each count row (B, G)."""
        g = self.grid
        p = _p(self.x[None, :], g[:, :1], np.exp(g[:, 1:2]), g[:, 2:3], self.dist)
        p = np.clip(p, 1e-9, 1 - 1e-9)
        return -(np.atleast_2d(k) @ np.log(p).T + np.atleast_2d(n - k) @ np.log1p(-p).T)

    def nll(self, theta: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[float, np.ndarray]:
        """Negative log-likelihood and its gradient in (alpha, log beta, lapse)."""
        alpha, logb = theta[0], theta[1]
        lapse = self.fixed_lapse if self.fixed_lapse is not None else theta[2]
        beta = math.exp(logb)
        z = (self.x - alpha) / beta
        cdf, pdf = self.dist.cdf(z), self.dist.pdf(z)
        p = np.clip(GUESS + (1 - GUESS - lapse) * cdf, 1e-9, 1 - 1e-9)
        value = -float(np.sum(k * np.log(p) + (n - k) * np.log1p(-p)))
        dl_dp = -(k / p - (n - k) / (1 - p))
        amp = (1 - GUESS - lapse) * pdf
        grad = np.array(
            [np.sum(dl_dp * amp * (-1 / beta)), np.sum(dl_dp * amp * (-z)), np.sum(dl_dp * -cdf)]
        )
        return value, grad if self.fixed_lapse is None else grad[:2]

    def fit(self, k: np.ndarray, n: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, float]:
        """MLE (alpha, beta, lapse) from a start point; returns params and NLL."""
        free = 3 if self.fixed_lapse is None else 2
        res = optimize.minimize(
            self.nll,
            start[:free],
            args=(k, n),
            jac=True,
            method="L-BFGS-B",
            bounds=self.bounds[:free],
        )
        theta = res.x
        lapse = float(theta[2]) if free == 3 else float(self.fixed_lapse)
        return np.array([theta[0], math.exp(theta[1]), lapse]), float(res.fun)


def fit_psychometric(
    magnitudes: Sequence[float] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    category: str,
    clusters: Sequence[str] | None = None,
    *,
    listener: str = "",
    function: str = "normal",
    lapse: float | None = None,
    n_boot: int = 400,
    seed: int = 0,
    bounds: tuple[float, float] | None = None,
) -> PsychometricFit:
    """Fit one listener x category from per-trial magnitudes and correctness.

    `clusters` (e.g. source ids) are the bootstrap's resampling unit; None resamples trials.
    `lapse=None` fits it in [0, LAPSE_MAX]; a number fixes it. `n_boot` is capped at MAX_BOOT.
    `bounds` (magnitudes) is where a threshold counts as "within range"; default: the weakest
    and strongest magnitudes tested (an adaptive run passes the range it was allowed to use).
    """
    if function not in FUNCTIONS:
        raise ValueError(f"function {function!r}: choose from {', '.join(FUNCTIONS)}")
    # One BLAS thread: L-BFGS-B's tiny dense updates run far slower on a busy thread pool.
    with threadpool_limits(1):
        return _fit(
            magnitudes, correct, category, clusters, listener, function, lapse, n_boot, seed, bounds
        )


def _fit(
    magnitudes, correct, category, clusters, listener, function, lapse, n_boot, seed, bounds
) -> PsychometricFit:
    m = np.asarray(magnitudes, dtype=float)
    c = np.asarray(correct, dtype=float)
    if m.shape != c.shape:
        raise ValueError("magnitudes and correct must have the same length")
    keep = np.isfinite(m) & (m > 0)
    m, c = m[keep], c[keep]
    cl = np.asarray(clusters, dtype=object)[keep] if clusters is not None else np.arange(len(m))
    spec = dimensions.get(category).SPEC
    sgn = polarity(category)
    dist = FUNCTIONS[function]
    values, level_idx = np.unique(m, return_inverse=True)
    _, cluster_idx = np.unique(cl.astype(str), return_inverse=True)
    n_clusters = int(cluster_idx.max()) + 1 if len(m) else 0
    ck = np.zeros((max(n_clusters, 1), len(values)))
    cn = np.zeros_like(ck)
    np.add.at(ck, (cluster_idx, level_idx), c)
    np.add.at(cn, (cluster_idx, level_idx), 1.0)
    k, n = ck.sum(0), cn.sum(0)
    levels = [_level(v, int(nn), int(kk)) for v, nn, kk in zip(values, n, k, strict=True)]
    if bounds is not None:
        tested = (float(min(bounds)), float(max(bounds)))
    elif len(values):
        tested = (float(values.min()), float(values.max()))
    else:
        tested = spec.psychometric_range
    base = dict(
        listener=listener,
        category=category,
        unit=spec.unit,
        polarity=sgn,
        function=function,
        tested=tested,
        n=int(len(m)),
        n_sources=n_clusters,
        levels=levels,
    )
    nan = float("nan")
    if len(values) < MIN_LEVELS or len(m) < MIN_TRIALS:
        return PsychometricFit(
            status=INSUFFICIENT,
            threshold=None,
            ci=(None, None),
            alpha=nan,
            beta=nan,
            lapse=nan,
            p_value=nan,
            **base,
        )

    x = sgn * np.log(values)
    prob = _Problem(x, dist, lapse)
    theta, nll = prob.fit(k, n, prob.grid[np.argmin(prob.nll_grid(k, n)[0])])
    flat = -float(np.sum(n)) * math.log(GUESS)
    df = 3 if lapse is None else 2
    p_value = float(stats.chi2.sf(max(2 * (flat - nll), 0.0), df))
    x75 = float(_x_at(TARGET, *theta, dist))
    x_lo, x_hi = sorted(sgn * math.log(b) for b in tested)
    if p_value >= ALPHA_LEVEL or not np.isfinite(x75) or x75 > x_hi:
        status = NONE
    elif x75 < x_lo:
        status = BELOW
    else:
        status = OK
    threshold, ci, used, method = None, (None, None), 0, NO_CI
    if status == OK:
        threshold = float(np.exp(sgn * x75))
        method = ci_method_for(n_clusters) if n_boot > 0 else NO_CI
        xs: tuple[float, float] | None = None
        if method == BOOTSTRAP:
            used = min(n_boot, MAX_BOOT)
            rng = np.random.default_rng([seed, zlib.crc32(f"{listener}|{category}".encode())])
            idx = rng.integers(0, n_clusters, size=(used, n_clusters))
            w = np.stack([np.bincount(row, minlength=n_clusters) for row in idx]).astype(float)
            lo, hi = np.percentile(_refit(prob, w @ ck, w @ cn), [2.5, 97.5])
            xs = (float(lo), float(hi))
        elif method == JACKKNIFE:
            w = leave_one_out_weights(n_clusters)
            lo, hi = jackknife_t_ci(np.asarray(x75), _refit(prob, w @ ck, w @ cn))
            if np.isfinite(lo):
                xs = (float(lo), float(hi))
            else:
                method = NO_CI
        if xs is not None:
            ci = tuple(sorted((float(np.exp(sgn * xs[0])), float(np.exp(sgn * xs[1])))))
    return PsychometricFit(
        status=status,
        threshold=threshold,
        ci=ci,
        alpha=float(theta[0]),
        beta=float(theta[1]),
        lapse=float(theta[2]),
        p_value=p_value,
        n_boot=used,
        ci_method=method,
        **base,
    )


def _refit(prob: _Problem, kb: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """x of the 75% point refitted on each row of cluster-weighted counts (resamples or
    leave-one-out); starts come from one vectorised grid evaluation over all rows, so each
    refit is a short polish."""
    starts = prob.grid[np.argmin(prob.nll_grid(kb, nb), axis=1)]
    out = np.empty(len(kb))
    lo, hi = prob.bounds[0]
    for b in range(len(kb)):
        theta, _ = prob.fit(kb[b], nb[b], starts[b])
        x = _x_at(TARGET, *theta, prob.dist)
        out[b] = np.clip(x, lo, hi) if np.isfinite(x) else hi
    return out


def _level(magnitude: float, n: int, k: int) -> Level:
    ci = stats.binomtest(k, n).proportion_ci(method="wilson") if n else None
    return Level(
        float(magnitude),
        n,
        k,
        k / n if n else float("nan"),
        float(ci.low) if ci else float("nan"),
        float(ci.high) if ci else float("nan"),
    )


def trial_rows(rows: Iterable[Mapping]) -> list[Mapping]:
    """Rows a fit can use: changing clips, no control, no error, a magnitude and a verdict."""
    return [
        r
        for r in rows
        if r.get("control", "none") == "none"
        and r.get("error") is None
        and r.get("direction") in LABELS
        and r.get("magnitude") is not None
        and r.get("correct") is not None
        and r.get("category") in dimensions.REGISTRY
    ]


def fit_rows(
    rows: Iterable[Mapping],
    *,
    function: str = "normal",
    lapse: float | None = None,
    n_boot: int = 400,
    seed: int = 0,
    cluster: str = "source_id",
    min_levels: int = MIN_LEVELS,
) -> list[PsychometricFit]:
    """One fit per (listener, category) of result rows (results.jsonl), sorted by both.

    Pairs with fewer than `min_levels` distinct magnitudes are skipped (a tiered run has 3).
    """
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in trial_rows(rows):
        groups.setdefault((str(r.get("listener")), r["category"]), []).append(r)
    fits = []
    for (listener, category), members in sorted(groups.items()):
        if len({float(r["magnitude"]) for r in members}) < min_levels:
            continue
        fits.append(
            fit_psychometric(
                [float(r["magnitude"]) for r in members],
                [bool(r["correct"]) for r in members],
                category,
                [_cluster(r, cluster, i) for i, r in enumerate(members)],
                listener=listener,
                function=function,
                lapse=lapse,
                n_boot=n_boot,
                seed=seed,
            )
        )
    return fits


def _cluster(row: Mapping, key: str, i: int) -> str:
    """The row's cluster; a row without one is its own cluster."""
    value = row.get(key)
    return f"row:{i}" if value is None else f"value:{value}"
