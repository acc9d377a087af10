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
        sk_pred = []
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (ConvergenceWarning, FutureWarning))
            for x in xs:
                for k, ys in enumerate(y_sets):
                    clf = make_pipeline(
                        StandardScaler(),
                        LogisticRegressionCV(
                            Cs=list(settings.cs), cv=cv, scoring="neg_log_loss", max_iter=1000
                        ),
                    )
                    clf.fit(x[train], ys[train])
                    if k == 0:  # accuracy compared on the true labels
                        sk_pred.append(clf.predict(x[test]))
        sklearn_s = time.perf_counter() - t0
    diffs = []
    for name, pred, lg in zip(feats, sk_pred, logits[:, 0], strict=True):
        a = balanced_accuracy_score(y[test], pred)
        b = balanced_accuracy_score(y[test], (lg[test] > 0).astype(float))
        diffs.append(b - a)
        print(f"  {name:22s} sklearn {a:.3f}  batched {b:.3f}  diff {b - a:+.3f}")
    print(
        f"per-stage sklearn loop: {sklearn_s:.2f} s; batched: {batched_s:.2f} s; "
        f"speed-up {sklearn_s / batched_s:.1f}x"
    )
    print(
        f"balanced accuracy difference (batched - sklearn): mean {np.mean(diffs) * 100:+.2f} "
        f"points, max |diff| {np.max(np.abs(diffs)) * 100:.2f} points"
    )


if __name__ == "__main__":
    main()
