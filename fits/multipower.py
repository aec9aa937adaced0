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

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

EXACT = 16
GROWTH = 8
LEVEL = 0.1
_LR_FLOOR = 1e-30
RECENT_BYTES = 256 * 2**20
"""Memory kept for the binned terms of the curves seen lately (`drop_terms`)."""


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


def _prefix(x: np.ndarray) -> np.ndarray:
    """[0, x_0, x_0 + x_1, …]: the sum of `x` before each index."""
    out = np.empty(x.size + 1)
    out[0] = 0.0
    np.cumsum(x, out=out[1:])
    return out


def _bins(t: np.ndarray, dist: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, point): the bins [lo, hi] of steps 1 … t − 1 of every point, bounded by distance and LR-level edges."""
    los, his, pts = [], [], []
    for j, tj in enumerate(t):
        if tj < 2:
            continue
        b = np.union1d(tj - dist[dist < tj - 1], levels[(levels > 1) & (levels < tj)])
        b = np.union1d(b, [1, tj])
        los.append(b[:-1])
        his.append(b[1:] - 1)
        pts.append(np.full(b.size - 1, j))
    if not los:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(los), np.concatenate(his), np.concatenate(pts)


def _binned(lrs: np.ndarray, t: np.ndarray) -> DropTerms:
    """`drop_terms` computed afresh; `lrs` holds exactly the steps 0 … max(t) − 1 the points have seen."""
    area = _prefix(lrs)  # area[k] = η_0 + … + η_{k−1}
    drop = np.zeros(lrs.size)
    np.subtract(lrs[:-1], lrs[1:], out=drop[1:])
    log_lr = np.log(np.maximum(lrs, _LR_FLOOR))
    bins = _bins(t, _distance_edges(int(t.max())), _level_edges(log_lr))
    parts = [_signed_terms(sign, drop, area, log_lr, t, bins) for sign in (1.0, -1.0)]
    point, amplitude, mean_area, mean_log = (np.concatenate(p) for p in zip(*parts))
    return DropTerms(point=point, amplitude=amplitude, area=np.maximum(mean_area, 0.0), log_lr=mean_log,
                     n_points=t.size)


def _signed_terms(sign: float, drop, area, log_lr, t, bins) -> tuple[np.ndarray, ...]:
    """(point, amplitude, area, log LR) of the bins' drops of one sign, for the bins that have any.

    The sums run over only the steps whose drop has this sign (the others would add exact zeros)."""
    lo, hi, point = bins
    k = np.flatnonzero(sign * drop > 0)
    a = np.abs(drop[k])
    first, stop = np.searchsorted(k, lo), np.searchsorted(k, hi + 1)

    def binsum(x):
        c = _prefix(x)
        return c[stop] - c[first]

    weight = binsum(a)
    keep = weight > 0
    w = weight[keep]
    mean_area = area[t[point[keep]]] - binsum(a * area[k])[keep] / w
    return point[keep], sign * w, mean_area, binsum(a * log_lr[k])[keep] / w


def drop_terms(lrs: np.ndarray, steps: np.ndarray) -> DropTerms:
    """Bin the annealing sum of every point `steps` (loss after steps 0 … t−1 with LRs `lrs`).

    A fit, its refits (floor profile, jackknife, bootstrap) and the predictions from each bin the same
    curves over and over, and on runs of millions of steps binning is most of their time: the terms of
    the curves seen lately are kept, found again by a digest of the LRs and steps (so an array changed in
    place is binned afresh). Their arrays are read-only."""
    t = np.ascontiguousarray(steps, dtype=np.int64)
    lrs = np.ascontiguousarray(np.asarray(lrs, dtype=np.float64)[: max(int(t.max(initial=0)), 1)])
    key = _digest(lrs, t)
    terms = _RECENT.get(key)
    if terms is None:
        terms = _RECENT.put(key, _binned(lrs, t))
    return terms


def _digest(lrs: np.ndarray, t: np.ndarray) -> bytes:
    """SHA-256 of the steps and the LRs they have seen (hardware-accelerated on most CPUs: ~40 ms for 10⁷ LRs)."""
    h = hashlib.sha256(t.size.to_bytes(8, "little"))
    h.update(t)
    h.update(lrs)
    return h.digest()


class _Recent:
    """The binned terms of the curves seen lately, by digest, up to `budget` bytes (least recently used out);
    their arrays made read-only, since every caller shares them."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._terms: OrderedDict[bytes, DropTerms] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @staticmethod
    def nbytes(terms: DropTerms) -> int:
        return sum(a.nbytes for a in (terms.point, terms.amplitude, terms.area, terms.log_lr))

    def get(self, key: bytes) -> DropTerms | None:
        with self._lock:
            terms = self._terms.get(key)
            if terms is not None:
                self._terms.move_to_end(key)
            return terms

    def put(self, key: bytes, terms: DropTerms) -> DropTerms:
        for a in (terms.point, terms.amplitude, terms.area, terms.log_lr):
            a.setflags(write=False)
        size = self.nbytes(terms)
        if size > self.budget:
            return terms
        with self._lock:
            if key not in self._terms:
                self._terms[key] = terms
                self._size += size
            while self._size > self.budget:
                _, old = self._terms.popitem(last=False)
                self._size -= self.nbytes(old)
        return terms

    def clear(self) -> None:
        with self._lock:
            self._terms.clear()
            self._size = 0


_RECENT = _Recent(RECENT_BYTES)


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
