"""Batched probe solvers: every stage, fold and label set of a category in one tensor program.

Why batched: probing is thousands of small fits (stages x folds x C grid x controls x seeds);
one scikit-learn fit at a time spends its time in Python and in d-dimensional solves. Here
  * features are standardised once per outer training set (shared by inner folds and C),
  * each fold's problem is rotated onto its training rows' span (kernel trick: exact for L2
    logistic regression, since the optimum lies in that span), so a d = 6144 stage with 128
    training rows is a 128-dimensional problem,
  * all problems are zero-padded to one size and solved together by damped Newton steps,
    walking the C grid from strong to weak regularisation with warm starts.
The objective is scikit-learn's: C * sum(log-loss) + |w|^2 / 2, intercept not penalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

DEFAULT_CS = tuple(float(c) for c in np.logspace(-4, 2, 7))
GRAM_MAX_ROWS = 6000  # above this an n x n Gram matrix is too big: randomized PCA instead
EIG_TOL = 1e-9  # relative eigenvalue floor: directions below it carry no training signal


@dataclass
class Reduced:
    """Training-span coordinates of every row for one (stage, task): n x r, r <= max_rank."""

    z: torch.Tensor
    rank: int


def standardise(x: np.ndarray, train: np.ndarray) -> torch.Tensor:
    """z-score with training-row statistics (float64); constant columns become zero."""
    t = torch.as_tensor(np.asarray(x, np.float32), dtype=torch.float64)
    mu = t[torch.as_tensor(train)].mean(0)
    sd = t[torch.as_tensor(train)].std(0, unbiased=False)
    return (t - mu) / torch.where(sd > 1e-12, sd, torch.ones_like(sd))


def reduce_tasks(xz: torch.Tensor, masks: Sequence[np.ndarray], max_rank: int) -> list[Reduced]:
    """Per task (a boolean training-row mask) the coordinates of all rows in the span of its
    training rows, largest principal directions first; exact when the span fits max_rank."""
    n, d = xz.shape
    few = d <= min(n, max_rank)
    gram = xz @ xz.T if not few and n <= GRAM_MAX_ROWS else None
    out = []
    for mask in masks:
        m = torch.as_tensor(mask)
        if few:  # few features: use them as they are (already standardised)
            out.append(Reduced(xz, d))
            continue
        if gram is None:  # many rows and many features: top principal directions only
            _, _, v = torch.pca_lowrank(xz[m], q=max_rank, center=False, niter=4)
            out.append(Reduced(xz @ v, v.shape[1]))
            continue
        lam, u = torch.linalg.eigh(gram[m][:, m])
        lam, u = lam.flip(0), u.flip(1)
        keep = int(min(max_rank, int((lam > EIG_TOL * lam[0].clamp_min(1e-30)).sum())))
        lam, u = lam[:keep], u[:, :keep]
        out.append(Reduced(gram[:, m] @ u / lam.sqrt(), keep))
    return out


def pad(reduced: Sequence[Reduced]) -> torch.Tensor:
    """Stack (n x r_i) problems into (B x n x r_max); zero columns get zero weight under L2."""
    r = max(p.rank for p in reduced)
    return torch.stack([F.pad(p.z, (0, r - p.rank)) for p in reduced])


def _objective(
    z: torch.Tensor, y: torch.Tensor, m: torch.Tensor, w: torch.Tensor, b: torch.Tensor, c: float
) -> torch.Tensor:
    f = torch.einsum("bnr,bpr->bpn", z, w) + b[..., None]
    loss = (F.softplus(f) - y * f) * m
    return c * loss.sum(-1) + 0.5 * (w * w).sum(-1)


def logistic_path(
    z: torch.Tensor,
    y: torch.Tensor,
    m: torch.Tensor,
    cs: Sequence[float],
    max_iter: int = 50,
    tol: float = 1e-6,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """L2 logistic regression for every problem and C: z (B x n x r) features, y (B x P x n)
    0/1 label sets sharing z, m (B x P x n) training-row weights. Returns per C (w, b) with
    w (B x P x r), b (B x P): Newton steps with step halving, warm-started along `cs`."""
    bsz, _, r = z.shape
    p = y.shape[1]
    w = z.new_zeros(bsz, p, r)
    b = z.new_zeros(bsz, p)
    eye = torch.eye(r + 1, dtype=z.dtype)
    eye[r, r] = 1e-10
    z1 = torch.cat([z, z.new_ones(bsz, z.shape[1], 1)], -1)
    path = []
    for c in sorted(cs):
        obj = _objective(z, y, m, w, b, c)
        for _ in range(max_iter):
            f = torch.einsum("bnr,bpr->bpn", z, w) + b[..., None]
            prob = torch.sigmoid(f)
            resid = (prob - y) * m
            s = prob * (1 - prob) * m
            g = torch.cat(
                [c * torch.einsum("bnr,bpn->bpr", z, resid) + w, c * resid.sum(-1, keepdim=True)],
                -1,
            )
            # Hessian of [w, b] as one batched Gram product of sqrt(s)-weighted [z, 1] (BLAS)
            zs = (z1[:, None] * s.sqrt()[..., None]).reshape(bsz * p, -1, r + 1)
            h = c * torch.bmm(zs.transpose(1, 2), zs).reshape(bsz, p, r + 1, r + 1) + eye
            chol, _ = torch.linalg.cholesky_ex(h)
            step = torch.cholesky_solve(g.unsqueeze(-1), chol).squeeze(-1)
            scale = torch.ones_like(obj)
            for _half in range(20):  # damped Newton: halve where the objective would rise
                nw, nb = w - scale[..., None] * step[..., :r], b - scale * step[..., r]
                new = _objective(z, y, m, nw, nb, c)
                worse = new > obj + 1e-12 * obj.abs().clamp_min(1.0)
                if not bool(worse.any()):
                    break
                scale = torch.where(worse, scale / 2, scale)
            w, b, obj = nw, nb, torch.minimum(new, obj)
            if float((scale[..., None] * step).abs().max()) < tol:
                break
        path.append((w.clone(), b.clone()))
    return path


def decision(z: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Logits of every row under every problem's weights: (B x P x n)."""
    return torch.einsum("bnr,bpr->bpn", z, w) + b[..., None]


def log_loss(f: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Mean log-loss over the rows with m = 1 (as scikit-learn's neg_log_loss, negated)."""
    loss = (F.softplus(f) - y * f) * m
    return loss.sum(-1) / m.sum(-1).clamp_min(1)


def mlp_fit(
    z: torch.Tensor,
    y: torch.Tensor,
    m: torch.Tensor,
    seeds: Sequence[int],
    *,
    hidden: int = 64,
    steps: int = 300,
    lr: float = 1e-2,
    weight_decay: float = 1e-3,
) -> torch.Tensor:
    """One-hidden-layer ReLU MLPs, all problems at once (full-batch Adam, float32).

    z (B x n x r) inputs, y / m (B x P x n) labels and training weights, one init seed per
    label set (P = len(seeds)). Returns logits for every row: (B x P x n).
    """
    bsz, n, r = z.shape
    p = y.shape[1]
    x = z.float()
    scale = (x.pow(2).sum(-1).mean(-1) / max(r, 1)).clamp_min(1e-12).sqrt()
    x = x / scale[:, None, None]  # unit mean column variance per problem
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    w1 = torch.stack([torch.randn(bsz, r, hidden, generator=g) for g in gens], 1) / np.sqrt(r)
    w2 = torch.stack([torch.randn(bsz, hidden, generator=g) for g in gens], 1) / np.sqrt(hidden)
    b1 = torch.zeros(bsz, p, hidden)
    b2 = torch.zeros(bsz, p)
    params = [t.requires_grad_() for t in (w1, b1, w2, b2)]
    opt = torch.optim.Adam(params, lr=lr)
    yf, mf = y.float(), m.float()
    count = mf.sum(-1).clamp_min(1)

    def forward() -> torch.Tensor:
        hid = torch.relu(torch.einsum("bnr,bprh->bpnh", x, w1) + b1[:, :, None])
        return torch.einsum("bpnh,bph->bpn", hid, w2) + b2[..., None]

    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            f = forward()
            loss = ((F.softplus(f) - yf * f) * mf).sum(-1) / count
            reg = weight_decay * ((w1 * w1).sum((-1, -2)) + (w2 * w2).sum(-1))
            (loss + reg).sum().backward()
            opt.step()
    with torch.no_grad():
        return forward().double()
