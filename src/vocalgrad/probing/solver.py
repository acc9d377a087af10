"""Batched probe solvers: every stage, fold and label set of a category in one tensor program.

Why batched: probing is thousands of small fits (stages x folds x C grid x controls x seeds);
one scikit-learn fit at a time spends its time in Python and in d-dimensional solves. Here
  * features are standardised once per outer training set (shared by inner folds and C),
  * each fold's problem is rotated onto its training rows' span (kernel trick: exact for L2
    logistic regression, since the optimum lies in that span), so a d = 6144 stage with 128
    training rows is a 128-dimensional problem, and in those whitened coordinates a diagonal
    preconditioner is nearly the Hessian's inverse,
  * all problems are zero-padded to one size and solved together by truncated Newton steps
    (conjugate gradients on batched Hessian-vector products, so a step costs O(n r), not
    O(r^3)), walking the C grid from strong to weak regularisation with warm starts, each
    (problem, label set) stopping at the last C it needs,
  * weights map back to feature space for the rows no fit trains on (test rows never enter
    the Gram matrix).
The objective is scikit-learn's: C * sum(log-loss) + |w|^2 / 2, intercept not penalised, and
so is the scaling of the stopping rule (`tol` on the gradient of that objective / (C * n)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

DEFAULT_CS = tuple(float(c) for c in np.logspace(-4, 2, 7))
GRAM_MAX_ROWS = 6000  # above this an n x n Gram matrix is too big: randomized PCA instead
EIG_TOL = 1e-6  # relative eigenvalue floor (float32 Gram noise is below it; directions this
# weak carry no training signal under the L2 penalty)


@dataclass
class Reduced:
    """Training-span coordinates of every row for one (stage, task): z is n x rank.

    `basis` maps weights back to the standardised features: a d x rank matrix of principal
    directions, or (the Gram path) k x rank coefficients on the task's training rows `rows`."""

    z: torch.Tensor
    rank: int
    basis: torch.Tensor
    rows: torch.Tensor | None = None

    def feature_weights(self, xz: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """Weights (P x rank) -> weights on the standardised features of xz (P x d)."""
        w = w[:, : self.rank].to(self.z.dtype)
        if self.rows is None:
            return w @ self.basis.T
        return ((w @ self.basis.T).float() @ xz[self.rows]).double()


def standardise(x: np.ndarray, train: np.ndarray) -> torch.Tensor:
    """z-score with training-row statistics (float32: the features are float32 already and
    the Gram products below are bandwidth-bound); constant columns become zero."""
    t = torch.as_tensor(np.asarray(x, np.float32))
    rows = t[torch.as_tensor(np.flatnonzero(train))]  # (integer indexing: faster than a mask)
    mu = rows.mean(0)
    sd = rows.sub_(mu).square_().mean(0).sqrt_()
    inv = torch.where(sd > 1e-6 * mu.abs().clamp_min(1e-6), 1.0 / sd, torch.zeros_like(sd))
    return (t - mu).mul_(inv)


def reduce_tasks(xz: torch.Tensor, masks: Sequence[np.ndarray], max_rank: int) -> list[Reduced]:
    """Per task (a boolean training-row mask) the coordinates of all rows in the span of its
    training rows, largest principal directions first; exact when the span fits max_rank.

    Coordinates are principal axes (Z^T Z diagonal on the training rows), which is what makes
    the solver's diagonal preconditioner nearly exact: tasks with fewer rows than features get
    their own rows' Gram eigenbasis, the others share the features' covariance eigenbasis
    over all training rows (a rotation, so exact for every task)."""
    n, d = xz.shape
    rows = [int(np.asarray(t, bool).sum()) for t in masks]
    # a task with at least as many rows as features uses the covariance rotation; the others
    # the span of their rows: the Gram matrix, unless there are too many rows for it
    few = [d <= min(count, max_rank) for count in rows]
    # Gram columns only for rows some task trains on (every other row is only projected)
    union = torch.as_tensor(np.any(np.stack([np.asarray(t, bool) for t in masks]), 0))
    cols = torch.nonzero(union).squeeze(1)
    big = not all(few) and n <= GRAM_MAX_ROWS
    # float32 products (relative error ~1e-7 * sqrt(d)), float64 from here on
    gram = (xz @ xz[cols].T).double() if big else None  # n x |union|
    pos = torch.full((n,), -1, dtype=torch.long)
    pos[cols] = torch.arange(len(cols))
    out = []
    axes = None  # the covariance rotation, made for the first task with few features
    for mask, few_features in zip(masks, few, strict=True):
        m = torch.as_tensor(mask)
        if few_features:  # rotated onto principal axes
            axes = _principal_axes(xz, union) if axes is None else axes
            out.append(axes)
            continue
        if gram is None:  # many rows and many features: top principal directions only
            _, _, v = torch.pca_lowrank(xz[m].double(), q=max_rank, center=False, niter=4)
            out.append(Reduced(xz.double() @ v, v.shape[1], basis=v))
            continue
        sel = pos[torch.nonzero(m).squeeze(1)]
        lam, u = torch.linalg.eigh(gram[m][:, sel])
        lam, u = lam.flip(0), u.flip(1)
        keep = int(min(max_rank, int((lam > EIG_TOL * lam[0].clamp_min(1e-30)).sum())))
        root = lam[:keep].sqrt()
        coef = u[:, :keep] / root
        z = xz.new_empty(n, keep, dtype=torch.float64)
        z[m] = u[:, :keep] * root  # the training rows' own coordinates need no product
        z[~m] = gram[~m][:, sel] @ coef
        out.append(Reduced(z, keep, basis=coef, rows=torch.nonzero(m)[:, 0]))
    return out


def _principal_axes(xz: torch.Tensor, rows: torch.Tensor) -> Reduced:
    """All rows on the covariance eigenvectors of `rows` (zero-variance directions dropped:
    no training row reaches them, so their weights stay zero under L2)."""
    x = xz[torch.nonzero(rows).squeeze(1)].double()
    lam, v = torch.linalg.eigh(x.T @ x)
    lam, v = lam.flip(0), v.flip(1)
    keep = int((lam > EIG_TOL * lam[0].clamp_min(1e-30)).sum())
    v = v[:, :keep]
    return Reduced(xz.double() @ v, keep, basis=v)


def pad(reduced: Sequence[Reduced]) -> torch.Tensor:
    """Stack (n x r_i) problems into (B x n x r_max); zero columns get zero weight under L2."""
    r = max(p.rank for p in reduced)
    return torch.stack([F.pad(p.z, (0, r - p.rank)) for p in reduced])


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
    h: torch.Tensor,
    s: torch.Tensor,
    g: torch.Tensor,
    diag: torch.Tensor,
    rtol: torch.Tensor,
    reg: torch.Tensor,
    max_iter: int,
) -> torch.Tensor:
    """Solve (h^T diag(s) h + diag(reg)) x = g for every problem and label set at once by
    Jacobi-preconditioned conjugate gradients, to |residual| <= rtol * |g| each.

    h (N x k x R) rows, s (N x P x k) row weights, g / diag (N x P x R), rtol (N x P). A
    Hessian-vector product is two batched matmuls; problems whose label sets have all
    converged are dropped from the batch once half of it has (one copy of their rows)."""
    x_all = torch.zeros_like(g)
    idx = torch.arange(g.shape[0])
    x = torch.zeros_like(g)
    res = g.clone()
    pre = res / diag
    d = pre.clone()
    rz = (res * pre).sum(-1)
    goal = (rtol * g.norm(dim=-1)) ** 2
    for _ in range(max_iter):
        active = (res * res).sum(-1) > goal  # N x P
        live = active.any(-1)
        n_live = int(live.sum())
        if n_live == 0:
            break
        if n_live <= len(idx) // 2:  # compact: fewer rows to stream through per product
            x_all[idx] = x
            keep = torch.nonzero(live).squeeze(1)
            idx, h, s, diag, goal, active = (t[keep] for t in (idx, h, s, diag, goal, active))
            x, res, d, rz = (t[keep] for t in (x, res, d, rz))
        hd = torch.bmm(s * torch.bmm(d, h.transpose(1, 2)), h) + d * (reg + 1e-10)
        curv = (d * hd).sum(-1)
        alpha = torch.where(active & (curv > 0), rz / curv.clamp_min(1e-30), torch.zeros_like(rz))
        x = x + alpha[..., None] * d
        res = res - alpha[..., None] * hd
        pre = res / diag
        rz_new = (res * pre).sum(-1)
        beta = torch.where(active, rz_new / rz.clamp_min(1e-30), torch.zeros_like(rz))
        d = pre + beta[..., None] * d
        rz = rz_new
    x_all[idx] = x
    return x_all


def logistic_path(
    z: torch.Tensor,
    y: torch.Tensor,
    m: torch.Tensor,
    cs: Sequence[float],
    *,
    stop: torch.Tensor | None = None,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """L2 logistic regression for every problem and C: z (B x n x r) features, y (B x P x n)
    0/1 label sets sharing z, m (B x P x n) training-row weights. Returns per C (w, b) with
    w (B x P x r), b (B x P), warm-started along `cs` (ascending). With `stop` (B x P indices
    into the ascending `cs`) each label set stops at its own C: the path ends at the largest
    stop and its last entry holds every label set's solution at its stop.

    Truncated Newton: only each problem's training rows are kept; each step solves H s = g by
    batched Jacobi-preconditioned conjugate gradients (a Hessian-vector product is two batched
    float32 matmuls, O(n r) per problem instead of O(n r^2 + r^3) for a dense Newton step;
    gradients and objective stay float64), then halves the step where the objective would
    rise. Converged problems leave the batch. Between C values a predictor step follows the
    path's tangent in log C. A label set has converged when its gradient norm is below
    tol * C * sum(m): scikit-learn's lbfgs rule (its objective is ours / (C * sum(m))), on
    the 2-norm, which bounds the max-norm scikit-learn checks."""
    bsz, _, r = z.shape
    p = y.shape[1]
    zt, yt, mt = _pack_rows(z, y, m)
    k = zt.shape[1]
    z1 = torch.cat([zt, zt.new_ones(bsz, k, 1)], -1)  # B x k x (r+1), intercept last
    z1t = z1.transpose(1, 2)  # B x (r+1) x k (a view: bmm takes transposed operands)
    # Hessian-vector products in float32 (memory-bound: half the bytes); gradients and the
    # objective stay float64, so the optimum is float64-exact, the steps merely inexact.
    h1 = z1.float()
    h1sq = h1 * h1  # for the Jacobi preconditioner
    reg = z.new_ones(r + 1)
    reg[r] = 0.0  # intercept not penalised
    reg32 = reg.float()
    theta = z.new_zeros(bsz, p, r + 1)
    goal = tol * mt.sum(-1).clamp_min(1.0)  # B x P, times C below
    cs = sorted(cs)
    last = len(cs) - 1 if stop is None else int(stop.max())

    def logits(th: torch.Tensor) -> torch.Tensor:
        return torch.bmm(th, z1t)  # B x P x k

    def objective(th: torch.Tensor, f: torch.Tensor, c: float) -> torch.Tensor:
        loss = (F.softplus(f) - yt * f) * mt
        return c * loss.sum(-1) + 0.5 * (th * th * reg).sum(-1)

    path = []
    f = logits(theta)
    prev_c, tangent = None, None
    for j, c in enumerate(cs[: last + 1]):
        on = torch.ones(bsz, p, dtype=torch.bool) if stop is None else stop >= j
        obj = objective(theta, f, c)
        if tangent is not None and prev_c is not None:
            # predictor along the path in log C: d theta / d log C = H^-1 (penalised theta)
            guess = theta + float(np.log(c / prev_c)) * tangent
            fg = logits(guess)
            og = objective(guess, fg, c)
            better = og < obj
            theta = torch.where(better[..., None], guess, theta)
            f = torch.where(better[..., None], fg, f)
            obj = torch.where(better, og, obj)
        g0 = None  # gradient norms at this C's start: the forcing term is relative to them
        for _ in range(max_iter):
            prob = torch.sigmoid(f)
            resid = (prob - yt) * mt
            g = c * torch.bmm(resid, z1) + theta * reg  # B x P x (r+1)
            gnorm = g.norm(dim=-1)
            todo = (gnorm > c * goal) & on  # B x P
            if not bool(todo.any()):
                break
            s32 = (c * prob * (1 - prob) * mt).float()
            diag32 = torch.bmm(s32, h1sq) + reg32 + 1e-10
            # converged label sets get a zero right-hand side: the solver drops them at once
            g32 = torch.where(todo[..., None], g, torch.zeros_like(g)).float()
            # forcing term (superlinear finish), floored where float32 products stop helping
            g0 = gnorm if g0 is None else g0
            rtol = (gnorm / g0.clamp_min(1e-30)).sqrt().clamp(1e-3, 0.1).float()
            step = _cg(h1, s32, g32, diag32, rtol, reg32, 4 * r + 10).double()
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
            if not bool((keep & (new < obj) & todo).any()):
                break  # at the float64 floor: no label set can improve any more
            theta = torch.where(keep[..., None], new_theta, theta)
            f = torch.where(keep[..., None], new_f, f)
            obj = torch.where(keep, new, obj)
        path.append((theta[..., :r].clone(), theta[..., r].clone()))
        prev_c = c
        if j < last:
            prob = torch.sigmoid(f)
            s32 = (c * prob * (1 - prob) * mt).float()
            diag32 = torch.bmm(s32, h1sq) + reg32 + 1e-10
            rt = torch.full((bsz, p), 0.1, dtype=torch.float32)
            moving = on if stop is None else stop > j  # frozen label sets get no predictor
            rhs = torch.where(moving[..., None], theta * reg, 0.0)
            tangent = _cg(h1, s32, rhs.float(), diag32, rt, reg32, 4 * r + 10).double()
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
    label set (P = len(seeds)). Trains on the weighted rows only; returns logits for every
    row: (B x P x n).
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
    xt, yt, mt = _pack_rows(x, y.float(), m.float())
    count = mt.sum(-1).clamp_min(1)

    def forward(inp: torch.Tensor) -> torch.Tensor:
        # every label set's first layer in one product: (B x n x r) @ (B x r x P*h)
        pre = torch.bmm(inp, w1.permute(0, 2, 1, 3).reshape(bsz, r, p * hidden))
        hid = torch.relu(pre.view(bsz, -1, p, hidden) + b1[:, None])
        return torch.einsum("bnph,bph->bpn", hid, w2) + b2[..., None]

    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            f = forward(xt)
            loss = ((F.softplus(f) - yt * f) * mt).sum(-1) / count
            reg = weight_decay * ((w1 * w1).sum((-1, -2)) + (w2 * w2).sum(-1))
            (loss + reg).sum().backward()
            opt.step()
    with torch.no_grad():
        return forward(x).double()
