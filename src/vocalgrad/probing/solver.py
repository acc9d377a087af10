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
    rows = [int(np.asarray(t, bool).sum()) for t in masks]
    # rotate whenever a task has fewer training rows than features (the span is smaller)
    few = d <= min(min(rows), max_rank)
    # Gram columns only for rows some task trains on (every other row is only projected)
    union = torch.as_tensor(np.any(np.stack([np.asarray(t, bool) for t in masks]), 0))
    cols = torch.nonzero(union).squeeze(1)
    big = not few and n <= GRAM_MAX_ROWS
    gram = xz @ xz[cols].T if big else None  # n x |union|
    pos = torch.full((n,), -1, dtype=torch.long)
    pos[cols] = torch.arange(len(cols))
    out = []
    for mask, count in zip(masks, rows, strict=True):
        m = torch.as_tensor(mask)
        if few or (d <= min(count, max_rank)):  # few features: as they are (standardised)
            out.append(Reduced(xz, d))
            continue
        if gram is None:  # many rows and many features: top principal directions only
            _, _, v = torch.pca_lowrank(xz[m], q=max_rank, center=False, niter=4)
            out.append(Reduced(xz @ v, v.shape[1]))
            continue
        sel = pos[torch.nonzero(m).squeeze(1)]
        lam, u = torch.linalg.eigh(gram[m][:, sel])
        lam, u = lam.flip(0), u.flip(1)
        keep = int(min(max_rank, int((lam > EIG_TOL * lam[0].clamp_min(1e-30)).sum())))
        lam, u = lam[:keep], u[:, :keep]
        out.append(Reduced(gram[:, sel] @ u / lam.sqrt(), keep))
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


def _pack_rows(
    z: torch.Tensor, y: torch.Tensor, m: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep only each problem's weighted rows (the fit never sees the others): z (B x k x r),
    y and m (B x P x k), padded rows carry zero weight."""
    used = (m != 0).any(1)  # B x n
    k = max(int(used.sum(1).max()), 1)
    order = torch.argsort((~used).to(torch.int8), dim=1, stable=True)[:, :k]  # used rows first
    zt = torch.gather(z, 1, order[..., None].expand(-1, -1, z.shape[-1]))
    idx = order[:, None, :].expand(-1, y.shape[1], -1)
    return zt, torch.gather(y, 2, idx), torch.gather(m, 2, idx)


def _cg(
    hvp, g: torch.Tensor, diag: torch.Tensor, rtol: torch.Tensor, max_iter: int
) -> torch.Tensor:
    """Preconditioned conjugate gradients for every problem at once: solve H x = g (rows of
    g, shape N x k) to |residual| <= rtol * |g| per row, Jacobi preconditioner `diag`."""
    x = torch.zeros_like(g)
    res = g.clone()
    pre = res / diag
    d = pre.clone()
    rz = (res * pre).sum(-1)
    goal = (rtol * g.norm(dim=-1)) ** 2
    for _ in range(max_iter):
        active = (res * res).sum(-1) > goal
        if not bool(active.any()):
            break
        hd = hvp(d)
        curv = (d * hd).sum(-1)
        alpha = torch.where(active & (curv > 0), rz / curv.clamp_min(1e-300), torch.zeros_like(rz))
        x = x + alpha[:, None] * d
        res = res - alpha[:, None] * hd
        pre = res / diag
        rz_new = (res * pre).sum(-1)
        beta = torch.where(active, rz_new / rz.clamp_min(1e-300), torch.zeros_like(rz))
        d = pre + beta[:, None] * d
        rz = rz_new
    return x


def logistic_path(
    z: torch.Tensor,
    y: torch.Tensor,
    m: torch.Tensor,
    cs: Sequence[float],
    max_iter: int = 100,
    tol: float = 1e-6,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """L2 logistic regression for every problem and C: z (B x n x r) features, y (B x P x n)
    0/1 label sets sharing z, m (B x P x n) training-row weights. Returns per C (w, b) with
    w (B x P x r), b (B x P), warm-started along `cs` (ascending).

    Truncated Newton: each step solves H s = g by batched preconditioned conjugate gradients
    (Hessian-vector products are two batched matmuls over the training rows, O(n r) per
    problem instead of O(n r^2 + r^3) for a dense Newton step), then halves the step where the
    objective would rise. Stops when every problem's gradient norm is below
    tol * (1 + C * sum(m)) (the objective's scale)."""
    bsz, _, r = z.shape
    p = y.shape[1]
    zt, yt, mt = _pack_rows(z, y, m)
    k = zt.shape[1]
    z1 = torch.cat([zt, zt.new_ones(bsz, k, 1)], -1)  # B x k x (r+1), intercept last
    z1t = z1.transpose(1, 2).contiguous()  # B x (r+1) x k
    z1sq = z1 * z1
    # Hessian-vector products in float32 (memory-bound: half the bytes); gradients and the
    # objective stay float64, so the optimum is float64-exact, the steps merely inexact.
    h1, h1t = z1.float(), z1t.float()
    reg = z.new_ones(r + 1)
    reg[r] = 0.0  # intercept not penalised
    reg32 = reg.float()
    theta = z.new_zeros(bsz, p, r + 1)
    scale_obj = 1.0 + mt.sum(-1)  # B x P

    def logits(th: torch.Tensor) -> torch.Tensor:
        return torch.bmm(th, z1t)  # B x P x k

    def objective(th: torch.Tensor, f: torch.Tensor, c: float) -> torch.Tensor:
        loss = (F.softplus(f) - yt * f) * mt
        return c * loss.sum(-1) + 0.5 * (th * th * reg).sum(-1)

    path = []
    f = logits(theta)
    for c in sorted(cs):
        obj = objective(theta, f, c)
        for _ in range(max_iter):
            prob = torch.sigmoid(f)
            resid = (prob - yt) * mt
            g = c * torch.bmm(resid, z1) + theta * reg  # B x P x (r+1)
            gnorm = g.norm(dim=-1)
            if bool((gnorm <= tol * (1.0 + c * scale_obj)).all()):
                break
            s = c * prob * (1 - prob) * mt  # B x P x k
            diag = torch.bmm(s, z1sq) + reg + 1e-10

            s32 = s.float()

            def hvp(v: torch.Tensor, s32: torch.Tensor = s32) -> torch.Tensor:
                vv = v.reshape(bsz, p, r + 1)
                out = torch.bmm(s32 * torch.bmm(vv, h1t), h1) + vv * reg32
                return (out + 1e-10 * vv).reshape(bsz * p, r + 1)

            # forcing term (superlinear finish), floored where float32 products stop helping
            rtol = gnorm.reshape(-1).sqrt().clamp(1e-3, 0.5)
            g32, diag32 = g.reshape(bsz * p, -1).float(), diag.reshape(bsz * p, -1).float()
            step = _cg(hvp, g32, diag32, rtol.float(), 4 * r + 10)
            step = step.reshape(bsz, p, r + 1).double()
            scale = torch.ones_like(obj)
            fstep = logits(step)
            for _half in range(30):  # halve where the objective would rise
                new_theta = theta - scale[..., None] * step
                new_f = f - scale[..., None] * fstep
                new = objective(new_theta, new_f, c)
                worse = new > obj + 1e-12 * obj.abs().clamp_min(1.0)
                if not bool(worse.any()):
                    break
                scale = torch.where(worse, scale / 2, scale)
            keep = new <= obj
            theta = torch.where(keep[..., None], new_theta, theta)
            f = torch.where(keep[..., None], new_f, f)
            obj = torch.where(keep, new, obj)
        path.append((theta[..., :r].clone(), theta[..., r].clone()))
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
