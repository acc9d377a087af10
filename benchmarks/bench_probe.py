"""Batched probe solver vs a per-stage scikit-learn loop on the same features.

Both fit L2 logistic regression per stage with C chosen by the same grouped inner folds on
validation log-loss and refit on the whole training split (LogisticRegressionCV's rule, same
C grid; scikit-learn at its default tolerance, ours 100x stricter in the same scaling, see
ProbeSettings.tol), on features standardised with training statistics, for
the true labels and the shuffled-label control tasks `vocalgrad probe` fits with them (one
per seed, 3 by default). Prints wall time, the speed-up and the test balanced-accuracy
difference per stage.

    python benchmarks/bench_probe.py                  # Whisper-tiny-shaped synthetic features,
                                                      #   192 train items (the default build)
    python benchmarks/bench_probe.py --sources 100    # 400 train items
    python benchmarks/bench_probe.py --controls 0     # the true labels only
    python benchmarks/bench_probe.py --dataset DS --listener whisper:tiny.en --category volume
    python benchmarks/bench_probe.py --exact          # + untimed scikit-learn fits at tol 1e-8:
                                                      #   the accuracy both should have
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from vocalgrad.probing.probes import (
    ProbeSettings,
    inner_splits,
    labels,
    linear_cv,
    outer_splits,
    shuffled,
)


def synthetic(n_sources: int = 48, per_source: int = 8, seed: int = 0) -> tuple[dict, list[dict]]:
    """Whisper tiny.en shapes under segments16 pooling: mel 1280, 5 encoder stages 6144,
    5 answer stages 384; signal strength varies by stage, sources add shared offsets."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "item_id": f"{s}-{k}",
            "source_id": f"s{s}",
            "speaker_id": f"p{s}",
            "direction": "increase" if k % 2 == 0 else "decrease",
            "split": "train" if s < n_sources // 2 else "test",
        }
        for s in range(n_sources)
        for k in range(per_source)
    ]
    y = labels(rows) - 0.5
    src = np.repeat(np.arange(n_sources), per_source)
    shapes = (
        [("mel", 1280)]
        + [(f"encoder.{i}", 6144) for i in range(5)]
        + [(f"decoder.{i}@answer", 384) for i in range(5)]
    )
    feats = {}
    for k, (name, d) in enumerate(shapes):
        direction, offsets = rng.normal(size=d), rng.normal(size=(n_sources, d))
        strength = 0.02 + 0.01 * (k % 5)
        feats[name] = (
            rng.normal(size=(len(rows), d))
            + 0.7 * offsets[src]
            + strength * np.outer(y, direction) * np.sqrt(d) / 8
        ).astype(np.float32)
    return feats, rows


def real(dataset: str, spec: str, category: str) -> tuple[dict, list[dict]]:
    from pathlib import Path

    from vocalgrad.dataset import load_rows
    from vocalgrad.listeners import load_listener
    from vocalgrad.probing.features import extract, feature_key
    from vocalgrad.probing.pipeline import _items, dataset_sha
    from vocalgrad.sources import default_cache_dir

    rows = load_rows(dataset)
    items = _items(rows, category)
    listener = load_listener(spec)
    key = feature_key(
        dataset_sha(Path(dataset), rows),
        listener,
        category,
        "default",
        "segments16",
        [r["item_id"] for r in items],
    )
    feats = extract(items, listener, default_cache_dir() / "features" / key, category=category)
    return {k: np.asarray(v, np.float32) for k, v in feats.stages.items()}, items


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset")
    ap.add_argument("--listener", default="whisper:tiny.en")
    ap.add_argument("--category", default="volume")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--sources", type=int, default=48, help="synthetic: source clips (8 items each, half train)"
    )
    ap.add_argument(
        "--controls",
        type=int,
        default=ProbeSettings().seeds,
        help="shuffled-label control label sets fitted too (default: as many as `probe` fits)",
    )
    ap.add_argument(
        "--exact",
        action="store_true",
        help="also compare both with scikit-learn at tol=1e-8 (untimed; slow on real features)",
    )
    args = ap.parse_args()
    feats, rows = (
        real(args.dataset, args.listener, args.category)
        if args.dataset
        else synthetic(n_sources=args.sources)
    )
    settings = ProbeSettings()
    train, test = outer_splits(rows, 5)[0][0]
    inner = inner_splits(rows, train, settings.inner_folds)
    y = labels(rows)
    sources = np.array([r["source_id"] for r in rows])
    y_sets = np.stack([y, *[shuffled(y, train, s, sources) for s in range(args.controls)]])
    xs = list(feats.values())
    print(
        f"{len(xs)} stages, dims {sorted({x.shape[1] for x in xs})}, {int(train.sum())} train / "
        f"{int(test.sum())} test items, {len(inner)} inner folds, {len(settings.cs)} C values, "
        f"{len(y_sets)} label set(s), {args.threads} thread(s)"
    )
    torch.set_num_threads(args.threads)
    with threadpool_limits(args.threads):
        # one-time library start-up (torch kernels, thread pools) is not what is compared
        linear_cv([x[:, :8] for x in xs[:2]], y_sets[:1], train, inner, settings)
        t0 = time.perf_counter()
        logits, _ = linear_cv(xs, y_sets, train, inner, settings)
        batched_s = time.perf_counter() - t0
        cv = [(np.flatnonzero(a[train]), np.flatnonzero(b[train])) for a, b in inner]
        t0 = time.perf_counter()
        sk_pred = sklearn_loop(xs, y_sets, train, test, cv, settings.cs, 1e-4, 1000)
        sklearn_s = time.perf_counter() - t0
        exact = (
            sklearn_loop(xs, y_sets[:1], train, test, cv, settings.cs, 1e-8, 100000)
            if args.exact
            else None
        )
    ours = [(lg[test] > 0).astype(float) for lg in logits[:, 0]]
    diffs = report(list(feats), y[test], sk_pred, ours, "sklearn", "batched")
    print(
        f"per-stage sklearn loop: {sklearn_s:.2f} s; batched: {batched_s:.2f} s; "
        f"speed-up {sklearn_s / batched_s:.1f}x"
    )
    summary("sklearn", diffs)
    if exact is not None:
        print("against scikit-learn at tol=1e-8:")
        summary("exact", report(list(feats), y[test], exact, ours, "exact", "batched"))
        summary(
            "exact, sklearn at its default",
            report(list(feats), y[test], exact, sk_pred, "exact", "sklearn"),
        )


def sklearn_loop(
    xs: list[np.ndarray],
    y_sets: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    cv: list[tuple[np.ndarray, np.ndarray]],
    cs: tuple[float, ...],
    tol: float,
    max_iter: int,
) -> list[np.ndarray]:
    """One LogisticRegressionCV per stage and label set; test predictions for the true labels
    (the first label set) of every stage."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ConvergenceWarning, FutureWarning))
        for x in xs:
            for k, ys in enumerate(y_sets):
                clf = make_pipeline(
                    StandardScaler(),
                    LogisticRegressionCV(
                        Cs=list(cs), cv=cv, scoring="neg_log_loss", max_iter=max_iter, tol=tol
                    ),
                )
                clf.fit(x[train], ys[train])
                if k == 0:
                    out.append(clf.predict(x[test]))
    return out


def report(
    names: list[str],
    y: np.ndarray,
    reference: list[np.ndarray],
    other: list[np.ndarray],
    ref_name: str,
    other_name: str,
) -> list[float]:
    diffs = []
    for name, ref, pred in zip(names, reference, other, strict=True):
        a, b = balanced_accuracy_score(y, ref), balanced_accuracy_score(y, pred)
        diffs.append(b - a)
        print(f"  {name:22s} {ref_name} {a:.3f}  {other_name} {b:.3f}  diff {b - a:+.3f}")
    return diffs


def summary(what: str, diffs: list[float]) -> None:
    print(
        f"balanced accuracy difference (vs {what}): mean {np.mean(diffs) * 100:+.2f} "
        f"points, max |diff| {np.max(np.abs(diffs)) * 100:.2f} points"
    )


if __name__ == "__main__":
    main()
