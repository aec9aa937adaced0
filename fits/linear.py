"""Small non-negative least squares, batched: the linear half of every variable projection.

For many problems at once (one per grid point of the non-linear parameters), each with a handful
of coefficients, the exact NNLS solution is the best feasible one among the unconstrained
solutions on every subset of the coefficients (the active sets); with ≤ 4 coefficients that is at
most 15 small solves per problem, done as a few batched `np.linalg.solve` calls.
"""

from __future__ import annotations

import itertools

import numpy as np


def nnls_batch(G: np.ndarray, r: np.ndarray, tt: float | np.ndarray, free: tuple[int, ...] = ()) -> np.ndarray:
    """Minimise cᵀGc − 2cᵀr + tt over c ≥ 0 (coefficients listed in `free` may take any sign).

    G: (k, m, m) Gram matrices, r: (k, m). Returns c of shape (k, m); rows without any finite
    solution stay 0.
    """
    k, m = r.shape
    best = np.full(k, np.inf)
    coef = np.zeros((k, m))
    free_mask = np.zeros(m, dtype=bool)
    free_mask[list(free)] = True
    for size in range(m, 0, -1):
        for subset in itertools.combinations(range(m), size):
            s = list(subset)
            Gs = G[:, s][:, :, s]
            ridge = 1e-13 * np.trace(Gs, axis1=1, axis2=2)[:, None, None] * np.eye(size)
            with np.errstate(all="ignore"):
                try:
                    c = np.linalg.solve(Gs + ridge, r[:, s][..., None])[..., 0]
                except np.linalg.LinAlgError:  # an infinite Gram matrix (values near the float's range): no fit
                    c = np.full((k, size), np.nan)
            sse = tt - 2 * np.einsum("ki,ki->k", c, r[:, s]) + np.einsum("ki,kij,kj->k", c, Gs, c)
            ok = np.all((c >= 0) | free_mask[s], axis=1) & np.isfinite(sse) & (sse < best)
            best = np.where(ok, sse, best)
            full = np.zeros((k, m))
            full[:, s] = c
            coef = np.where(ok[:, None], full, coef)
    return coef


def gram(features: np.ndarray, target: np.ndarray, weights: np.ndarray):
    """Gram matrix, right-hand side and target norm of weighted least squares, batched.

    features: (k, n, m) — k problems, n points, m coefficients; target: (n,) or (k, n)."""
    fw = features * weights[None, :, None]
    G = np.einsum("kni,knj->kij", fw, features)
    t = np.broadcast_to(target, features.shape[:2])
    r = np.einsum("kni,kn->ki", fw, t)
    tt = np.einsum("kn,kn->k", t * weights[None, :], t)
    return G, r, tt
