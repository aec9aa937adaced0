"""The one robust objective every form minimises, and the solver that minimises it.

Objective: the weighted mean of Huber(δ) over log residuals r = log(predicted) − log(observed),
in float64. δ = 1e-3 (Hoffmann et al. 2022; Besiroglu et al. 2024): residuals below 0.1% count
quadratically, larger ones linearly, so a few odd runs cannot drag a fit.

`solve` runs scipy's trust-region least squares with that Huber loss written as a per-point
robust loss, so each point keeps its own weight, and with tolerances tight enough that the fit
stops at the optimum rather than near it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

HUBER_DELTA = 1e-3
TOL = 1e-14
"""Solver stopping tolerance of a fit: tight, so a fit stops at its optimum rather than near it."""
REFIT_TOL = 1e-10
"""Bootstrap and jackknife refits: their spread dwarfs what the last digits would change."""


def huber(r: np.ndarray, delta: float = HUBER_DELTA, weights: np.ndarray | None = None) -> float:
    """Weighted mean Huber loss of residuals `r` (the objective every fit reports)."""
    return float(huber_rows(np.asarray(r, dtype=np.float64)[None, :], delta, weights)[0])


def huber_rows(r: np.ndarray, delta: float = HUBER_DELTA, weights: np.ndarray | None = None) -> np.ndarray:
    """The objective for many candidates at once: one row of residuals each; inf where a row has
    a non-finite residual (a candidate predicting a non-positive loss)."""
    a = np.abs(r)
    with np.errstate(invalid="ignore"):
        h = np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
    w = np.ones(r.shape[-1]) if weights is None else np.asarray(weights, dtype=np.float64)
    out = (h * w).sum(axis=-1) / w.sum()
    return np.where(np.all(np.isfinite(r), axis=-1), out, np.inf)


def log_residuals(predicted: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """log(predicted) − log(observed); predictions at or below zero give +inf residuals."""
    p = np.asarray(predicted, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf) - np.log(observed)


@dataclass(frozen=True)
class Solution:
    """What `solve` found: parameters, objective (weighted mean Huber), and whether it converged."""

    x: np.ndarray
    objective: float
    converged: bool
    message: str
    jac: np.ndarray
    """Jacobian of the residuals at `x` (for covariance estimates)."""
    residuals: np.ndarray


def _huber_rho(weights: np.ndarray, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """least_squares' loss: 0.5·Σρ(r²) = Σ w·Huber_δ(r)."""

    def rho(z: np.ndarray) -> np.ndarray:
        out = np.empty((3, z.size))
        small = z <= delta * delta
        s = np.sqrt(np.where(small, 1.0, z))
        out[0] = weights * np.where(small, z, 2.0 * delta * s - delta * delta)
        out[1] = weights * np.where(small, 1.0, delta / s)
        out[2] = weights * np.where(small, 0.0, -0.5 * delta / (s * s * s))
        return out

    return rho


def solve(
    residuals: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    delta: float = HUBER_DELTA,
    max_nfev: int = 2000,
    tol: float = TOL,
) -> Solution:
    """Minimise the weighted mean Huber of `residuals(x)` from `x0` within [lower, upper].

    `tol` loosens the stopping rule for screening several starts before the winner is polished."""
    x0 = np.asarray(x0, dtype=np.float64)
    n_res = residuals(x0).size
    w = np.ones(n_res) if weights is None else np.asarray(weights, dtype=np.float64)
    lo = np.full(x0.size, -np.inf) if lower is None else np.asarray(lower, dtype=np.float64)
    hi = np.full(x0.size, np.inf) if upper is None else np.asarray(upper, dtype=np.float64)
    x0 = np.clip(x0, np.nextafter(lo, np.inf), np.nextafter(hi, -np.inf))
    res = least_squares(
        residuals,
        x0,
        jac=jacobian,
        bounds=(lo, hi),
        loss=_huber_rho(w, delta),
        method="trf",
        x_scale="jac",
        ftol=tol,
        xtol=tol,
        gtol=tol,
        max_nfev=max_nfev,
    )
    r = residuals(res.x)
    ok = bool(res.status > 0 and np.all(np.isfinite(r)))
    return Solution(res.x, huber(r, delta, w), ok, str(res.message), np.asarray(jacobian(res.x)), r)
