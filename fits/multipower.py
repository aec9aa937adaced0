"""Multi-power law (Luo et al. 2025, arXiv:2503.12811): the loss curve under any LR schedule.

    L(t) = L0 + A·(S1(t) + S_W)^−α − B·Σ_{k=1}^{t−1} (η_{k−1} − η_k)·G(η_k^−γ·S_k(t)),
    G(x) = 1 − (C·x + 1)^−β,

with η_k the LR of step k, S1 + S_W the LR area of every step before t (warmup included) and
S_k(t) = η_k + … + η_{t−1}. The loss logged at step t has seen steps 0 … t−1. As in the authors'
implementation the sum runs over every step, warmup included (rising LRs count with the opposite
sign), so their published parameters carry over.

The sum has one term per step for every point of the curve. Far from t, G varies slowly, so steps
are grouped in bins that widen geometrically with the distance to t (exact for the last
`EXACT` steps, then 1/`GROWTH` wider per bin, and cut wherever log η crosses a multiple of
`LEVEL`); each bin keeps its LR drops, split by sign, its
drop-weighted mean area and log LR. The error against the full sum stays below 1e-5 of the loss
(tests check it); the cost is a few hundred terms per point instead of t.

This module owns the annealing term and its derivatives; `fits.curvelaw` fits it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT = 16
GROWTH = 8
LEVEL = 0.1
_LR_FLOOR = 1e-30


@dataclass(frozen=True)
class DropTerms:
    """Binned annealing terms of one curve: term j belongs to point `point[j]`."""

    point: np.ndarray
    amplitude: np.ndarray
    """Sum of η_{k−1} − η_k over the bin's steps of one sign."""
    area: np.ndarray
    """Drop-weighted mean S_k(t) over the bin."""
    log_lr: np.ndarray
    """Drop-weighted mean log η_k over the bin."""
    n_points: int


def _distance_edges(max_distance: int) -> np.ndarray:
    e = list(range(EXACT + 1))
    while e[-1] < max_distance:
        e.append(e[-1] + max(1, e[-1] // GROWTH))
    return np.asarray(e, dtype=np.int64)


def _level_edges(log_lr: np.ndarray) -> np.ndarray:
    """Steps where the LR crosses a level of the log grid, so no bin spans a large LR ratio."""
    level = np.floor(log_lr / LEVEL)
    return np.flatnonzero(np.diff(level) != 0) + 1


def drop_terms(lrs: np.ndarray, steps: np.ndarray) -> DropTerms:
    """Bin the annealing sum of every point `steps` (loss after steps 0 … t−1 with LRs `lrs`)."""
    lrs = np.asarray(lrs, dtype=np.float64)
    t = np.asarray(steps, dtype=np.int64)
    area = np.concatenate([[0.0], np.cumsum(lrs)])  # area[k] = η_0 + … + η_{k−1}
    drop = np.zeros(lrs.size)
    drop[1:] = lrs[:-1] - lrs[1:]
    log_lr = np.log(np.maximum(lrs, _LR_FLOOR))
    dist = _distance_edges(int(t.max()))
    levels = _level_edges(log_lr)
    # Bins of point t: steps k in [lo, hi], 1 ≤ k ≤ t − 1, bounded by distance and LR-level edges.
    los, his, pts = [], [], []
    for j, tj in enumerate(t):
        if tj < 2:
            continue
        b = np.union1d(tj - dist[dist < tj - 1], levels[(levels > 1) & (levels < tj)])
        b = np.union1d(b, [1, tj])
        los.append(b[:-1])
        his.append(b[1:] - 1)
        pts.append(np.full(b.size - 1, j))
    lo = np.concatenate(los) if los else np.zeros(0, np.int64)
    hi = np.concatenate(his) if his else np.zeros(0, np.int64)
    point = np.concatenate(pts) if pts else np.zeros(0, np.int64)
    out_p, amps, areas, logs = [], [], [], []
    for sign in (1.0, -1.0):
        d = np.where(sign * drop > 0, drop, 0.0)
        a = np.abs(d)

        def binsum(x):
            c = np.concatenate([[0.0], np.cumsum(x)])
            return c[hi + 1] - c[lo]

        weight = binsum(a)
        keep = weight > 0
        w = weight[keep]
        out_p.append(point[keep])
        amps.append(binsum(d)[keep])
        areas.append(area[t[point[keep]]] - binsum(a * area[:-1])[keep] / w)
        logs.append(binsum(a * log_lr)[keep] / w)
    return DropTerms(
        point=np.concatenate(out_p),
        amplitude=np.concatenate(amps),
        area=np.maximum(np.concatenate(areas), 0.0),
        log_lr=np.concatenate(logs),
        n_points=t.size,
    )


def exact_drop(lrs: np.ndarray, steps: np.ndarray, C: float, beta: float, gamma: float) -> np.ndarray:
    """The annealing sum Σ (η_{k−1} − η_k)·G(η_k^−γ·S_k(t)) term by term (slow; for checks)."""
    lrs = np.asarray(lrs, dtype=np.float64)
    area = np.concatenate([[0.0], np.cumsum(lrs)])
    out = []
    for t in np.asarray(steps, dtype=np.int64):
        k = np.arange(1, t)
        x = np.maximum(lrs[k], _LR_FLOOR) ** -gamma * (area[t] - area[k])
        out.append(np.sum((lrs[k - 1] - lrs[k]) * (1.0 - (C * x + 1.0) ** -beta)))
    return np.asarray(out)


class MultiPower:
    """The multi-power law's annealing term, for `fits.curvelaw`."""

    name = "multi-power law"
    shape_names = ("C", "beta", "gamma")
    shape_lower = np.array([1e-6, 1e-4, 0.0])
    shape_upper = np.array([1e6, 10.0, 3.0])
    shape_starts = tuple((c, b, g) for c in (0.5, 2.0, 8.0) for b in (0.3, 0.6) for g in (0.4, 0.7))

    @staticmethod
    def precompute(lrs: np.ndarray, steps: np.ndarray) -> DropTerms:
        return drop_terms(lrs, steps)

    @staticmethod
    def drop(pre: DropTerms, shape: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The annealing sum at every point, and its derivatives by (C, β, γ)."""
        C, beta, gamma = shape
        q = np.exp(-gamma * pre.log_lr) * pre.area  # η^−γ·S
        z = 1.0 + C * q
        zb = z**-beta
        g = pre.amplitude * (1.0 - zb)
        dz = pre.amplitude * beta * zb / z  # dG/dz·amplitude
        parts = np.stack([g, dz * q, pre.amplitude * zb * np.log(z), -dz * C * q * pre.log_lr])
        sums = np.stack([np.bincount(pre.point, weights=p, minlength=pre.n_points) for p in parts])
        return sums[0], sums[1:].T


def fit_multipower(curves, *, E: float | None = None, shape: dict[str, float] | None = None):
    """Fit the multi-power law to `curves` (`fits.Curve`): (C, β, γ) shared by every run, L0, A,
    α, B as power laws in each curve's scale; `E` pins the floor of L0; `shape` fixes shape
    parameters (see `fits.curvelaw.fit_curve_law`). Returns a `CurveLawFit`."""
    from fits.curvelaw import fit_curve_law

    return fit_curve_law(MultiPower, curves, E=E, shape=shape)
